"""Scalar functions: the Spark form and the pandas form of each give the same values on the same rows, and
both agree with values worked out independently (Python's json module, integer floor division)."""

from __future__ import annotations

import json
import random
from typing import Any

import pandas as pd
import pytest

from tiltframe.engine.events.spark_expressions import to_column
from tiltframe.functions import scalars
from tiltframe.model.expressions import Attr, Call, Literal
from tiltframe.model.streams import Attribute, AttrType, StreamDef
from tiltframe.retrieval.evaluate import evaluate

STREAM = StreamDef(
    "rows",
    (
        Attribute("s", AttrType.STRING),
        Attribute("a", AttrType.LONG),
        Attribute("b", AttrType.LONG),
        Attribute("d", AttrType.DOUBLE),
        Attribute("ok", AttrType.BOOL),
    ),
)


def _rows() -> pd.DataFrame:
    rnd = random.Random(3)
    edges = [0, 1, -1, 999, 1000, -1000, -1001, 86_399_999, 86_400_000, 1_700_000_000_000, -1_700_000_000_001]
    longs = edges + [rnd.randrange(-(2**45), 2**45) for _ in range(120)]
    texts = ['plain', 'quote " and \\ back', "naïve 東京", "", "{\"n\": 1}", "line\nbreak"]
    n = len(longs)
    return pd.DataFrame({
        "s": [texts[i % len(texts)] if i % 7 else None for i in range(n)],
        "a": pd.array([v if i % 11 else None for i, v in enumerate(longs)], dtype="Int64"),
        "b": pd.array([longs[(i * 7 + 3) % n] for i in range(n)], dtype="Int64"),
        "d": [float(i) / 4 if i % 5 else None for i in range(n)],
        "ok": [bool(i % 2) for i in range(n)],
    })


def _call(name: str, *args: str) -> Call:
    """``name(args)`` as validation leaves it: json_encode as json_object; a quoted argument a string."""
    exprs = tuple(Literal(a.strip("'"), "string") if a.startswith("'") else Attr(a) for a in args)
    return scalars.canonical_call(Call(name, exprs))


def _both(spark: Any, expr: Call) -> tuple[list[Any], list[Any]]:
    """``expr`` computed by Spark and by pandas, row by row."""
    frame = _rows()
    schema = "s string, a long, b long, d double, ok boolean"
    df = spark.createDataFrame(frame.astype(object).where(frame.notna(), None), schema)
    by_spark = [r[0] for r in df.select(to_column(expr, STREAM)).collect()]
    by_pandas = evaluate(expr, frame, None)
    return by_spark, [None if v is pd.NA else v for v in pd.Series(by_pandas).astype(object)]


@pytest.mark.slow
@pytest.mark.parametrize("unit", ["ms", "s", "m", "h", "d"])
def test_date_diff_spark_and_pandas_agree(spark: Any, unit: str) -> None:
    by_spark, by_pandas = _both(spark, _call("date_diff", f"'{unit}'", "a", "b"))
    size = scalars.DATE_DIFF_UNITS[unit]
    frame = _rows()
    expected = [None if pd.isna(a) else b // size - a // size for a, b in zip(frame.a, frame.b, strict=True)]
    assert by_spark == expected
    assert by_pandas == expected


@pytest.mark.slow
def test_json_encode_spark_and_pandas_agree(spark: Any) -> None:
    by_spark, by_pandas = _both(spark, _call("json_encode", "s", "a", "d", "ok"))
    assert by_spark == by_pandas
    frame = _rows().astype(object)
    for text, row in zip(by_pandas, frame.itertuples(), strict=True):
        expected = {k: (None if pd.isna(getattr(row, k)) else getattr(row, k)) for k in ("s", "a", "d", "ok")}
        assert json.loads(text) == expected


def test_json_encode_writes_lists_and_numpy_values() -> None:
    import numpy as np

    frame = pd.DataFrame({
        "names": [np.array(["a", "b"], dtype=object), [], None],
        "n": pd.array([1, None, 3], dtype="Int64"),
        "x": np.array([0.1, np.nan, 2.5], dtype="float32"),
    })
    assert list(evaluate(_call("json_encode", "names", "n", "x"), frame, None)) == [
        '{"names":["a","b"],"n":1,"x":0.1}',
        '{"names":[],"n":null,"x":null}',
        '{"names":null,"n":3,"x":2.5}',
    ]
