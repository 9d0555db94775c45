"""Executor-side staging on PostgreSQL and MariaDB (``engine.rollup.staged_writes``, ``engine.rollup.staging_writers``,
``store.writes.staging``): the driver receives no partial rows, the rollups equal an oracle over the raw events
on both paths, a retried task attempt, a failed job and a killed run's stale rows count nothing, and an
overflowing sum is named with nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import tiltframe as tf
from tests.servers import SERVER_STORES, app_with_store, fresh_database, staged_batches
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.inputs.batch_sessions import SMALL_BATCH_ENV
from tiltframe.engine.rollup import staged_writes
from tiltframe.engine.rollup.pipeline import AggregationPipeline
from tiltframe.engine.rollup.staged_writes import FAIL_FIRST_ATTEMPT_ENV, STAGED_WRITES_ENV
from tiltframe.errors import StoreError
from tiltframe.model.aggregations import StoreSpec
from tiltframe.store.base import BatchWrite
from tiltframe.store.open_stores import StoreRegistry
from tiltframe.store.urls import store_target
from tiltframe.store.writes.staging import STAGE_BATCH, STAGE_LEVEL, STAGE_PIPELINE, STAGE_TAG, staging_name

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
APP = """
define stream S (k string, v double, n long, ts long);
define aggregation A from S
select k, sum(v) as total, count() as events, sum(n) as units, min(v) as low, max(v) as high
group by k
aggregate by ts every sec ... day;
"""
SCHEMA = "k string, v double, n long, ts long"
T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z
PER = {"seconds": 1000, "minutes": 60_000, "hours": 3_600_000, "days": 86_400_000}


@pytest.fixture(autouse=True)
def _no_small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batches here are small, and the master local, either of which would send them through the
    driver: ``$TILTFRAME_SMALL_BATCH_BYTES=0`` and ``$TILTFRAME_STAGED_WRITES=1`` have them staged."""
    monkeypatch.setenv(SMALL_BATCH_ENV, "0")
    monkeypatch.setenv(STAGED_WRITES_ENV, "1")


@pytest.fixture(params=SERVER_STORES)
def server(request: pytest.FixtureRequest) -> str:
    """The kind of test server the store runs on."""
    return request.param


