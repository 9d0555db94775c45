"""Bad-input catalogue, events: values of every type and shape real sources give, each aggregated exactly or
rejected with its field and value, compared with a pandas oracle over the raw events."""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tiltframe as tf
from tests.bad_input.harness import Outcome, run
from tiltframe.errors import TiltframeError
from tiltframe.timeutil.parse import FORMATS, parse_timestamp

pytestmark = pytest.mark.slow

APP = """
define stream S (k string, v double, n long, ts {ts_type});
define aggregation A from S
select k, sum(v) as total, count() as events, sum(n) as units, avg(v) as mean, min(v) as low, max(v) as high
group by k
aggregate by ts every sec ... day;
"""
DAY = 86_400_000
T0 = parse_timestamp("2024-01-05 00:00:00")


def app(ts_type: str = "long") -> str:
    return APP.format(ts_type=ts_type)


def oracle(events: list[dict]) -> dict[tuple[str, int], tuple]:
    """Per key and GMT day, from the raw events (``ms`` their event time): nulls and NaN skipped by every
    aggregate but ``count()``, as Siddhi's functions skip them."""
    frame = pd.DataFrame(events)
    frame["day"] = frame["ms"] // DAY * DAY
    out = {}
    for (k, day), g in frame.groupby(["k", "day"]):
        v = g["v"].astype(float).dropna()
        n = g["n"].dropna()
        out[(k, int(day))] = (
            float(v.sum()) if len(v) else None, len(g), int(n.sum()) if len(n) else None,
            float(v.mean()) if len(v) else None, float(v.min()) if len(v) else None,
            float(v.max()) if len(v) else None,
        )
    return out


def per_day(outcome: Outcome) -> dict[tuple[str, int], tuple]:
    days = outcome.query('from A within "2000-01-01", "2100-01-01" per "days" '
                         'select AGG_TIMESTAMP, k, total, events, units, mean, low, high')

    def plain(x: object) -> object:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA else x

    return {(r.k, int(r.AGG_TIMESTAMP)): tuple(plain(getattr(r, c)) for c in
                                              ("total", "events", "units", "mean", "low", "high"))
            for r in days.itertuples()}


def assert_matches(outcome: Outcome, good: list[dict]) -> None:
    got, want = per_day(outcome), oracle(good)
    assert got.keys() == want.keys()
    for key, row in want.items():
        assert got[key] == pytest.approx(row, nan_ok=False), key


def write_jsonl(folder: Path, rows: list[dict], name: str = "part-0.jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def reasons(outcome: Outcome) -> list[str]:
    return sorted(outcome.recorded("A")["reason"])


# --- event times ------------------------------------------------------------------------------------------

ISO_TIMES = {
    "2024-01-05T10:00:00Z": T0 + 10 * 3_600_000,
    "2024-01-05T10:30:00.250+00:00": T0 + 10 * 3_600_000 + 1_800_000 + 250,
    "2024-01-05T10:00:00+0530": T0 + 10 * 3_600_000 - 19_800_000,
    "2024-01-05T23:00:00-02": T0 + DAY + 3_600_000,
    "2024-01-05T10:00Z": T0 + 10 * 3_600_000,
    "2024-01-05T10:00:00.123456789Z": T0 + 10 * 3_600_000 + 123,
    "2024-01-05 10:00:00": T0 + 10 * 3_600_000,
    "2024-01-05 10:00:00 +05:30": T0 + 10 * 3_600_000 - 19_800_000,
    "2024-01-05": T0,
    "  2024-01-05T01:00:00z ": T0 + 3_600_000,
}


@pytest.mark.parametrize("ts_type", ["string", "long"])
def test_iso_and_siddhi_time_strings_are_event_times(spark, tmp_path: Path, ts_type: str) -> None:
    """ISO-8601 (Z, fractions, +0530, +05, minutes only, date only) next to Siddhi's forms, for a string
    and for a long event-time attribute alike."""
    rows = [{"k": "a", "v": float(i), "n": i, "ts": text} for i, text in enumerate(ISO_TIMES)]
    out = run(spark, app(ts_type), {"S": write_jsonl(tmp_path / "in", rows)}, tmp_path / "data")
    assert out.totals["A"].events_aggregated == len(ISO_TIMES)
    assert_matches(out, [{**r, "ms": ISO_TIMES[r["ts"]]} for r in rows])


def test_impossible_dates_and_years_are_rejected_with_the_value(spark, tmp_path: Path) -> None:
    rows = [{"k": "a", "v": 1.0, "n": 1, "ts": t} for t in
            ("2024-02-30T00:00:00Z", "2024-01-05T25:00:00Z", "10000-01-01T00:00:00Z", "yesterday", "2024-01-05T10")]
    rows += [{"k": "a", "v": 1.0, "n": 1, "ts": 253_402_300_800_000}]  # year 10000 as epoch ms
    rows += [{"k": "a", "v": 2.0, "n": 2, "ts": "2024-01-05T00:00:01Z"}]
    out = run(spark, app("string"), {"S": write_jsonl(tmp_path / "in", rows)}, tmp_path / "data")
    assert (out.totals["A"].events_aggregated, out.totals["A"].events_rejected) == (1, 6)
    assert reasons(out) == sorted(
        [f"field 'ts': value '{t}' is not a timestamp (expected {FORMATS})" for t in
         ("2024-02-30T00:00:00Z", "2024-01-05T25:00:00Z", "10000-01-01T00:00:00Z", "yesterday", "2024-01-05T10")]
        + ["field 'ts': value '253402300800000' is outside years 0001-9999"])
    assert_matches(out, [{"k": "a", "v": 2.0, "n": 2, "ms": T0 + 1000}])


def _parquet(folder: Path, table: pa.Table, name: str = "part-0.parquet") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / name)
    return folder


