"""DDSketch built and merged in Spark SQL, read in Python: accuracy against exact quantiles, exact merges,
nulls, the batch (JSON) format and the stored (protobuf) one other DDSketch libraries read.

The reference is the exact *lower* quantile ``sorted(values)[floor(q * (n - 1))]`` (numpy's
``method="lower"``), the convention the sketch's reader uses, so every estimate must be within the
relative accuracy ``alpha`` of it (a tiny float slack covers values that land on a bin boundary).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
from ddsketch import DDSketch
from ddsketch.pb.proto import DDSketchProto, pb
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from tiltframe.aggregates.sketches import ddsketch as dd
from tiltframe.aggregates.sketches import ddsketch_spark as dds

ALPHAS = (0.01, 0.05)
QS = (0.0, 0.001, 0.01, 0.05, 0.1, 0.25, 0.3, 0.5, 0.7, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0)
SLACK = 1e-9  # relative slack on alpha for values on a bin boundary (float rounding of ln(x) / ln(gamma))


def datasets() -> dict[str, np.ndarray]:
    """Groups of different sizes and shapes, fixed seeds."""
    rng = np.random.default_rng(20190801)
    signs = rng.choice([-1.0, 1.0], 1500)
    return {
        "lognormal": rng.lognormal(0.0, 2.5, 5000),
        "pareto": (rng.pareto(1.1, 3000) + 1.0) * 1e-3,
        "magnitudes": np.concatenate([signs * 10 ** rng.uniform(-299, 307, 1500), [1.7e308, -1e-299, 1e-299]]),
        "normal_ties_zeros": np.concatenate([np.round(rng.normal(0.0, 30.0, 2500)), np.zeros(300)]),
        "negative": -rng.exponential(5.0, 700),
        "ties": np.array([3.0] * 50 + [7.0] * 3 + [-2.0] * 10),
        "small": np.array([5.0, -1.5, 0.0, 1e-3, 250.0, 2.0, 2.0]),
        "single": np.array([42.5]),
    }


def exact_lower(sorted_values: np.ndarray, q: float) -> float:
    return float(sorted_values[math.floor(q * (len(sorted_values) - 1))])


def rel_error(estimate: float, exact: float) -> float:
    return 0.0 if estimate == exact else abs(estimate - exact) / abs(exact)


def table(spark: SparkSession, rows: list[tuple], schema: str) -> DataFrame:
    """A small DataFrame of literal rows, made in the JVM (no Python worker start-up; NaN stays NaN, None null)."""
    struct = DataType.fromDDL(schema)
    assert isinstance(struct, StructType)
    fields = struct.fields
    structs = [
        F.struct(*[F.lit(v).cast(f.dataType).alias(f.name) for v, f in zip(row, fields, strict=True)]) for row in rows
    ]
    return spark.range(1).select(F.inline(F.array(*structs)))


def events(spark: SparkSession, groups: dict[str, np.ndarray], parts: int = 1) -> DataFrame:
    """One row per value: group name, value, and a random part number in [0, parts) (fixed seed)."""
    g = np.concatenate([[k] * len(v) for k, v in groups.items()])
    part = np.random.default_rng(11).integers(0, parts, len(g))
    frame = pd.DataFrame({"g": g, "x": np.concatenate(list(groups.values())), "part": part})
    return spark.createDataFrame(frame, "g string, x double, part int")


@pytest.fixture(scope="module")
def data() -> dict[str, np.ndarray]:
    return datasets()


@pytest.fixture(scope="module")
def built(spark: SparkSession, data: dict[str, np.ndarray]) -> dict[str, dict[str, object]]:
    """Per group: a sketch for each alpha, built in one agg call next to plain aggregates."""
    df = events(spark, data)
    rows = (
        df.groupBy("g")
        .agg(
            F.sum("x").alias("total"),
            *[dds.build(F.col("x"), a).alias(f"s{i}") for i, a in enumerate(ALPHAS)],
            F.count("x").alias("n"),
        )
        .collect()
    )
    return {r["g"]: r.asDict() for r in rows}


def test_exact_lower_is_numpy_lower(data: dict[str, np.ndarray]) -> None:
    for values in data.values():
        s = np.sort(values)
        for q in QS:
            assert exact_lower(s, q) == np.quantile(values, q, method="lower")


@pytest.mark.parametrize("which", range(len(ALPHAS)))
def test_quantiles_within_relative_accuracy(built: dict, data: dict[str, np.ndarray], which: int) -> None:
    alpha = ALPHAS[which]
    rng = np.random.default_rng(7)
    qs = [*QS, *rng.uniform(0, 1, 40).tolist()]
    worst = 0.0
    assert set(built) == set(data)
    for g, values in data.items():
        row = built[g]
        state = bytes(row[f"s{which}"])
        assert row["n"] == len(values) and dd.count(state) == len(values)
        assert row["total"] == pytest.approx(float(np.sum(values)), rel=1e-9, abs=1e-9)
        s = np.sort(values)
        for q, est in zip(qs, dd.quantiles(state, qs), strict=True):
            err = rel_error(est, exact_lower(s, q))
            assert err <= alpha * (1 + SLACK), (g, q, est, exact_lower(s, q))
            worst = max(worst, err)
    assert worst > alpha / 4  # the bound is used, i.e. estimates really come from the bins


def test_state_format(spark: SparkSession) -> None:
    df = table(spark, [(1.0,), (2.0,), (2.0,), (-5.0,), (0.0,), (None,), (float("nan"),)], "x double")
    state = bytes(df.agg(dds.build(F.col("x"), 0.01).alias("s")).first()["s"])
    obj = json.loads(state.decode("utf-8"))
    assert list(obj) == ["alpha", "zero", "pos", "neg"]
    lg = math.log(101 / 99)
    i1, i2, i5 = (math.ceil(math.log(v) / lg) for v in (1.0, 2.0, 5.0))
    assert obj == {"alpha": 0.01, "zero": 1, "pos": {str(i1): 1, str(i2): 2}, "neg": {str(i5): 1}}
    assert state == f'{{"alpha":0.01,"zero":1,"pos":{{"{i1}":1,"{i2}":2}},"neg":{{"{i5}":1}}}}'.encode()
    assert dd.count(state) == 5
    # Walk order: negative store, zeros, positive store; the lower quantile convention picks sorted[floor(q*4)].
    est = dd.quantiles(state, [0.0, 0.25, 0.5, 0.75, 1.0])
    assert est[1] == 0.0
    for e, exact in zip(est, [-5.0, 0.0, 1.0, 2.0, 2.0], strict=True):
        assert rel_error(e, exact) <= 0.01


def test_stored_format_is_the_ddsketch_libraries_protobuf(spark: SparkSession) -> None:
    """The stored state is ddsketch.proto's message, contiguous bins without empty ends, and the package
    reads it into the same estimates; Spark's batch state and the Python build give the same bytes."""
    values = [1.0, 2.0, 2.0, -5.0, 0.0, 1e-3, 250.0]
    df = table(spark, [(v,) for v in values], "x double")
    batch = bytes(df.agg(dds.build(F.col("x"), 0.01)).first()[0])
    stored = dd.to_stored(batch)
    assert stored is not None and dd.is_stored_format(stored) and not dd.is_stored_format(batch)
    assert dd.to_stored(stored) == stored == dd.build_values(np.array(values), 0.01)
    msg = pb.DDSketch.FromString(stored)
    assert msg.mapping.gamma == 101 / 99 and msg.mapping.indexOffset == 0
    assert msg.mapping.interpolation == pb.IndexMapping.NONE and msg.zeroCount == 1
    lg = math.log(101 / 99)
    lo, hi = (math.ceil(math.log(v) / lg) for v in (1e-3, 250.0))
    counts = list(msg.positiveValues.contiguousBinCounts)
    assert msg.positiveValues.contiguousBinIndexOffset == lo and len(counts) == hi - lo + 1
    assert counts[0] == counts[-1] == 1 and sum(counts) == 5 and not msg.positiveValues.binCounts
    assert list(msg.negativeValues.contiguousBinCounts) == [1.0]
    assert dd.bins(stored) == dd.bins(batch) and dd.bins(stored).alpha == 0.01
    theirs = DDSketchProto.from_proto(msg)
    qs = [0.0, 0.2, 0.5, 0.9, 1.0]
    assert [theirs.get_quantile_value(q) for q in qs] == pytest.approx(dd.quantiles(stored, qs), rel=1e-12)
    assert dd.quantiles(stored, qs) == dd.quantiles(batch, qs)


