"""Every aggregate a rollup accepts, over buckets some of whose values are all missing (NULL or NaN),
against numpy over the raw events at every level and over a whole range: a bucket with no value answers
NULL (or the function's documented empty value: 0 for ``count`` and ``distinctCount``), and merges with
the buckets that have values as if it were not there, however the events are cut into micro-batches and
on every store.

The functions come from the registry, so a function registered later is covered here without an edit:
its empty buckets are held to NULL at once, and ``test_every_rollup_function_has_an_oracle`` asks for its
exact answer (or its documented bound) in ``ORACLES``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import datasketches as ds
import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import tiltframe as tf
from tests.oracle import DUCK_UNITS, open_pipeline
from tests.retrieval.empty_sketches import EMPTY as EMPTY_SKETCHES
from tests.servers import SERVER_STORES, app_with_store, fresh_database
from tiltframe.aggregates import registry
from tiltframe.aggregates.registry import AggregateFunction
from tiltframe.aggregates.sketches.stored import BUILD, MERGE, dds_quantiles, hdr_quantiles, hll_estimate, kll_quantiles
from tiltframe.aggregates.states import Merge

#: The documented result of a bucket with no value, where it is not NULL (docs/functions.md).
EMPTY = {"count": 0, "distinctCount": 0}
ARGS = (("price", "d"), ("quantity", "l"))  # a nullable double, and a long for the functions on integers
PERS = ("seconds", "minutes", "hours", "days", "months", "years")
ANCHORS = [pd.Timestamp(t, tz="UTC").value // 1_000_000
           for t in ("2023-12-31 23:59:59", "2024-02-29 23:59:59", "2024-03-31 23:59:30")]
RANGE = tuple(pd.Timestamp(t, tz="UTC").value // 1_000_000 for t in ("2023-01-01", "2025-01-01"))
#: A key whose events never carry a value: its buckets are empty at every level.
NO_VALUES = "ORCL"


def rollup_functions() -> list[AggregateFunction]:
    """Every registered function a rollup accepts (the registry says which it refuses)."""
    return [registry.get(name) for name in registry.names() if registry.get(name).bounded]


@dataclass(frozen=True)
class Item:
    function: AggregateFunction
    arg: str | None
    alias: str

    @property
    def settings(self) -> dict[str, Any]:
        return self.function.resolve(())

    @property
    def outputs(self) -> tuple[str, ...]:
        return self.function.output_names(self.alias, self.settings)


def items() -> list[Item]:
    out = []
    for fn in rollup_functions():
        if not fn.takes_arg:
            out.append(Item(fn, None, f"{fn.name.lower()}_n"))
            continue
        out += [Item(fn, arg, f"{fn.name.lower()}_{tag}") for arg, tag in ARGS]
    return out


def app_text() -> str:
    select = ", ".join(f"{i.function.name}({i.arg or ''}) as {i.alias}" for i in items())
    return f"""
define stream TradeStream (symbol string, price double, quantity long, ts long);
define aggregation TradeAggregation
from TradeStream
select symbol, {select}
group by symbol
aggregate by ts every sec ... year;
"""


# --- the oracles: each output's expected value from a group's events -------------------------------------


@dataclass(frozen=True)
class Within:
    """A sketch's answer: ``ok(got)`` holds within its documented bound of the exact ``value``."""

    value: float
    ok: Callable[[float], bool]

    def __repr__(self) -> str:
        return f"~{self.value!r}"


def _values(group: pd.DataFrame, arg: str | None) -> np.ndarray:
    """The group's values of ``arg`` that are not missing (NULL or NaN), in (event time, arrival) order."""
    ordered = group.sort_values(["ts", "arrival"], kind="stable")
    values = ordered[arg].to_numpy(dtype=object)
    return np.array([v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))],
                    dtype=object)


def _exact(fn: Callable[[np.ndarray], Any]) -> Callable[[np.ndarray, dict[str, Any]], tuple[Any, ...]]:
    return lambda v, _s: (fn(v) if len(v) else None,)