@pytest.mark.parametrize("unit", ["ms", "us"])
@pytest.mark.parametrize("ts_type", ["long", "string"])
def test_parquet_timestamps_of_any_unit_are_instants(spark, tmp_path: Path, unit: str, ts_type: str) -> None:
    """A Parquet TIMESTAMP column (UTC-adjusted, any unit) is the event time as it is: not seconds read as
    milliseconds (1970), not the session zone's wall clock."""
    times = [datetime(2024, 1, 5, 10, 0, 0, 250_000, tzinfo=UTC), datetime(2024, 1, 6, 23, 59, 59, tzinfo=UTC)]
    table = pa.table({"k": ["a", "b"], "v": [1.5, 2.5], "n": [1, 2],
                      "ts": pa.array(times, pa.timestamp(unit, tz="UTC"))})
    out = run(spark, app(ts_type), {"S": _parquet(tmp_path / "in", table)}, tmp_path / "data")
    ms = [int(t.timestamp() * 1000) for t in times]
    rows = zip("ab", [1.5, 2.5], [1, 2], ms, strict=True)
    assert_matches(out, [{"k": k, "v": v, "n": n, "ms": m} for k, v, n, m in rows])


def test_zone_less_parquet_timestamps_and_dates_are_gmt(spark, tmp_path: Path) -> None:
    """TIMESTAMP without a zone (Spark's TIMESTAMP_NTZ) and DATE are read as GMT, as Siddhi reads
    'yyyy-MM-dd HH:mm:ss', whatever the session time zone."""
    wall = datetime(2024, 1, 5, 23, 30)
    table = pa.table({"k": ["a"], "v": [1.0], "n": [1], "ts": pa.array([wall], pa.timestamp("us"))})
    dates = pa.table({"k": ["b"], "v": [2.0], "n": [2], "ts": pa.array([date(2024, 1, 7)], pa.date32())})
    _parquet(tmp_path / "ntz", table)
    _parquet(tmp_path / "dates", dates)
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
    try:
        out = run(spark, app(), {"S": tmp_path / "ntz"}, tmp_path / "data")
        out2 = run(spark, app(), {"S": tmp_path / "dates"}, tmp_path / "data2")
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    assert_matches(out, [{"k": "a", "v": 1.0, "n": 1, "ms": T0 + 23 * 3_600_000 + 1_800_000}])
    assert_matches(out2, [{"k": "b", "v": 2.0, "n": 2, "ms": T0 + 2 * DAY}])