def test_states_of_other_writers_are_read_and_merged() -> None:
    """A state the ddsketch package wrote (its own gamma arithmetic, 128-bin chunks), a sparse store and a
    JSON state of an older store all merge with a stored state into the sum of their bins."""
    theirs = DDSketch(0.01)
    for v in (0.5, 3.0, 3.0, -7.0, 0.0):
        theirs.add(v)
    written = DDSketchProto.to_proto(theirs).SerializeToString()
    ours = dd.build_values(np.array([3.0, 40.0]), 0.01)
    merged = dd.merge(written, ours)
    assert merged is not None and dd.count(merged) == 7
    assert pb.DDSketch.FromString(merged).mapping.gamma == pb.DDSketch.FromString(written).mapping.gamma
    k3 = math.ceil(math.log(3.0) / math.log(101 / 99))
    assert dd.bins(merged).pos[k3] == 3 and dd.bins(merged).zero == 1
    sparse = pb.DDSketch(mapping=pb.IndexMapping(gamma=101 / 99), zeroCount=2.0)
    sparse.positiveValues.binCounts[k3] = 4.0
    sparse.negativeValues.binCounts[-3] = 1.0
    legacy = json.dumps({"alpha": 0.01, "zero": 1, "pos": {str(k3): 2}, "neg": {}}).encode()
    total = functools.reduce(dd.merge, [ours, sparse.SerializeToString(), legacy])
    assert total is not None and dd.bins(total).pos[k3] == 7 and dd.bins(total).neg == {-3: 1}
    assert dd.count(total) == 2 + 7 + 3 and dd.bins(total).zero == 3
    linear = pb.DDSketch(mapping=pb.IndexMapping(gamma=101 / 99, interpolation=pb.IndexMapping.LINEAR))
    with pytest.raises(ValueError, match="only the logarithmic mapping"):
        dd.count(linear.SerializeToString())
    with pytest.raises(ValueError, match="no index mapping"):
        dd.count(pb.DDSketch(zeroCount=1.0).SerializeToString())


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=150, deadline=None)
@given(st.lists(finite, max_size=60), st.lists(finite, max_size=60), st.sampled_from([0.01, 0.05, 0.2]),
       st.lists(st.floats(0.0, 1.0), min_size=1, max_size=5))
