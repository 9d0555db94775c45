"""A changed aggregation carried out on a store built by real runs, on every store: ``tiltframe migrate``
from definition A to B and back to A, with new input files read in between, every level, range and view
checked against pandas over the raw events.  No event is skipped or counted twice (the checkpoint of the
earlier definition goes on), a measure added reads NULL before it is complete and the exact value after."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import tiltframe as tf
from tests.servers import STORES, app_with_store, fresh_database
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.errors import StoreError
from tiltframe.store.open_stores import StoreRegistry

A = """
define stream Trades (symbol string, price double, volume long, ts long);
define aggregation TA
from Trades
select symbol, sum(price) as total, count() as n
group by symbol
aggregate by ts every sec ... hour;
"""
# B: count() removed, max(volume) added, an attribute no aggregate reads added to the stream.
B = (A.replace("ts long)", "ts long, venue string)")
     .replace("count() as n", "max(volume) as biggest"))
HOUR = 3_600_000
T0 = 472_222 * HOUR  # 2023-11-14 22:00 GMT, on an hour
LEVELS = {"seconds": 1_000, "minutes": 60_000, "hours": HOUR}


def trades(seed: int, start: int, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "symbol": rng.choice(["IBM", "WSO2"], n),
        "price": np.round(rng.uniform(1, 100, n), 2),
        "volume": rng.integers(1, 1_000, n),
        "ts": np.sort(start + rng.integers(0, 2 * HOUR, n)),
    })


def oracle(events: pd.DataFrame, width: int, column: str, how: str, since: int | None) -> dict:
    """Per (bucket, symbol): ``how`` of ``column`` over ``events``; None for buckets starting before ``since``."""
    bucket = events["ts"] // width * width
    got = events.assign(b=bucket).groupby(["b", "symbol"])[column].agg(how)
    return {k: (None if since is not None and k[0] < since else v) for k, v in got.items()}


def stored(app: tf.AppSpec, data: Path, per: str, column: str) -> dict:
    q = f"from TA within 0L, 9000000000000L per '{per}' select AGG_TIMESTAMP, symbol, {column}"
    answer = tf.query(app, q, data_dir=data)
    return {(int(t), s): (None if pd.isna(v) else v) for t, s, v in answer.itertuples(index=False)}


def check(app: tf.AppSpec, data: Path, events: pd.DataFrame, column: str, how: str, since: int | None) -> None:
    for per, width in LEVELS.items():
        want = oracle(events, width, "price" if how == "sum" else "volume" if how == "max" else "ts", how, since)
        got = stored(app, data, per, column)
        assert got.keys() == want.keys(), per
        for key, value in want.items():
            assert got[key] == pytest.approx(value), (per, key, got[key], value)
    # The view of final values says the same as retrieval.
    layout = AggregationLayout.of(app, "TA")
    stores = StoreRegistry(data)
    try:
        with stores.for_aggregation(layout.spec).read_transaction("read the view") as conn:
            assert conn is not None
            rows = conn.execute(sa.select(*(sa.column(c) for c in ("AGG_TIMESTAMP", "symbol", column)))
                                .select_from(sa.table("TA_HOURS_FINAL"))).all()
    finally:
        stores.close()
    view = {(int(t), s): v for t, s, v in rows}
    want = oracle(events, HOUR, "price" if how == "sum" else "volume" if how == "max" else "ts", how, since)
    assert view.keys() == want.keys()
    assert all(view[k] == pytest.approx(v) for k, v in want.items())


@pytest.mark.slow
@pytest.mark.parametrize("backend", STORES)
def test_a_definition_changed_there_and_back_loses_and_doubles_nothing(spark, tmp_path: Path, backend: str) -> None:
    with nullcontext(None) if backend == "sqlite" else fresh_database(backend) as url:
        text_a, _ = app_with_store(A, url)
        text_b, _ = app_with_store(B, url)
        a, b = tf.load_app(text_a), tf.load_app(text_b)
        data, inbox = tmp_path / "data", tmp_path / "in"
        inbox.mkdir()
        first, second, third = trades(1, T0, 400), trades(2, T0 + 2 * HOUR, 300), trades(3, T0 + 4 * HOUR, 200)
        first.to_csv(inbox / "1.csv", index=False)
        tf.run(a, {"Trades": inbox}, data_dir=data, spark=spark)

        # B is refused at run time, with the plan and the command that applies it.
        with pytest.raises(StoreError, match="tiltframe migrate APP -d DIR") as refused:
            tf.run(b, {"Trades": inbox}, data_dir=data, spark=spark)
        assert "measure biggest added" in str(refused.value)
        plan = tf.plan_changes(b, data_dir=data)["TA"]
        assert plan == [
            "measure n removed: columns n_COUNT dropped at every level",
            "measure biggest added: columns biggest_MAX at every level, NULL for the buckets stored before",
            "attribute venue of stream Trades added: no aggregate reads it, nothing stored changes",
            "measures biggest read NULL in the buckets stored before they are complete; tiltframe migrate APP -d DIR "
            "--input Trades=PATH backfills them from the inputs instead (every level recomputed from the files the "
            "pipeline read)",
        ]
        assert tf.migrate(b, data_dir=data, dry_run=True)["TA"] == plan
        assert tf.migrate(b, data_dir=data)["TA"] == plan
        assert tf.migrate(b, data_dir=data)["TA"] == []

        second.assign(venue="X").to_csv(inbox / "2.csv", index=False)
        tf.run(b, {"Trades": inbox}, data_dir=data, spark=spark)
        both = pd.concat([first, second], ignore_index=True)
        complete = int(first["ts"].max()) + 1
        check(b, data, both, "total", "sum", None)
        check(b, data, both, "biggest", "max", complete)
        # Totals of a range: the measure added is NULL when the range starts before it is complete.
        later = tf.query(b, f"from TA within {T0 + 2 * HOUR}L, {T0 + 5 * HOUR}L select symbol, total, biggest",
                         data_dir=data)
        assert dict(zip(later.symbol, later.biggest, strict=True)) == second.groupby("symbol")["volume"].max().to_dict()
        whole = tf.query(b, f"from TA within {T0}L, {T0 + 5 * HOUR}L select symbol, total, biggest", data_dir=data)
        assert whole.biggest.isna().all()
        assert dict(zip(whole.symbol, whole.total, strict=True)) == pytest.approx(
            both.groupby("symbol")["price"].sum().to_dict())

        # Back to A: its old checkpoint must not come back (its files would be skipped), nor would a new one
        # read the first two files again.
        assert tf.migrate(a, data_dir=data)["TA"][:2] == [
            "measure biggest removed: columns biggest_MAX dropped at every level",
            "measure n added: columns n_COUNT at every level, NULL for the buckets stored before",
        ]
        third.to_csv(inbox / "3.csv", index=False)
        result = tf.run(a, {"Trades": inbox}, data_dir=data, spark=spark)
        assert result.aggregations["TA"].events_read == len(third)
        everything = pd.concat([both, third], ignore_index=True)
        check(a, data, everything, "total", "sum", None)
        check(a, data, everything, "n", "count", int(second["ts"].max()) + 1)
        assert sorted(p.name for p in (data / "checkpoints").iterdir()) == [
            f"TA-{AggregationLayout.of(a, 'TA').spec_hash}"]


@pytest.mark.slow
def test_another_apps_aggregation_of_the_same_name_is_left_alone(spark, tmp_path: Path) -> None:
    data, inbox = tmp_path / "data", tmp_path / "in"
    inbox.mkdir()
    trades(1, T0, 50).to_csv(inbox / "1.csv", index=False)
    mine = tf.load_app("@app:name('Trading')\n" + A)
    tf.run(mine, {"Trades": inbox}, data_dir=data, spark=spark)
    other = tf.load_app("@app:name('Risk')\n" + B)
    message = "aggregation TA in this store belongs to app 'Trading', not to 'Risk': it is left alone"
    assert tf.plan_changes(other, data_dir=data) == {"TA": [message]}
    assert tf.migrate(other, data_dir=data) == {"TA": [message]}
    with pytest.raises(StoreError, match="belongs to app 'Trading', not to app 'Risk'; two apps cannot share"):
        tf.run(other, {"Trades": inbox}, data_dir=data, spark=spark)
    assert stored(mine, data, "hours", "n")  # untouched, still the first app's


LEVELS_BEFORE = A.replace("every sec ... hour", "every sec, hour").replace(
    "define aggregation", "@purge(enable='true', interval='1 hour', @retentionPeriod(sec='30 min', hour='all'))\n"
                          "define aggregation")
LEVELS_AFTER = LEVELS_BEFORE.replace("every sec, hour", "every sec, min, hour, day")


@pytest.mark.slow
@pytest.mark.parametrize("backend", STORES)
def test_levels_added_are_built_from_the_finer_levels_kept(spark, tmp_path: Path, backend: str) -> None:
    """Minutes built from seconds, which were purged before a point (minutes before it are not kept, and
    say so), and days from hours; then a new file goes into every level as usual."""
    with nullcontext(None) if backend == "sqlite" else fresh_database(backend) as url:
        before, after = (tf.load_app(app_with_store(t, url)[0]) for t in (LEVELS_BEFORE, LEVELS_AFTER))
        data, inbox = tmp_path / "data", tmp_path / "in"
        inbox.mkdir()
        first, second = trades(1, T0, 500), trades(2, T0 + 2 * HOUR, 300)
        first.to_csv(inbox / "1.csv", index=False)
        tf.run(before, {"Trades": inbox}, data_dir=data, spark=spark)
        cut = int(tf.purge(before, data_dir=data)["TA"].before[AggregationLayout.of(before, "TA").spec.finest])
        assert T0 < cut < int(first["ts"].max())
        steps = tf.migrate(after, data_dir=data)["TA"]
        assert "level MINUTES built from level SECONDS" in steps[-2] and f"from {(cut + 59_999) // 60_000 * 60_000}" \
            in steps[-2] and "the earlier ones are not kept" in steps[-2]
        assert steps[-1].startswith("level DAYS built from level HOURS: ")
        minute_cut = (cut + 59_999) // 60_000 * 60_000
        kept = first[first["ts"] >= minute_cut]
        assert stored(after, data, "minutes", "total") == pytest.approx(oracle(kept, 60_000, "price", "sum", None))
        assert stored(after, data, "days", "n") == oracle(first, 86_400_000, "ts", "count", None)
        with pytest.raises(tf.QueryError, match="keeps seconds only from"):  # minutes do not cover it whole
            tf.query(after, f"from TA within {T0 + 60_000}L, {T0 + HOUR}L select symbol, total", data_dir=data)

        second.to_csv(inbox / "2.csv", index=False)
        result = tf.run(after, {"Trades": inbox}, data_dir=data, spark=spark)
        assert result.aggregations["TA"].events_read == len(second)
        both = pd.concat([first, second], ignore_index=True)
        assert stored(after, data, "days", "total") == pytest.approx(oracle(both, 86_400_000, "price", "sum", None))
        assert stored(after, data, "minutes", "n") == oracle(both[both["ts"] >= minute_cut], 60_000, "ts", "count",
                                                             None)


@pytest.mark.slow
def test_an_attribute_no_aggregate_reads_needs_no_migrate(spark, tmp_path: Path) -> None:
    """A column added to the stream: the next run goes on from the same checkpoint, nothing refused."""
    wider = tf.load_app(A.replace("ts long)", "ts long, venue string)"))
    data, inbox = tmp_path / "data", tmp_path / "in"
    inbox.mkdir()
    first, second = trades(1, T0, 200), trades(2, T0 + 2 * HOUR, 100)
    first.to_csv(inbox / "1.csv", index=False)
    tf.run(tf.load_app(A), {"Trades": inbox}, data_dir=data, spark=spark)
    assert tf.plan_changes(wider, data_dir=data)["TA"] == [
        "attribute venue of stream Trades added: no aggregate reads it, nothing stored changes"]
    assert stored(wider, data, "hours", "n")  # readable before any run of the new definition
    second.assign(venue="X").to_csv(inbox / "2.csv", index=False)
    result = tf.run(wider, {"Trades": inbox}, data_dir=data, spark=spark)
    assert result.aggregations["TA"].events_read == len(second)
    both = pd.concat([first, second], ignore_index=True)
    assert stored(wider, data, "hours", "n") == oracle(both, HOUR, "ts", "count", None)
    assert tf.plan_changes(wider, data_dir=data)["TA"] == []
    assert [p.name for p in (data / "checkpoints").iterdir()] == [f"TA-{AggregationLayout.of(wider, 'TA').spec_hash}"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", STORES)
def test_a_measure_added_gets_its_history_from_the_inputs(spark, tmp_path: Path, backend: str) -> None:
    """migrate --input: the inputs hold what the store holds, so the measure added is backfilled and is
    complete from the start; a file not read yet by the pipeline is left to it (not counted twice)."""
    with nullcontext(None) if backend == "sqlite" else fresh_database(backend) as url:
        a, b = (tf.load_app(app_with_store(t, url)[0]) for t in (A, A.replace("count() as n", "max(volume) as big")))
        data, inbox = tmp_path / "data", tmp_path / "in"
        inbox.mkdir()
        first, second = trades(1, T0, 300), trades(2, T0 + 2 * HOUR, 200)
        first.to_csv(inbox / "1.csv", index=False)
        tf.run(a, {"Trades": inbox}, data_dir=data, spark=spark)
        second.to_csv(inbox / "2.csv", index=False)  # arrives before the migration, read after it
        steps = tf.migrate(b, data_dir=data, inputs={"Trades": inbox}, spark=spark)["TA"]
        assert steps[-1] == "measures big backfilled from 300 events of 1 input files: complete from the start"
        assert tf.inspect(b, data_dir=data)[0].complete_from == ()
        assert tf.run(b, {"Trades": inbox}, data_dir=data, spark=spark).aggregations["TA"].events_read == len(second)
        both = pd.concat([first, second], ignore_index=True)
        check(b, data, both, "big", "max", None)
        check(b, data, both, "total", "sum", None)


@pytest.mark.slow
def test_a_measure_is_not_backfilled_from_inputs_that_lost_history(spark, tmp_path: Path) -> None:
    b = tf.load_app(A.replace("count() as n", "max(volume) as big"))
    data, inbox = tmp_path / "data", tmp_path / "in"
    inbox.mkdir()
    trades(1, T0, 300).to_csv(inbox / "1.csv", index=False)
    trades(2, T0 + 2 * HOUR, 200).to_csv(inbox / "2.csv", index=False)
    tf.run(tf.load_app(A), {"Trades": inbox}, data_dir=data, spark=spark)
    (inbox / "1.csv").unlink()  # an old input gone
    steps = tf.migrate(b, data_dir=data, inputs={"Trades": inbox}, spark=spark)["TA"]
    assert steps[-1].startswith("measures big not backfilled, so they read NULL before they are complete: "
                                "aggregation TA: the inputs differ from the store")
    assert [m for m, _ in tf.inspect(b, data_dir=data)[0].complete_from] == ["big"]
    assert all(v is None for v in stored(b, data, "hours", "big").values())