def test_a_streaming_dataframe_with_a_timestamp_column(spark, tmp_path: Path) -> None:
    """A caller's streaming DataFrame whose event time Spark types as TIMESTAMP (as Kafka's ``timestamp``)."""
    when = datetime(2024, 1, 5, 12, 0, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    table = pa.table({"k": ["a", "a"], "v": [1.0, 3.0], "n": [1, 1],
                      "ts": pa.array([when, when + timedelta(days=1)], pa.timestamp("us", tz="UTC"))})
    folder = _parquet(tmp_path / "in", table)
    stream = spark.readStream.schema("k string, v double, n long, ts timestamp").parquet(str(folder))
    out = run(spark, app(), {"S": stream}, tmp_path / "data")
    ms = int(when.timestamp() * 1000)
    assert_matches(out, [{"k": "a", "v": 1.0, "n": 1, "ms": ms}, {"k": "a", "v": 3.0, "n": 1, "ms": ms + DAY}])


def test_inserted_pandas_datetimes_are_instants(spark, tmp_path: Path) -> None:
    """``tf.insert`` of a pandas frame with datetimes into a pre-aggregated table: zone-aware ones are the
    instants they say, naive ones GMT."""
    application = tf.load_app("""
    define table Clicks (time long, site string, cost double)
        preaggregate by time every min
        dimensions site
        measures count() as clicks, sum(cost) as spent;
    """)
    aware = pd.DataFrame({"time": pd.to_datetime(["2024-01-05T10:00:30+05:30", "2024-01-05T04:31:10Z"], utc=True),
                          "site": ["x", "x"], "cost": [1.0, 2.0]})
    naive = pd.DataFrame({"time": pd.to_datetime(["2024-01-05 04:30:59"]), "site": ["x"], "cost": [4.0]})
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")  # naive still means GMT
    try:
        for frame in (aware, naive):
            inserted = tf.insert(application, "Clicks", frame, data_dir=tmp_path, spark=spark)
            assert inserted.events_aggregated == len(frame)
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    got = tf.query(application, 'from Clicks within "2024-01-05", "2024-01-06" per "minutes" select *',
                   data_dir=tmp_path)
    assert {int(r.AGG_TIMESTAMP): (r.clicks, r.spent) for r in got.itertuples()} == {
        T0 + 4 * 3_600_000 + 30 * 60_000: (2, 5.0), T0 + 4 * 3_600_000 + 31 * 60_000: (1, 2.0)}


# --- values ----------------------------------------------------------------------------------------------


def test_fractions_are_never_truncated_into_longs_on_any_format(spark, tmp_path: Path) -> None:
    """1.9 for a long attribute is rejected with field and value in CSV, JSON and Parquet alike; 1.0 and 1e3
    are the longs 1 and 1000."""
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "a.csv").write_text(f"a,1.0,1.9,{T0}\na,1.0,1.0,{T0}\na,1.0,1e3,{T0}\n")
    write_jsonl(tmp_path / "json", [{"k": "a", "v": 1.0, "n": n, "ts": T0} for n in (1.9, 1.0, 1e3)])
    _parquet(tmp_path / "parquet", pa.table({"k": ["a"] * 3, "v": [1.0] * 3, "n": [1.9, 1.0, 1e3], "ts": [T0] * 3}))
    for fmt in ("csv", "json", "parquet"):
        out = run(spark, app(), {"S": tmp_path / fmt}, tmp_path / f"data-{fmt}")
        assert (out.totals["A"].events_aggregated, out.totals["A"].events_rejected) == (2, 1), fmt
        assert reasons(out) == ["field 'n': value '1.9' is not a long"], fmt
        assert_matches(out, [{"k": "a", "v": 1.0, "n": n, "ms": T0} for n in (1, 1000)])


def test_values_beyond_their_type_are_rejected(spark, tmp_path: Path) -> None:
    text = APP.replace("n long", "n int").format(ts_type="long")
    rows = [{"k": "a", "v": 1.0, "n": n, "ts": T0} for n in (2**31, -(2**31) - 1, 2**31 - 1)]
    rows.append({"k": "a", "v": 1.0, "n": 9_223_372_036_854_775_808, "ts": T0})
    out = run(spark, text, {"S": write_jsonl(tmp_path / "in", rows)}, tmp_path / "data")
    assert out.totals["A"].events_aggregated == 1
    assert reasons(out) == sorted(f"field 'n': value '{n}' is not a int"
                                  for n in (2**31, -(2**31) - 1, 9_223_372_036_854_775_808))


def test_null_values_are_skipped_by_aggregates_and_counted_by_count(spark, tmp_path: Path, store) -> None:
    """An event without a value is still an event: count() counts it, sum/avg/min/max skip it (Siddhi's
    functions skip nulls); only a missing key or event time rejects it.  On every store."""
    rows = [
        {"k": "a", "v": 1.0, "n": 1, "ts": T0},
        {"k": "a", "v": None, "n": 2, "ts": T0 + 1},
        {"k": "a", "n": None, "ts": T0 + 2},
        {"k": "b", "v": None, "n": None, "ts": T0 + 3},
        {"v": 5.0, "n": 5, "ts": T0 + 4},
        {"k": None, "v": 5.0, "n": 5, "ts": T0 + 4},
        {"k": "a", "v": 5.0, "n": 5},
    ]
    out = run(spark, app(), {"S": write_jsonl(tmp_path / "in", rows)}, tmp_path / "data", store=store)
    assert (out.totals["A"].events_aggregated, out.totals["A"].events_rejected) == (4, 3)
    assert reasons(out) == ["missing field 'k'", "missing field 'k'", "missing field 'ts'"]
    good = [{"k": r["k"], "v": r.get("v"), "n": r.get("n"), "ms": r["ts"]} for r in rows[:4]]
    assert_matches(out, good)


