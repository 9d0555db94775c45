"""HDR histograms built and merged in Spark SQL, read in Python: the bins, states and percentiles of the
``hdrhistogram`` package (the reference implementation here), exact merges, what is not counted, and the
bounds against exact percentiles of the raw values.

The reference histogram records each value the way the module documents it, written out here: a finite
non-negative number truncated toward zero (2**63 and above as 2**63 - 1); negative, NaN, infinite and
null values are not recorded.
"""

from __future__ import annotations

import base64
import functools
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hdrh.histogram import HdrHistogram
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tiltframe.aggregates.sketches import hdr
from tiltframe.aggregates.sketches import hdr_spark as hs

HIGHEST = 2**63 - 1
QS = (0.0, 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0)


def recorded(value: float | int | None) -> int | None:
    """The whole value a histogram counts for ``value``, or None (module docstring)."""
    if value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value))):
        return None
    if value < 0:
        return None
    return HIGHEST if value >= 2**63 else int(value)


def reference(values: list, digits: int) -> HdrHistogram:
    histogram = HdrHistogram(1, HIGHEST, digits)
    for v in values:
        if (w := recorded(v)) is not None:
            histogram.record_value(w)
    return histogram


def edges() -> list[int]:
    """Every power of two and its neighbours, the small values of width-1 bins, and random longs."""
    rng = np.random.default_rng(7)
    near = {(1 << k) + d for k in range(64) for d in (-2, -1, 0, 1, 2)}
    spread = {int(rng.integers(0, 2 ** int(rng.integers(1, 63)))) for _ in range(3000)}
    return sorted(v for v in near | spread | set(range(2100)) | {HIGHEST} if 0 <= v <= HIGHEST)


def groups() -> dict[str, list]:
    """Values of several shapes: latencies in ms, whole values up to the top of the long range, and the
    values a histogram does not count mixed with ones it does."""
    rng = np.random.default_rng(20261128)
    return {
        "latency_ms": list(rng.lognormal(3.0, 1.2, 4000)),
        "huge": [float(v) for v in rng.integers(0, 2**62, 500)] + [2.0**63, 1e19, 9.2e18],
        "mixed": [5.0, -1.0, float("nan"), float("inf"), float("-inf"), None, 0.0, 0.999, 1.5, 255.0, 256.0, 1e6],
        "ties": [3.0] * 50 + [70_000.0] * 3 + [0.0] * 10,
        "single": [42.5],
        "nothing_counted": [-3.0, float("nan"), None],
    }


def frame(spark: SparkSession, data: dict[str, list], parts: int = 1) -> DataFrame:
    """One row per value: group, the value as a double (None a null, NaN a NaN), the value as a long where
    it is whole and fits, and a part number in [0, parts) (fixed seed)."""
    rng = np.random.default_rng(3)

    def as_long(v: float | None) -> int | None:
        return int(v) if v is not None and math.isfinite(v) and v == int(v) and abs(v) < 2**63 else None

    rows = [(g, None if v is None else float(v), as_long(v), int(rng.integers(0, parts)))
            for g, values in data.items() for v in values]
    return spark.createDataFrame(rows, "g string, x double, n long, part int")


@pytest.mark.parametrize("digits", [1, 2, 3])
def test_bins_are_the_packages_counts_index(spark: SparkSession, digits: int) -> None:
    values = edges()
    histogram = HdrHistogram(1, HIGHEST, digits)
    expected = [histogram._counts_index_for(v) for v in values]
    df = spark.createDataFrame(pd.DataFrame({"v": values}), "v long")
    got = [r[0] for r in df.select(hs.index(F.col("v"), digits)).collect()]
    assert got == expected
    assert hdr.indices(np.array(values, dtype=np.int64), digits).tolist() == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, HIGHEST), min_size=1, max_size=50), st.integers(1, 3))
def test_numpy_bins_are_the_packages_for_any_long(values: list[int], digits: int) -> None:
    histogram = HdrHistogram(1, HIGHEST, digits)
    assert hdr.indices(np.array(values, dtype=np.int64), digits).tolist() == [
        histogram._counts_index_for(v) for v in values]


@pytest.mark.parametrize("digits", [1, 2, 3])
def test_a_state_is_the_histogram_the_package_records_byte_for_byte(spark: SparkSession, digits: int) -> None:
    data = groups()
    rows = frame(spark, data).groupBy("g").agg(hs.build(F.col("x"), digits).alias("x"),
                                               hs.build(F.col("n"), digits, integral=True).alias("n")).collect()
    built = {r["g"]: r for r in rows}
    for g, values in data.items():
        ref = reference(values, digits)
        state = hdr.to_stored(built[g]["x"])
        if g == "nothing_counted":
            assert state is None
            continue
        assert state == base64.b64decode(ref.encode()), g
        decoded = HdrHistogram.decode(base64.b64encode(state))
        assert (decoded.get_total_count(), decoded.get_min_value(), decoded.get_max_value()) == (
            ref.get_total_count(), ref.get_min_value(), ref.get_max_value())
        assert hdr.count(built[g]["x"]) == ref.get_total_count()
        whole = [v for v in values if v is not None and math.isfinite(v) and v == int(v) and abs(v) < 2**63]
        assert hdr.to_stored(built[g]["n"]) == (base64.b64decode(reference(whole, digits).encode()) if any(
            v >= 0 for v in whole) else None), g
        assert hdr.build_values(np.array([np.nan if v is None else v for v in values]), digits) == state, g