def test_merge_and_quantiles_agree_with_the_ddsketch_package(
    left: list[float], right: list[float], alpha: float, qs: list[float]
) -> None:
    """The numpy merge is the package's merge (same bins), and the estimates are the package's own."""
    a, b = dd.build_values(np.array(left), alpha), dd.build_values(np.array(right), alpha)
    ours = dd.merge(a, b)
    parts = [DDSketchProto.from_proto(pb.DDSketch.FromString(s)) for s in (a, b) if s is not None]
    if not parts:
        assert ours is None
        return
    theirs = parts[0]
    for other in parts[1:]:
        theirs.merge(other)
    assert ours is not None and dd.bins(ours) == dd.bins(DDSketchProto.to_proto(theirs).SerializeToString())
    assert dd.count(ours) == len([v for v in left + right if math.isfinite(v)])
    for q, got in zip(qs, dd.quantiles(ours, qs), strict=True):
        try:
            want = theirs.get_quantile_value(q)
        except OverflowError:  # the package's representative of the top bins; ours is computed in logs
            assert got is not None and abs(got) > 1e307
        else:
            assert got == pytest.approx(want, rel=1e-12)


def test_empty_store_and_thresholds(spark: SparkSession) -> None:
    rows = [(v,) for v in (3.0, 1e-301, -1e-310, 0.0, -0.0, float("inf"), float("-inf"), 1e-300)]
    state = bytes(table(spark, rows, "x double").agg(dds.build(F.col("x"), 0.05)).first()[0])
    obj = json.loads(state)
    assert obj["neg"] == {} and obj["zero"] == 4 and sum(obj["pos"].values()) == 2  # infinities are ignored
    assert b'"neg":{}' in state


def test_integer_and_decimal_columns(spark: SparkSession) -> None:
    df = spark.range(1, 101).select("id", F.col("id").cast("int"), F.col("id").cast("decimal(10,2)"))
    df = df.toDF("a", "b", "c")
    row = df.agg(*[dds.build(F.col(c), 0.01).alias(c) for c in "abc"]).first()
    assert bytes(row["a"]) == bytes(row["b"]) == bytes(row["c"])
    (median,) = dd.quantiles(bytes(row["a"]), [0.5])
    assert rel_error(median, 50.0) <= 0.01


def test_nulls(spark: SparkSession) -> None:
    df = table(
        spark,
        [("none", None), ("none", None), ("nan", float("nan")), ("one", 4.0), ("one", None)],
        "g string, x double",
    )
    states = {r["g"]: r["s"] for r in df.groupBy("g").agg(dds.build(F.col("x"), 0.01).alias("s")).collect()}
    assert states["none"] is None and states["nan"] is None
    one = bytes(states["one"])
    assert dd.count(one) == 1
    parts = table(spark, [("a", None), ("a", None), ("b", None), ("b", one)], "g string, s binary")
    merged = {r["g"]: r["m"] for r in parts.groupBy("g").agg(dds.merge_agg(F.col("s")).alias("m")).collect()}
    assert merged["a"] is None and bytes(merged["b"]) == one
    stored = dd.to_stored(one)
    assert dd.merge(None, None) is None and dd.merge(None, one) == stored and dd.merge(one, None) == stored
    assert dd.quantiles(None, [0.0, 0.5]) == [None, None] and dd.count(None) == 0
    assert dd.quantiles(b'{"alpha":0.01,"zero":0,"pos":{},"neg":{}}', [0.5]) == [None]