def _nan_rows() -> list[dict]:
    return [{"k": "a", "v": 4.0, "n": 1, "ts": T0}, {"k": "a", "v": float("nan"), "n": 1, "ts": T0 + 1},
            {"k": "a", "v": 6.0, "n": 1, "ts": T0 + 2}, {"k": "b", "v": float("nan"), "n": 1, "ts": T0 + 3}]


def test_nan_is_a_missing_value_however_the_stream_is_cut(spark, tmp_path: Path, store) -> None:
    """NaN (Parquet doubles, "NaN" in text) is a missing value like null: skipped by the aggregates,
    counted by count(); the answer is the same in one micro-batch or in several, on every store."""
    rows = _nan_rows()
    table = pa.Table.from_pylist(rows)
    for i in range(len(rows)):
        _parquet(tmp_path / "parquet", table.slice(i, 1), f"part-{i}.parquet")
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "a.csv").write_text("".join(f"{r['k']},{'NaN' if math.isnan(r['v']) else r['v']},1,{r['ts']}\n"
                                                    for r in rows))
    good = [{**r, "v": None if math.isnan(r["v"]) else r["v"], "ms": r["ts"]} for r in rows]
    one = run(spark, app(), {"S": tmp_path / "parquet"}, tmp_path / "one", store=store)
    assert_matches(one, good)
    many = run(spark, app(), {"S": tmp_path / "parquet"}, tmp_path / "many", max_files_per_trigger=1)
    assert many.totals["A"].batches == 4
    assert_matches(many, good)
    text = run(spark, app(), {"S": tmp_path / "csv"}, tmp_path / "csv-data")
    assert_matches(text, good)


def test_infinities_are_rejected_with_the_value(spark, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text(f"a,Infinity,1,{T0}\na,-Infinity,1,{T0}\na,1e999,1,{T0}\na,2.5,1,{T0}\n")
    out = run(spark, app(), {"S": tmp_path / "in"}, tmp_path / "data")
    assert (out.totals["A"].events_aggregated, out.totals["A"].events_rejected) == (1, 3)
    assert reasons(out) == sorted(f"field 'v': value '{t}' is not a finite double"
                                  for t in ("Infinity", "-Infinity", "1e999"))
    assert_matches(out, [{"k": "a", "v": 2.5, "n": 1, "ms": T0}])


def test_a_nan_or_missing_key_rejects_the_event(spark, tmp_path: Path) -> None:
    text = "define stream S (k double, v double, n long, ts long);" + APP.split(";", 1)[1].format(ts_type="long")
    table = pa.table({"k": [float("nan"), None, 1.5], "v": [1.0, 1.0, 1.0], "n": [1, 1, 1], "ts": [T0] * 3})
    out = run(spark, text, {"S": _parquet(tmp_path / "in", table)}, tmp_path / "data")
    assert (out.totals["A"].events_aggregated, out.totals["A"].events_rejected) == (1, 2)
    assert reasons(out) == ["field 'k': value 'NaN' is not a number (a group-by key cannot be missing)",
                            "missing field 'k'"]


def test_text_numbers_with_spaces_are_read(spark, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text(f"a, 1.5 , 7 ,{T0}\n")
    out = run(spark, app(), {"S": tmp_path / "in"}, tmp_path / "data")
    assert_matches(out, [{"k": "a", "v": 1.5, "n": 7, "ms": T0}])


@pytest.mark.parametrize("ansi", ["true", "false"])
def test_a_long_sum_that_overflows_names_the_key_and_bucket(spark, tmp_path: Path, ansi: str) -> None:
    """Two valid longs whose sum leaves a long's range: a clear error naming aggregation, measure, key and
    bucket; nothing is stored (never a wrapped total, with or without Spark's ANSI arithmetic)."""
    big = 2**62
    rows = [{"k": "ok", "v": 1.0, "n": 1, "ts": T0}, {"k": "big", "v": 1.0, "n": big, "ts": T0 + 5},
            {"k": "big", "v": 1.0, "n": big, "ts": T0 + 1500}]
    folder = write_jsonl(tmp_path / "in", rows)
    previous = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    try:
        with pytest.raises(TiltframeError, match=r"sum\(n\) as units of aggregation A leaves the range of a long"
                           ) as caught:
            tf.run(tf.load_app(app()), {"S": folder}, data_dir=tmp_path / "data", spark=spark)
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)
    text = str(caught.value)
    assert "k='big'" in text and "bucket starting 2024-01-05 00:00:00" in text
    assert tf.inspect(tf.load_app(app()), data_dir=tmp_path / "data")[0].events_read == 0
