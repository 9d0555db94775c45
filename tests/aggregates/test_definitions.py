"""The new functions in definitions: text and Python builder give the same spec, constants are checked
where they were written, and quantile sketches name one output per quantile."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

import tiltframe as tf
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.errors import DefinitionError
from tiltframe.lang import builder as b
from tiltframe.lang import parse_app
from tiltframe.store.sql import SqlStore

STREAM = "define stream S (k string, v double, n long, ts long);\n"


def app_text(select: str) -> str:
    return STREAM + f"define aggregation A from S select k, {select} group by k aggregate by ts every sec, min;"


def test_builder_gives_the_spec_of_the_text() -> None:
    text = app_text("stdDev(v) as sd, first(v) as f, distinctCount(n, 14) as u, kll(v, [0.5, 0.99], 400) as q, "
                    "dds(v, [0.9], 0.02) as d, hdr(n, [0.99], 3) as h")
    built = b.app(
        b.stream("S", k="string", v="double", n="long", ts="long"),
        b.aggregation("A", source="S", group_by=["k"], by="ts", every="sec, min", select=[
            "k", b.stdDev("v").as_("sd"), b.first("v").as_("f"), b.distinctCount("n", 14).as_("u"),
            b.kll("v", [0.5, 0.99], 400).as_("q"), b.dds("v", [0.9], 0.02).as_("d"),
            b.hdr("n", [0.99], 3).as_("h")]),
    )
    assert built == parse_app(text)


def test_quantile_outputs() -> None:
    app = tf.load_app(app_text("kll(v, [0.5, 0.999]) as q, dds(v) as d"))
    outputs = AggregationLayout.of(app, "A").output_types
    assert [name for name in outputs if name.startswith(("q_", "d_"))] == [
        "q_p50", "q_p99_9", "d_p50", "d_p90", "d_p99", "d_p99_9"]


#: Where the select list starts on line 2 of ``app_text``.
SELECT_COLUMN = len("define aggregation A from S select k, ") + 1


@pytest.mark.parametrize(
    ("select", "at", "message"),
    [
        ("kll(v, [0.5, 1.5]) as q", "[0.5, 1.5]", "a quantile must be a number from 0 to 1, got 1.5"),
        ("kll(v, 0.5) as q", "0.5", "the quantiles must be a list of numbers from 0 to 1"),
        ("kll(v, [0.5, 0.5]) as q", "[", "the quantiles [0.5, 0.5] repeat a value"),
        ("kll(v, [0.5], 3) as q", "[", "k must be an integer from 8 to 65535, got 3"),
        ("dds(v, [0.5], 0.9) as q", "[", "relative_accuracy must be a number from 1e-06 to 0.5, got 0.9"),
        ("hdr(v, [0.5], 4) as q", "[", "digits must be an integer from 1 to 3, got 4"),
        ("distinctCount(n, 30) as u", "30", "lg_k must be an integer from 4 to 21, got 30"),
        ("kll(v, [0.5], 200, 1) as q", "[", "kll() takes the argument and at most 2 more"),
        ("kll(v, [n]) as q", "[n]", "'[n]' is not a constant"),
        ("stdDev(v, 2) as s", "stdDev", "stdDev() takes one argument, got 2"),
        ("first(v) as q_p50, kll(v, [0.5]) as q", "kll", "'q_p50', an output of q, is also selected"),
    ],
)
def test_bad_constants_point_at_where_they_were_written(select: str, at: str, message: str) -> None:
    with pytest.raises(DefinitionError) as excinfo:
        parse_app(app_text(select))
    assert message in excinfo.value.message
    assert (excinfo.value.line, excinfo.value.column) == (2, SELECT_COLUMN + select.index(at))


def test_views_finalize_statistics_and_leave_sketches_out(tmp_path) -> None:
    app = tf.load_app(app_text("stdDevSample(v) as sd, delta(n) as d, kll(v) as q"))
    layout = AggregationLayout.of(app, "A")
    with SqlStore.sqlite(tmp_path / "s.db") as store:
        store.ensure_schema(layout)
    engine = sa.create_engine(f"sqlite:///{tmp_path / 's.db'}")
    with engine.connect() as conn:
        columns = [c["name"] for c in sa.inspect(conn).get_columns("A_SECONDS_FINAL")]
    engine.dispose()
    assert "sd" in columns and "d" in columns
    assert not any(c.startswith("q") for c in columns)


def test_one_quantile_is_one_output_column() -> None:
    import datasketches as ds
    import pandas as pd

    from tiltframe.aggregates.targets.in_pandas import PandasOps

    sketch = ds.kll_doubles_sketch(200)
    for x in (1.0, 2.0, 3.0):
        sketch.update(x)
    layout = AggregationLayout.of(tf.load_app(app_text("kll(v, [0.5]) as q")), "A")
    final = layout.finalized({"q_KLL": pd.Series([sketch.serialize(), None])}, PandasOps())
    assert list(final) == ["q_p50"]
    assert list(final["q_p50"]) == [2.0, None]