def _moment(ddof: int, root: bool) -> Callable[[np.ndarray, dict[str, Any]], tuple[Any, ...]]:
    def expected(v: np.ndarray, _s: dict[str, Any]) -> tuple[Any, ...]:
        if len(v) <= ddof:
            return (None,)
        x = np.asarray(v, dtype=float)
        var = float(np.sum((x - x.mean()) ** 2) / (len(x) - ddof))
        return (math.sqrt(var) if root else var,)

    return expected


def _distinct(v: np.ndarray, s: dict[str, Any]) -> tuple[Any, ...]:
    exact = len(set(v.tolist()))
    bound = 3 * 1.04 / math.sqrt(2 ** s["lg_k"]) * exact  # three relative standard errors
    return (Within(exact, lambda got: abs(got - exact) <= bound),)


def _kll(v: np.ndarray, s: dict[str, Any]) -> tuple[Any, ...]:
    if not len(v):
        return (None,) * len(s["quantiles"])
    x = np.sort(np.asarray(v, dtype=float))
    eps = ds.kll_doubles_sketch.get_normalized_rank_error(s["k"], False)

    def within_rank(q: float) -> Callable[[float], bool]:
        def ok(got: float) -> bool:  # the ranks the estimate stands for reach q within the rank error
            below = np.searchsorted(x, got, "left") / len(x)
            through = np.searchsorted(x, got, "right") / len(x)
            return below - eps <= q <= through + eps
        return ok

    return tuple(Within(float(x[math.floor(q * (len(x) - 1))]), within_rank(q)) for q in s["quantiles"])


def _dds(v: np.ndarray, s: dict[str, Any]) -> tuple[Any, ...]:
    if not len(v):
        return (None,) * len(s["quantiles"])
    x, alpha = np.sort(np.asarray(v, dtype=float)), s["relative_accuracy"]

    def near(exact: float) -> Within:  # within the relative accuracy of the quantile of rank floor(q(n-1))
        return Within(exact, lambda got: abs(got - exact) <= alpha * abs(exact) * (1 + 1e-9))

    return tuple(near(float(x[math.floor(q * (len(x) - 1))])) for q in s["quantiles"])


def _hdr(v: np.ndarray, s: dict[str, Any]) -> tuple[Any, ...]:
    """The value of rank max(floor(q n + 1/2), 1) of the whole non-negative values; the estimate at or
    above it, within 1/2^(bits of 10^digits) relative (exact below 2 * 10^digits rounded up to a power of 2)."""
    whole = np.sort([min(int(x), 2**63 - 1) for x in np.asarray(v, dtype=float) if x >= 0]).astype(np.int64)
    if not len(whole):
        return (None,) * len(s["quantiles"])
    half_count = 2 ** math.ceil(math.log2(2 * 10 ** s["digits"])) // 2

    def near(q: float) -> Within:
        rank = max(math.floor(Fraction(str(q)) * len(whole) + Fraction(1, 2)), 1)
        exact = int(whole[rank - 1])
        if exact < 2 * half_count:  # a bin per value
            return Within(exact, lambda got: got == exact)
        return Within(exact, lambda got: exact <= got <= exact + exact / half_count)

    return tuple(near(q) for q in s["quantiles"])


def _first(v: np.ndarray, _s: dict[str, Any]) -> tuple[Any, ...]:
    return (v[0] if len(v) else None,)


def _last(v: np.ndarray, _s: dict[str, Any]) -> tuple[Any, ...]:
    return (v[-1] if len(v) else None,)


#: A value no oracle states (a function without one; test_every_rollup_function_has_an_oracle fails then).
UNCHECKED = object()
#: Per function: its outputs' expected values from the group's present values (in event order) and settings.
ORACLES: dict[str, Callable[[np.ndarray, dict[str, Any]], tuple[Any, ...]]] = {
    "sum": _exact(lambda v: sum(v.tolist())),
    "avg": _exact(lambda v: float(np.mean(np.asarray(v, dtype=float)))),
    "min": _exact(lambda v: min(v.tolist())),
    "max": _exact(lambda v: max(v.tolist())),
    "stdDev": _moment(0, True), "stdDevSample": _moment(1, True), "var": _moment(0, False),
    "varSample": _moment(1, False),
    "first": _first, "last": _last,
    "delta": _exact(lambda v: v[-1] - v[0]),
    "distinctCount": _distinct,
    "kll": _kll, "dds": _dds, "hdr": _hdr,
}