class Spy:
    """The store, noting every batch the pipeline hands it."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.batches: list[BatchWrite] = []

    def write_batch(self, layout: AggregationLayout, batch: BatchWrite) -> bool:
        self.batches.append(batch)
        return self._store.write_batch(layout, batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _events(n: int, seed: int) -> pd.DataFrame:
    """Events out of time order over two days, some without ``v`` or ``n`` (NULL measures); keys that
    differ in case only, empty, with spaces, accents, tabs, newlines, backslashes, quotes and emoji."""
    rng = np.random.default_rng(seed)
    keys = ["a", "A", "B", "", "ü x", "u x", "t\tab", "new\nline", "back\\slash", "q'\"uote", "\\N", "🙂 "]
    df = pd.DataFrame({"k": rng.choice(keys, n), "v": rng.integers(-400, 400, n) / 4,
                       "n": rng.integers(-50, 1000, n), "ts": T0 + rng.integers(0, 2 * 86_400_000, n)})
    df["v"] = df["v"].astype(object)
    df["n"] = df["n"].astype(object)
    df.loc[rng.random(n) < 0.1, "v"] = None
    df.loc[rng.random(n) < 0.1, "n"] = None
    return df


def _oracle(events: pd.DataFrame, per: str) -> pd.DataFrame:
    e = events.assign(AGG_TIMESTAMP=events["ts"] // PER[per] * PER[per], v=events["v"].astype(float),
                      n=events["n"].astype("Int64"))
    got = e.groupby(["AGG_TIMESTAMP", "k"], sort=True).agg(
        total=("v", "sum"), events=("ts", "size"), units=("n", "sum"), low=("v", "min"), high=("v", "max"),
        any_v=("v", "count"), any_n=("n", "count")).reset_index()
    got.loc[got["any_v"] == 0, "total"] = np.nan  # a sum of no values is NULL
    got["units"] = got["units"].astype(float)
    got.loc[got["any_n"] == 0, "units"] = np.nan
    return got.drop(columns=["any_v", "any_n"])


def _check(app: Any, data_dir: Path, events: pd.DataFrame) -> None:
    for per in PER:
        got = tf.query(app, f'from A within 0L, 4102444800000L per "{per}" '
                       "select AGG_TIMESTAMP, k, total, events, units, low, high", data_dir=data_dir)
        got = got.sort_values(["AGG_TIMESTAMP", "k"]).reset_index(drop=True)
        want = _oracle(events, per)
        assert len(got) == len(want), per
        assert list(got["AGG_TIMESTAMP"]) == list(want["AGG_TIMESTAMP"]), per
        assert list(got["k"]) == list(want["k"]), per
        assert list(got["events"]) == list(want["events"]), per
        for col in ("total", "units", "low", "high"):
            np.testing.assert_allclose(got[col].astype(float), want[col].astype(float), rtol=1e-12, err_msg=per)


def _pipeline(tmp: Path, url: str, monkeypatch: pytest.MonkeyPatch,
              app_text: str = APP) -> tuple[Any, StoreRegistry, AggregationPipeline]:
    text, env = app_with_store(app_text, url, "TF_TEST_STORE_PASSWORD")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    app = tf.load_app(text)
    layout = AggregationLayout.of(app, "A")
    stores = StoreRegistry(tmp)
    store = stores.for_aggregation(layout.spec)
    store.ensure_schema(layout)
    return app, stores, AggregationPipeline(layout, Spy(store), "staged-test")


def _staged_rows(url: str, layout: AggregationLayout) -> int:
    engine = sa.create_engine(store_target(StoreSpec("rdbms", url)))
    try:
        with engine.connect() as conn:
            table = sa.table(staging_name(layout))
            return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar())
    finally:
        engine.dispose()


@pytest.mark.parametrize("staged", [True, False], ids=["staged", "driver"])
def test_both_paths_equal_the_oracle(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, staged: bool,
                                     server: str) -> None:
    monkeypatch.setenv(STAGED_WRITES_ENV, "1" if staged else "0")
    events = _events(400, 3)
    with fresh_database(server) as url:
        app, stores, pipeline = _pipeline(tmp_path, url, monkeypatch)
        for batch_id, part in enumerate(events.iloc[i] for i in np.array_split(np.arange(len(events)), 3)):
            pipeline.process(spark.createDataFrame(part, SCHEMA).repartition(3), batch_id)
        spy = pipeline.store
        assert len(spy.batches) == 3
        if staged:  # no partial row reached the driver
            assert all(not b.levels and b.staged is not None and b.staged.tags for b in spy.batches)
            assert _staged_rows(url, pipeline.layout) == 0
        else:
            assert all(b.levels and b.staged is None for b in spy.batches)
        assert pipeline.totals.events_aggregated == len(events)
        stores.close()
        _check(app, tmp_path, events)


def test_a_killed_runs_and_a_failed_jobs_staged_rows_count_nothing(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    events = _events(200, 4)
    first, second = events.iloc[:100], events.iloc[100:]
    with fresh_database(server) as url:
        app, stores, pipeline = _pipeline(tmp_path, url, monkeypatch)
        layout = pipeline.layout
        # A failed task (local mode retries none): the job fails after partition 0 copied its rows, and the
        # batch goes through the driver instead.
        monkeypatch.setenv(FAIL_FIRST_ATTEMPT_ENV, "0")
        pipeline.process(spark.createDataFrame(first, SCHEMA).repartition(2), 0)
        assert pipeline.store.batches[-1].staged is None
        assert _staged_rows(url, layout) > 0  # left behind by the failed attempt
        monkeypatch.delenv(FAIL_FIRST_ATTEMPT_ENV)
        # A run killed between its copy and its commit: rows of batch 1 under a tag nobody will return.
        engine = sa.create_engine(store_target(StoreSpec("rdbms", url)))
        with engine.begin() as conn:
            row = {STAGE_PIPELINE: "staged-test", STAGE_BATCH: 1, STAGE_TAG: "killed/0/0", STAGE_LEVEL: 0,
                   "AGG_TIMESTAMP": T0, "k": "a", "AGG_EVENT_TIMESTAMP": T0, "AGG_COUNT": 1000}
            conn.execute(sa.table(staging_name(layout), *map(sa.column, row)).insert().values(row))
        engine.dispose()
        pipeline.process(spark.createDataFrame(second, SCHEMA).repartition(2), 1)
        assert pipeline.store.batches[-1].staged is not None
        assert _staged_rows(url, layout) == 0
        stores.close()
        _check(app, tmp_path, events)


def test_an_overflowing_sum_is_named_and_nothing_of_the_batch_is_written(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    big = pd.DataFrame({"k": ["a", "b"], "v": [1.0, 2.0], "n": [2**63 - 10, 1], "ts": [T0, T0]})
    more = pd.DataFrame({"k": ["b", "a"], "v": [3.0, 4.0], "n": [5, 100], "ts": [T0 + 5, T0 + 7]})
    with fresh_database(server) as url:
        app, stores, pipeline = _pipeline(tmp_path, url, monkeypatch)
        pipeline.process(spark.createDataFrame(big, SCHEMA), 0)
        with pytest.raises(StoreError) as failed:
            pipeline.process(spark.createDataFrame(more, SCHEMA), 1)
        assert pipeline.store.batches[-1].staged is not None
        said = str(failed.value)
        assert "units_SUM" in said and "k='a'" in said and "the batch was not written" in said, said
        assert not pipeline.store.is_committed(pipeline.layout, "staged-test", 1)
        stores.close()
        _check(app, tmp_path, big)


def test_a_sum_mariadb_cannot_hold_is_named_and_nothing_is_written(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two doubles whose sum within one batch is infinite: ``LOAD DATA LOCAL`` would store 0 with a warning,
    so the executors refuse it, and the driver's check names the row; nothing of the batch is written."""
    huge = pd.DataFrame({"k": ["a", "a", "b"], "v": [1.5e308, 1.5e308, 1.0], "n": [1, 2, 3], "ts": [T0, T0 + 1, T0]})
    with fresh_database("mysql") as url:
        _, stores, pipeline = _pipeline(tmp_path, url, monkeypatch)
        with pytest.raises(StoreError, match=r"total_SUM holds inf, which this store cannot hold"):
            pipeline.process(spark.createDataFrame(huge, SCHEMA), 0)
        assert not pipeline.store.is_committed(pipeline.layout, "staged-test", 0)
        stores.close()