def test_merge_equals_direct_build(
    spark: SparkSession, data: dict[str, np.ndarray], built: dict[str, dict[str, object]]
) -> None:
    """Partial sketches merged (in Spark and pairwise in Python) are the sketch of all values: same bins."""
    parts = 37
    df = events(spark, data, parts)
    # A part holding only nulls in every group: its null state must not disturb the merge.
    nulls = df.select("g").distinct().select("g", F.lit(None).cast("double").alias("x"), F.lit(parts).alias("part"))
    names = [f"s{i}" for i in range(len(ALPHAS))]
    partial = (
        df.unionByName(nulls)
        .groupBy("g", "part")
        .agg(*[dds.build(F.col("x"), a).alias(name) for name, a in zip(names, ALPHAS, strict=True)])
        .cache()
    )
    merged = {r["g"]: r for r in partial.groupBy("g").agg(*[dds.merge_agg(F.col(c)).alias(c) for c in names]).collect()}
    by_group: dict[str, list] = {}
    for r in partial.collect():
        by_group.setdefault(r["g"], []).append(r)
    partial.unpersist()
    assert set(merged) == set(built) == set(data)
    for g, values in data.items():
        for name in names:
            direct, in_spark = bytes(built[g][name]), bytes(merged[g][name])
            states = [None if r[name] is None else bytes(r[name]) for r in by_group[g]]
            assert None in states and len(states) >= 2
            assert in_spark == direct  # canonical: same bins, keys ascending, same alpha spelling
            in_python = functools.reduce(dd.merge, states)
            assert in_python is not None and dd.bins(in_python) == dd.bins(direct)
            assert in_python == dd.to_stored(direct)  # the same bins give the same stored bytes
            assert dd.count(in_python) == dd.count(in_spark) == len(values)
            assert dd.quantiles(in_python, QS) == dd.quantiles(in_spark, QS) == dd.quantiles(direct, QS)


def test_python_written_states_merge_in_spark(spark: SparkSession) -> None:
    a = b'{"alpha":0.05,"zero":2,"pos":{"3":1,"-40":5},"neg":{}}'
    b = b'{"alpha":0.05,"zero":0,"pos":{"3":2,"10":1},"neg":{"1":4}}'
    df = table(spark, [(a,), (b,), (None,)], "s binary")
    in_spark = bytes(df.agg(dds.merge_agg(F.col("s"))).first()[0])
    assert in_spark == b'{"alpha":0.05,"zero":2,"pos":{"-40":5,"3":3,"10":1},"neg":{"1":4}}'
    assert dd.merge(a, b) == dd.to_stored(in_spark)
    assert dd.count(in_spark) == 15


def test_different_alpha_or_corrupt_state_refused(spark: SparkSession) -> None:
    df = table(spark, [(1.0,), (10.0,)], "x double")
    a, b = (bytes(df.agg(dds.build(F.col("x"), alpha)).first()[0]) for alpha in ALPHAS)
    with pytest.raises(ValueError, match=r"0\.01 and 0\.05"):
        dd.merge(a, b)
    mixed = table(spark, [(a,), (b,)], "s binary")
    with pytest.raises(Exception, match="different relative accuracy"):
        mixed.agg(dds.merge_agg(F.col("s"))).collect()
    corrupt = table(spark, [(a,), (b'{"zero":1}',)], "s binary")
    with pytest.raises(Exception, match="not a ddsketch state"):
        corrupt.agg(dds.merge_agg(F.col("s"))).collect()


@pytest.fixture(params=["true", "false"])
def ansi(spark: SparkSession, request: pytest.FixtureRequest) -> Iterator[str]:
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", request.param)
    yield request.param
    spark.conf.set("spark.sql.ansi.enabled", before)


def test_ansi_modes(spark: SparkSession, ansi: str) -> None:
    rows = [(g, v) for g in range(3) for v in ([None] if g == 0 else [1.5 * g, -2.0, 0.0, 1e300, -7e-299])]
    df = table(spark, rows, "g int, x double")
    states = df.groupBy("g").agg(dds.build(F.col("x"), 0.01).alias("s"), F.count("x").alias("n"))
    merged = states.agg(dds.merge_agg(F.col("s")).alias("m"), F.sum("n").alias("n")).first()
    assert dd.count(bytes(merged["m"])) == merged["n"] == 10


def test_bad_arguments(spark: SparkSession) -> None:
    for alpha in (0.0, 1.0, -0.1, float("nan"), 1e-9):
        with pytest.raises(ValueError):
            dds.build(F.col("x"), alpha)
    state = b'{"alpha":0.01,"zero":1,"pos":{},"neg":{}}'
    with pytest.raises(ValueError):
        dd.quantiles(state, [1.5])
    with pytest.raises(ValueError):
        dd.quantiles(state, [float("nan")])
    with pytest.raises(ValueError, match="not a ddsketch state"):
        dd.count(b"[1, 2]")