def expected(group: pd.DataFrame, item: Item) -> tuple[Any, ...]:
    if item.arg is None:  # count(): the events
        return (len(group),)
    values = _values(group, item.arg)
    if not len(values):  # no value: NULL, or the documented empty value
        return (EMPTY.get(item.function.name),) * len(item.outputs)
    oracle = ORACLES.get(item.function.name)
    return (UNCHECKED,) * len(item.outputs) if oracle is None else oracle(values, item.settings)


def agrees(got: Any, want: Any) -> bool:
    missing = got is None or got is pd.NA or (isinstance(got, float) and math.isnan(got))
    if want is None:
        return missing
    if missing:
        return False
    if want is UNCHECKED:
        return True
    if isinstance(want, Within):
        return want.ok(float(got))
    if isinstance(want, float) or isinstance(got, float):
        return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-9)
    return int(got) == int(want)


def buckets(events: pd.DataFrame, per: str) -> np.ndarray:
    """The GMT bucket start of each event at ``per``, by DuckDB."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("events", events[["ts"]])
    query = f"SELECT epoch_ms(date_trunc('{DUCK_UNITS[per]}', make_timestamp(ts * 1000))) AS b FROM events"
    return con.execute(query).fetchnumpy()["b"]


def check(app: tf.AppSpec, data_dir: Path, events: pd.DataFrame) -> None:
    """Every output at every level, and the totals of the whole range, against the oracles."""
    all_items = items()
    outputs = [o for i in all_items for o in i.outputs]
    for per in (*PERS, None):
        within = f"within {RANGE[0]}L, {RANGE[1]}L"
        query = (f'from TradeAggregation {within} per "{per}" select AGG_TIMESTAMP, symbol, {", ".join(outputs)}'
                 if per else f"from TradeAggregation {within} select symbol, {', '.join(outputs)}")
        got = tf.query(app, query, data_dir=data_dir)
        keys = ["AGG_TIMESTAMP", "symbol"] if per else ["symbol"]
        frame = events.assign(AGG_TIMESTAMP=buckets(events, per)) if per else events
        groups = dict(list(frame.groupby(keys, sort=True)))
        got = got.sort_values(keys).reset_index(drop=True)
        assert len(got) == len(groups), per
        for row, (key, group) in zip(got.itertuples(index=False), groups.items(), strict=True):
            key = key if isinstance(key, tuple) else (key,)
            assert tuple(getattr(row, k) for k in keys) == tuple(key), per
            for item in all_items:
                for name, want in zip(item.outputs, expected(group, item), strict=True):
                    value = getattr(row, name)
                    assert agrees(value, want), (per, key, name, value, want, _values(group, item.arg or "price"))


def run(spark: Any, tmp: Path, events: pd.DataFrame, cuts: Sequence[int], text: str) -> tf.AppSpec:
    """The events through the per-batch pipeline in micro-batches cut at ``cuts``, NULLs and NaNs kept
    as they are (rows of Python values, not a pandas frame, which would make every NULL a NaN)."""
    app, stores, pipeline = open_pipeline(tmp, "empty-buckets", text)
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(events)}), len(events)]
    rows = [(r.symbol, r.price, r.quantity, r.ts) for r in events.itertuples(index=False)]
    for batch_id, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        pipeline.process(spark.createDataFrame(rows[lo:hi], "symbol string, price double, quantity long, ts long"),
                         batch_id)
    stores.close()
    assert pipeline.totals.events_aggregated == len(events)
    return app


price = st.one_of(st.none(), st.just(math.nan), st.integers(-5_000, 100_000).map(lambda c: c / 100))
quantity = st.one_of(st.none(), st.integers(-5, 2_000), st.integers(0, 10**12))
event = st.tuples(st.sampled_from(["IBM", "WSO2", NO_VALUES]), st.sampled_from(ANCHORS),
                  st.one_of(st.integers(-3000, 3000), st.integers(-2 * 86_400_000, 2 * 86_400_000)), price, quantity)


def frame(data: list[tuple[Any, ...]]) -> pd.DataFrame:
    rows = [(s, None if s == NO_VALUES else p, None if s == NO_VALUES else q, a + d) for s, a, d, p, q in data]
    events = pd.DataFrame({"symbol": [r[0] for r in rows], "price": pd.Series([r[1] for r in rows], dtype=object),
                           "quantity": pd.Series([r[2] for r in rows], dtype=object), "ts": [r[3] for r in rows]})
    events["arrival"] = np.arange(len(events))
    return events


def test_every_rollup_function_has_an_oracle() -> None:
    """A function registered later gets its empty buckets checked at once; its values need an oracle here."""
    missing = [fn.name for fn in rollup_functions() if fn.takes_arg and fn.name not in ORACLES]
    assert not missing, f"add the exact answer (or the documented bound) of {missing} to ORACLES"
    assert set(EMPTY) <= {fn.name for fn in rollup_functions()}
    assert "group_array" not in {fn.name for fn in rollup_functions()}  # the registry's own refusal


#: A second of IBM without a value and one with values, in one minute cut between two batches; a NaN second.
SOME_EMPTY = [("IBM", ANCHORS[0], -1500, None, None), ("WSO2", ANCHORS[0], 0, math.nan, None),
              ("IBM", ANCHORS[0], -500, 12.5, 7), (NO_VALUES, ANCHORS[0], 0, 1.0, 1),
              ("IBM", ANCHORS[0], -1200, math.nan, None)]


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(event, min_size=1, max_size=40), cuts=st.lists(st.integers(0, 40), max_size=3))
@example(data=SOME_EMPTY, cuts=[2])
def test_empty_buckets_answer_null_at_every_level(spark, tmp_path_factory, data, cuts) -> None:
    events = frame(data)
    tmp = tmp_path_factory.mktemp("empty")
    app = run(spark, tmp, events, cuts, app_text())
    check(app, tmp, events)


@pytest.mark.slow
@pytest.mark.parametrize("kind", SERVER_STORES)
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(event, min_size=1, max_size=40), cuts=st.lists(st.integers(0, 40), max_size=3))
def test_empty_buckets_answer_null_on_the_server_stores(spark, tmp_path_factory, kind, data, cuts) -> None:
    events = frame(data)
    tmp = tmp_path_factory.mktemp("empty")
    with fresh_database(kind) as url:
        text, _ = app_with_store(app_text(), url)
        app = run(spark, tmp, events, cuts, text)
        check(app, tmp, events)


@pytest.mark.parametrize("kind", ["HLL", "KLL", "DDS", "HDR"])
def test_an_empty_or_zero_length_sketch_reads_and_merges_as_null(kind: str) -> None:
    """The states earlier runs stored for buckets without values (an empty sketch, as each library writes
    one) and a zero-length binary: read as NULL (distinctCount: 0), and a merge with them keeps the other
    side's values."""
    merge = Merge[kind]
    empty = next(v for k, v in EMPTY_SKETCHES.items() if k.endswith(kind))
    fn = {"HLL": "distinctCount", "KLL": "kll", "DDS": "dds", "HDR": "hdr"}[kind]
    settings_ = registry.get(fn).resolve(())
    values = np.array([3.0, 7.0, 7.0, 250.0, 1000.0])
    full = BUILD[merge](values, settings_)

    def read(state: bytes | None) -> Any:
        if kind == "HLL":
            return hll_estimate(state)
        reader = {"KLL": kll_quantiles, "DDS": dds_quantiles, "HDR": hdr_quantiles}[kind]
        return reader(state, [0.5, 0.99])

    nothing = 0 if kind == "HLL" else [None, None]
    for state in (None, b"", empty):
        assert read(state) == nothing, state
        assert read(MERGE[merge](state, full)) == read(MERGE[merge](full, state)) == read(full)
        assert MERGE[merge](state, None) is None or read(MERGE[merge](state, None)) == nothing
    assert read(full) != nothing and (kind != "HLL" or read(full) == 4)