def test_empty_partitions_of_a_batch_with_a_late_event_policy_stage(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, server: str
) -> None:
    """A task whose partition is empty still answers in the declared schema (with the policy's record
    column): more partitions than events, one event rejected as too late."""
    bounded = APP.replace("define aggregation", "@allowedLateness('2000 ms')\ndefine aggregation")
    events = pd.DataFrame({"k": ["a", "b", "a"], "v": [1.0, 2.0, 4.0], "n": [1, 2, 4],
                           "ts": [T0 + 10_000, T0, T0 + 10_001]})
    with fresh_database(server) as url, caplog.at_level("WARNING", logger="tiltframe.engine.rollup.pipeline"):
        app, stores, pipeline = _pipeline(tmp_path, url, monkeypatch, bounded)
        pipeline.process(spark.createDataFrame(events, SCHEMA).coalesce(1).repartition(6), 0)
        assert pipeline.store.batches[-1].staged is not None
        assert (pipeline.totals.events_aggregated, pipeline.totals.events_rejected) == (2, 1)
        assert _staged_rows(url, pipeline.layout) == 0
        stores.close()
        _check(app, tmp_path, events.iloc[[0, 2]])
    assert not [r for r in caplog.records if "could not stage" in r.getMessage()]


_RETRIED = """
import os, sys
sys.path.insert(0, {root!r})
import numpy as np, pandas as pd
from pathlib import Path
from tiltframe.engine.spark.session import get_session
from tests.engine.rollup import test_staged_writes as t

spark = get_session("local[2,3]")  # a failed task is tried again
os.environ[{fail!r}] = "1"
events = t._events(300, 5)
tmp = Path({tmp!r})

class Patch:
    def setenv(self, name, value):
        os.environ[name] = value

app, stores, pipeline = t._pipeline(tmp, {url!r}, Patch())
for batch_id, part in enumerate(events.iloc[i] for i in np.array_split(np.arange(len(events)), 2)):
    pipeline.process(spark.createDataFrame(part, t.SCHEMA).repartition(3), batch_id)
assert all(b.staged is not None for b in pipeline.store.batches), pipeline.store.batches
assert t._staged_rows({url!r}, pipeline.layout) == 0
stores.close()
t._check(app, tmp, events)
print("RETRIED-OK")
"""


def test_a_retried_task_attempt_does_not_double_rows(tmp_path: Path, server: str) -> None:
    """A task whose first attempt copied its rows and then failed: only the second attempt's rows count.
    Its own process: local mode retries a task only with a ``local[N,F]`` master."""
    with fresh_database(server) as url:
        script = _RETRIED.format(root=str(ROOT), fail=FAIL_FIRST_ATTEMPT_ENV, tmp=str(tmp_path), url=url)
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                              timeout=600, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
        assert "RETRIED-OK" in done.stdout, done.stderr[-4000:]



