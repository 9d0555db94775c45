"""Small micro-batches of local files run without adaptive execution, in a session of their source's own; tiny
ones without generated code as well."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import tiltframe as tf
from tests.engine.test_streaming import APP, write_jsonl
from tiltframe.engine.inputs import batch_sessions
from tiltframe.engine.inputs.batch_sessions import BatchSessions
from tiltframe.errors import UsageError
from tiltframe.timeutil.parse import parse_timestamp

ADAPTIVE = "spark.sql.adaptive.enabled"
PARTITIONS = "spark.sql.shuffle.partitions"
FACTORY = "spark.sql.codegen.factoryMode"
WHOLE_STAGE = "spark.sql.codegen.wholeStage"
T0 = parse_timestamp("2024-12-31 23:59:58")


@pytest.fixture
def adaptive(spark) -> Iterator[object]:
    """The shared session with adaptive execution on and generated code, as tiltframe's own sessions have them
    (the suite's have neither), and four shuffle partitions; set back afterwards."""
    before = {k: spark.conf.get(k) for k in (ADAPTIVE, PARTITIONS, FACTORY)}
    spark.conf.set(ADAPTIVE, "true")
    spark.conf.set(PARTITIONS, "4")
    spark.conf.set(FACTORY, "FALLBACK")
    yield spark
    for key, value in before.items():
        spark.conf.set(key, value)


def test_a_small_local_batch_gets_the_clone_and_the_shared_session_is_left_as_it_was(adaptive, tmp_path: Path) -> None:
    spark = adaptive
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    sizes = {f"file:{a}": (100, 0), f"file:{b}": (200, 0)}
    sessions = BatchSessions(spark)
    assert sessions.is_small(list(sizes), sizes)
    small = sessions.for_batch(True)
    assert small is not spark
    assert (small.conf.get(ADAPTIVE), small.conf.get(PARTITIONS)) == ("false", "1")
    assert (spark.conf.get(ADAPTIVE), spark.conf.get(PARTITIONS)) == ("true", "4")
    assert small.conf.get("spark.sql.session.timeZone") == spark.conf.get("spark.sql.session.timeZone")
    assert sessions.for_batch(True) is small  # made once
    assert small.conf.get(FACTORY) == "FALLBACK"  # generated code, as the shared session has it
    # A tiny batch (at most a sixteenth of the bound): its own clone, without generated code as well.
    assert sessions.is_tiny(list(sizes), sizes)
    tiny = sessions.for_batch(True, tiny=True)
    assert tiny is not small and tiny is not spark
    assert [tiny.conf.get(k) for k in (ADAPTIVE, PARTITIONS, FACTORY, WHOLE_STAGE)] == ["false", "1", "NO_CODEGEN",
                                                                                        "false"]
    assert sessions.for_batch(True, tiny=True) is tiny
    edge = {k: (batch_sessions.DEFAULT_SMALL_BATCH_BYTES // batch_sessions.TINY_SHARE // 2, 0) for k in sizes}
    over = {k: (v + 1, 0) for k, (v, _) in edge.items()}
    assert sessions.is_tiny(list(edge), edge)
    assert not sessions.is_tiny(list(over), over)
    assert sessions.is_small(list(over), over)
    # Past the bound, or with a file whose size is not known (not local), no small batch: the shared session.
    big = {k: (batch_sessions.DEFAULT_SMALL_BATCH_BYTES // 2 + 1, 0) for k in sizes}
    assert not sessions.is_small(list(big), big)
    assert not sessions.is_small([*sizes, "s3a://bucket/c.csv"], sizes)
    assert not sessions.is_small([], {})
    assert not sessions.is_tiny([*sizes, "s3a://bucket/c.csv"], sizes)
    assert not sessions.is_tiny([], {})
    assert sessions.for_batch(False) is spark
    assert (spark.conf.get(ADAPTIVE), spark.conf.get(PARTITIONS)) == ("true", "4")


def test_where_adaptive_execution_is_off_the_shared_session_stays(spark) -> None:
    assert spark.conf.get(ADAPTIVE) == "false"  # the suite's sessions (tests/conftest.py)
    sizes = {"file:/x.csv": (10, 0)}
    sessions = BatchSessions(spark)
    assert sessions.is_small(list(sizes), sizes)
    assert sessions.for_batch(True) is spark
    assert sessions.for_batch(True, tiny=True) is spark


def test_the_bound_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert batch_sessions.small_batch_bytes() == batch_sessions.DEFAULT_SMALL_BATCH_BYTES
    monkeypatch.setenv(batch_sessions.SMALL_BATCH_ENV, " 0 ")
    assert batch_sessions.small_batch_bytes() == 0
    for bad in ("1MB", "-1"):
        monkeypatch.setenv(batch_sessions.SMALL_BATCH_ENV, bad)
        with pytest.raises(UsageError, match=f"TILTFRAME_SMALL_BATCH_BYTES='{bad}': expected a number of bytes"):
            batch_sessions.small_batch_bytes()


def test_a_dataframe_batch_is_small_by_sparks_estimate(spark, monkeypatch: pytest.MonkeyPatch) -> None:
    local = spark.createDataFrame(pd.DataFrame({"k": ["a"] * 50, "v": [1.0] * 50}))
    assert batch_sessions.estimated_small([local, local])
    assert not batch_sessions.estimated_small([local, spark.range(10**9)])  # 8 GB by Spark's estimate
    monkeypatch.setenv(batch_sessions.SMALL_BATCH_ENV, "0")
    assert not batch_sessions.estimated_small([local])


@pytest.mark.slow
def test_small_and_large_batches_store_the_same_totals_as_the_events(
    adaptive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six one-file batches across New Year, run as tiny batches (the clone without generated code), as small
    ones (``$TILTFRAME_SMALL_BATCH_BYTES`` low enough to make them small and not tiny) and with
    ``$TILTFRAME_SMALL_BATCH_BYTES=0`` (the shared session, adaptive): all equal the events' own sums, and the
    shared session's settings are what they were."""
    spark = adaptive
    trades = [{"symbol": f"S{i % 3}", "price": float(i), "quantity": i + 1, "timestamp": T0 + 700 * i}
              for i in range(12)]
    inbox = tmp_path / "in"
    write_jsonl(inbox, [trades[i:i + 2] for i in range(0, 12, 2)])
    events = pd.DataFrame(trades)
    events["year"] = pd.to_datetime(events["timestamp"], unit="ms", utc=True).dt.year
    want = {(r.year, r.symbol): r.quantity for r in events.groupby(["year", "symbol"], as_index=False)
            .agg(quantity=("quantity", "sum")).itertuples()}
    chosen: list[str] = []
    for_batch = BatchSessions.for_batch

    def spy(self: BatchSessions, small: bool, *, tiny: bool = False):
        session = for_batch(self, small, tiny=tiny)
        chosen.append(f"{session.conf.get(ADAPTIVE)} {session.conf.get(FACTORY)}")
        return session

    monkeypatch.setattr(BatchSessions, "for_batch", spy)
    app = tf.load_app(APP)
    largest = max(f.stat().st_size for f in inbox.iterdir())
    for name, bound, session in (("tiny", "", "false NO_CODEGEN"), ("small", str(largest), "false FALLBACK"),
                                 ("large", "0", "true FALLBACK")):
        monkeypatch.setenv(batch_sessions.SMALL_BATCH_ENV, bound)
        chosen.clear()
        data = tmp_path / name
        result = tf.run(app, {"TradeStream": inbox}, data_dir=data, spark=spark, max_files_per_trigger=1)
        assert result.aggregations["TradeAggregation"].events_aggregated == 12
        assert chosen == [session] * 6
        got = tf.query(app, 'from TradeAggregation within 0L, 4102444800000L per "years" '
                       "select AGG_TIMESTAMP, symbol, total", data_dir=data)
        years = pd.to_datetime(got["AGG_TIMESTAMP"], unit="ms", utc=True).dt.year
        assert dict(zip(zip(years, got["symbol"], strict=True), got["total"], strict=True)) == want
        assert [spark.conf.get(k) for k in (ADAPTIVE, PARTITIONS, FACTORY)] == ["true", "4", "FALLBACK"]