def test_integral_values_are_kept_exactly_above_two_to_the_53(spark: SparkSession) -> None:
    """A long above 2**53 is not rounded through a double: 2**60 + 1 and 2**60 - 1 land in their own bins
    at three digits only if read as longs."""
    values = [2**60 - 1, 2**60 + 1, 2**62 + 3, HIGHEST]
    df = spark.createDataFrame(pd.DataFrame({"n": values}), "n long")
    state = df.agg(hs.build(F.col("n"), 3, integral=True)).first()[0]
    assert hdr.to_stored(state) == base64.b64decode(reference(values, 3).encode())
    assert hdr.build_values(np.array(values, dtype=np.int64), 3) == hdr.to_stored(state)
    assert hdr.build_values(np.array(values, dtype=object), 3) == hdr.to_stored(state)


@pytest.mark.parametrize("digits", [1, 2, 3])
def test_percentiles_are_the_packages_and_within_a_bin_of_the_exact_ones(spark: SparkSession, digits: int) -> None:
    data = groups()
    rows = frame(spark, data).groupBy("g").agg(hs.build(F.col("x"), digits).alias("x")).collect()
    half_count = 2 ** ((2 * 10**digits - 1).bit_length() - 1)
    for r in rows:
        values = data[r["g"]]
        ref = reference(values, digits)
        estimates = hdr.quantiles(r["x"], QS)
        whole = sorted(w for v in values if (w := recorded(v)) is not None)
        if not whole:
            assert r["x"] is None and estimates == [None] * len(QS)
            continue
        for q, estimate in zip(QS, estimates, strict=True):
            value = ref.get_value_at_percentile(q * 100)  # the bin's own value; the output is its double
            assert estimate == float(value), (r["g"], q)
            exact = whole[max(int(q * len(whole) + 0.5), 1) - 1]  # the value of the target rank
            # The estimate is its bin's highest value (lowest for q = 0): within one bin width of the exact value.
            width = max(1.0, 2.0 ** math.floor(math.log2(max(exact, 1))) / half_count)
            assert (exact <= value < exact + width) if q else (exact - width < value <= exact), (r["g"], q)


def test_parts_merged_in_spark_and_in_python_are_the_histogram_of_all(spark: SparkSession) -> None:
    data = groups()
    df = frame(spark, data, parts=7)
    whole = {r["g"]: r["s"] for r in df.groupBy("g").agg(hs.build(F.col("x"), 2).alias("s")).collect()}
    parts = df.groupBy("g", "part").agg(hs.build(F.col("x"), 2).alias("s"))
    merged = {r["g"]: r["s"] for r in parts.groupBy("g").agg(hs.merge_agg(F.col("s")).alias("s")).collect()}
    by_part = parts.groupBy("g").agg(F.collect_list("s").alias("states")).collect()
    for g in data:
        assert merged[g] == whole[g], g  # the same JSON bytes as one build
        states = next(r for r in by_part if r["g"] == g)["states"]
        python = functools.reduce(hdr.merge, [hdr.to_stored(s) for s in states], None)
        assert python == hdr.to_stored(whole[g]), g


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**12).map(float)),
                max_size=60),
       st.lists(st.integers(0, 60), max_size=4))
def test_merging_any_cut_of_the_values_is_the_histogram_of_all(values: list[float], cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(values)]
    pieces = [hdr.build_values(np.array(values[a:b], dtype=np.float64)) for a, b in itertools.pairwise(bounds)]
    expected = reference(values, 2)
    merged = functools.reduce(hdr.merge, pieces, None)
    assert merged == (base64.b64decode(expected.encode()) if expected.get_total_count() else None)


def test_mixed_digits_and_corrupt_states_are_refused_by_name(spark: SparkSession) -> None:
    df = spark.createDataFrame(pd.DataFrame({"g": [1, 2], "x": [3.0, 4.0]}), "g int, x double")
    states = df.groupBy("g").agg(F.when(F.col("g") == 1, hs.build(F.col("x"), 1)).otherwise(
        hs.build(F.col("x"), 2)).alias("s"))
    with pytest.raises(Exception, match="cannot merge histograms of different significant digits: 1 and 2"):
        states.agg(hs.merge_agg(F.col("s"))).collect()
    corrupt = spark.createDataFrame(pd.DataFrame({"s": [b"{\"alpha\": 0.01}"]}), "s binary")
    with pytest.raises(Exception, match="not an hdr state"):
        corrupt.agg(hs.merge_agg(F.col("s"))).collect()
    one, two = hdr.build_values(np.array([5.0]), 1), hdr.build_values(np.array([5.0]), 2)
    with pytest.raises(ValueError, match="different significant digits: 1 and 2"):
        hdr.merge(one, two)
    with pytest.raises(ValueError, match="not an hdr state"):
        hdr.quantiles(b"\x00\x01garbage", [0.5])
    with pytest.raises(ValueError, match="between 1 and 3"):
        hdr.build_values(np.array([1.0]), 4)