@pytest.mark.parametrize("policy", ["buffer", "bounded"])
def test_late_event_policies_on_the_staged_path(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture, policy: str, server: str) -> None:
    """Events a policy moves (Siddhi's buffer) or rejects (bounded lateness) reach the driver as records
    beside the staged rows: the rollups equal the policy's oracle and the records hold exactly the others."""
    from tests.engine.test_lateness_oracle import buffer_oracle, recorded, stream_of, with_annotation
    from tests.oracle import check_against_oracle, run_batches

    rng = np.random.default_rng(11)
    steps = [(str(rng.choice(["IBM", "WSO2", "ORCL"])), int(rng.integers(0, 1500)), float(rng.random()),
              int(rng.integers(1, 100_000)) / 100, int(rng.integers(1, 1000))) for _ in range(60)]
    events = stream_of(steps, T0, 6000)
    annotation = {"buffer": "@BufferSize('1')\n@IgnoreEventsOlderThanBuffer('false')",
                  "bounded": "@allowedLateness('2000 ms')"}[policy]
    with fresh_database(server) as url, caplog.at_level("WARNING", logger="tiltframe.engine.rollup.pipeline"):
        text, env = app_with_store(with_annotation(annotation), url, "TF_TEST_STORE_PASSWORD")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        app, totals = run_batches(spark, tmp_path, events, [15, 30, 45], text)
        if policy == "buffer":
            at, moved = buffer_oracle(events["ts"], 1, False)
            kept, others = events.assign(ts=at), moved
            assert (totals.events_aggregated, totals.events_moved) == (len(events) - moved.sum(), moved.sum())
        else:
            keep = (events["ts"] >= np.maximum.accumulate(events["ts"]) - 2000).to_numpy()
            kept, others = events[keep], ~keep
            assert (totals.events_aggregated, totals.events_rejected) == (keep.sum(), (~keep).sum())
        assert others.sum() > 0  # the policy had events to move or reject
        check_against_oracle(app, tmp_path, kept)
        assert sorted(recorded(app, tmp_path)["event_timestamp"]) == sorted(events["ts"][others])
        assert _staged_rows(url, AggregationLayout.of(app, "TradeAggregation")) == 0
    assert not [r for r in caplog.records if "could not stage" in r.getMessage()]


def test_small_file_batches_go_through_the_driver_and_larger_ones_are_staged(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    """Micro-batches of files up to ``$TILTFRAME_SMALL_BATCH_BYTES`` in all are written through the driver,
    larger ones staged by the executors (``engine.inputs.batch_sessions``); both equal the oracle."""
    events = _events(400, 5).assign(k=lambda e: e["k"].map(lambda k: f"key {len(k)}"))
    inbox = tmp_path / "in"
    inbox.mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(events)), 4)):
        events.iloc[part].to_csv(inbox / f"part {i}.csv", index=False)
    one_file = (inbox / "part 0.csv").stat().st_size
    staged = staged_batches(monkeypatch)
    for bound, want in (("", []), (str(one_file), [0, 1])):
        monkeypatch.setenv(SMALL_BATCH_ENV, bound)
        staged.clear()
        with fresh_database(server) as url:
            text, env = app_with_store(APP, url, "TF_TEST_STORE_PASSWORD")
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            app = tf.load_app(text)
            data = tmp_path / f"data{bound}"
            result = tf.run(app, {"S": inbox}, data_dir=data, spark=spark, max_files_per_trigger=2)
            assert result.aggregations["A"].events_aggregated == len(events)
            assert staged == want, bound
            _check(app, data, events)


def test_a_small_dataframe_batch_goes_through_the_driver(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    """A batch handed over as a DataFrame is small by Spark's estimate of its size: 200 local events are
    written through the driver, and equal the oracle."""
    monkeypatch.delenv(SMALL_BATCH_ENV)  # the default bound
    events = _events(200, 7)
    with fresh_database(server) as url:
        app, stores, pipeline = _pipeline(tmp_path, url, monkeypatch)
        pipeline.process(spark.createDataFrame(events, SCHEMA), 0)
        assert [b.staged for b in pipeline.store.batches] == [None]
        stores.close()
        _check(app, tmp_path, events)


def test_a_local_master_writes_through_the_driver_unless_told_to_stage(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    """Unset, ``$TILTFRAME_STAGED_WRITES`` leaves it to the master: a cluster's stages, a local one's
    executors share the driver's cores, so even a batch that is not small goes through the driver (its new
    buckets by the bulk load of ``store.writes.appends``), and equals the oracle."""
    assert staged_writes.wanted_on("spark://master:7077") and staged_writes.wanted_on("yarn")
    assert not staged_writes.wanted_on("local[2]") and not staged_writes.wanted_on("local")
    monkeypatch.delenv(STAGED_WRITES_ENV)
    events = _events(300, 3)
    with fresh_database(server) as url:
        app, stores, pipeline = _pipeline(tmp_path, url, monkeypatch)
        pipeline.process(spark.createDataFrame(events, SCHEMA), 0)  # not small: SMALL_BATCH_ENV is 0
        assert pipeline._staging is False and [b.staged for b in pipeline.store.batches] == [None]
        stores.close()
        _check(app, tmp_path, events)
