"""Bad input: stores.  A store lost, emptied, replaced or restored from an older backup behind its
checkpoint; keys that collations merge; keys and recorded values of any length; sums a state cannot hold.
Each kind runs on real files and, where the store matters, on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

import tiltframe as tf
from tests.bad_input.harness import Outcome, run
from tests.servers import app_with_store
from tiltframe.cli.commands import app as cli
from tiltframe.errors import StoreError
from tiltframe.model.aggregations import StoreSpec
from tiltframe.store import DB_FILE_NAME
from tiltframe.store.urls import store_target
from tiltframe.store.writes.recorded import MAX_RECORDED_BYTES

APP = """
define stream S (k string, v double, n long, ts long);
define aggregation A from S
select k, sum(v) as total, count() as events, sum(n) as units
group by k
aggregate by ts every sec ... day;
"""
DAY = 'from A within "2024-01-** **:**:**" per "days" select k, total, events, units'
T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def events(keys: list[str], start: int = 0, n: int = 1) -> list[dict]:
    return [{"k": k, "v": (start + i) / 4, "n": n * (start + i + 1), "ts": T0 + 1000 * (start + i)}
            for i, k in enumerate(keys)]


def write(folder: Path, name: str, rows: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def oracle(rows: list[dict]) -> dict[str, tuple[float, int, int]]:
    """Per key: sum(v), count(), sum(n), straight from the raw events (pandas, keys compared as Python does)."""
    df = pd.DataFrame(rows)
    got = df.groupby("k", sort=False).agg(total=("v", "sum"), events=("v", "size"), units=("n", "sum"))
    return {str(k): (float(r.total), int(r.events), int(r.units)) for k, r in got.iterrows()}


def daily(out: Outcome) -> dict[str, tuple[float, int, int]]:
    return {r.k: (float(r.total), int(r.events), int(r.units)) for r in out.query(DAY).itertuples()}


def engine_of(url: str) -> sa.Engine:
    return sa.create_engine(store_target(StoreSpec("rdbms", url)))


def empty(data_dir: Path, url: str | None) -> None:
    """The store emptied: the SQLite file truncated to nothing, or every table and view of the database gone."""
    if url is None:
        db = data_dir / DB_FILE_NAME
        for extra in ("-wal", "-shm"):
            db.with_name(db.name + extra).unlink(missing_ok=True)
        db.write_bytes(b"")
        return
    engine = engine_of(url)
    with engine.begin() as conn:
        quote = conn.dialect.identifier_preparer.quote
        for view in sa.inspect(conn).get_view_names():
            conn.exec_driver_sql(f"DROP VIEW {quote(view)}")
        meta = sa.MetaData()
        meta.reflect(conn)
        meta.drop_all(conn)
    engine.dispose()


def forget_key(data_dir: Path, url: str | None, key: str) -> None:
    """An older state of the store: the last batch (which alone wrote ``key``) taken out, its commit record,
    its rows and its recorded events, as a restore from a backup made before it would."""
    engine = engine_of(url) if url is not None else sa.create_engine(f"sqlite:///{data_dir / DB_FILE_NAME}")
    with engine.begin() as conn:
        meta = sa.MetaData()
        meta.reflect(conn)
        batches = meta.tables["TILTFRAME_BATCHES"]
        last = conn.execute(sa.select(sa.func.max(batches.c.batch_id))).scalar()
        conn.execute(sa.delete(batches).where(batches.c.batch_id == last))
        for name, table in meta.tables.items():
            if name.startswith("A_"):
                conn.execute(sa.delete(table).where(table.c.k == key))
    engine.dispose()


def fails_with(excinfo: pytest.ExceptionInfo[BaseException], *parts: str) -> str:
    """The failure's text (its one line and the Spark report chained to it) holds every part."""
    chain, exc = [], excinfo.value
    while exc is not None:
        chain.append(str(exc))
        exc = exc.__cause__
    text = " ".join(" ".join(chain).split())
    for part in parts:
        assert part in text, text
    return text


# --- the store lost, emptied or behind its checkpoint --------------------------------------------------


@pytest.mark.slow
def test_emptied_store_is_named_at_start_and_rebuild_gives_the_oracle(spark, tmp_path: Path,
                                                                       store: str | None) -> None:
    """Kinds: an emptied store (SQLite file truncated, or the database's tables dropped), then --rebuild."""
    inbox, data = tmp_path / "in", tmp_path / "data"
    first = events(["a", "b", "a"])
    write(inbox, "1.jsonl", first)
    out = run(spark, APP, {"S": inbox}, data, store=store)
    assert daily(out) == oracle(first)
    empty(data, store)
    second = events(["b", "c"], start=10)
    write(inbox, "2.jsonl", second)
    with pytest.raises(StoreError) as err:
        run(spark, APP, {"S": inbox}, data, store=store)
    fails_with(err, "holds no batch of pipeline", "has committed batches up to 0", "replaced or emptied",
               "--rebuild", "move the checkpoint directory away")
    out = run(spark, APP, {"S": inbox}, data, store=store, rebuild=True)
    assert daily(out) == oracle(first + second)
    assert out.info("A").events_read == len(first + second)  # nothing counted twice
    out = run(spark, APP, {"S": inbox}, data, store=store)  # and the rebuilt pipeline carries on as usual
    assert daily(out) == oracle(first + second)


@pytest.mark.slow
def test_store_behind_its_checkpoint_is_named_at_start(spark, tmp_path: Path, store: str | None) -> None:
    """Kind: a store restored from an older backup (its last batch gone) while the checkpoint is kept."""
    inbox, data = tmp_path / "in", tmp_path / "data"
    first, second = events(["a", "b"]), events(["late"], start=5)
    write(inbox, "1.jsonl", first)
    write(inbox, "2.jsonl", second)
    out = run(spark, APP, {"S": inbox}, data, store=store, max_files_per_trigger=1)  # batches 0 and 1
    assert daily(out) == oracle(first + second)
    forget_key(data, store, "late")
    write(inbox, "3.jsonl", events(["a"], start=9))
    with pytest.raises(StoreError) as err:
        run(spark, APP, {"S": inbox}, data, store=store)
    fails_with(err, "holds the batches of pipeline", "up to 0 only", "committed batches up to 1",
               "older backup", "--rebuild")


@pytest.mark.slow
def test_sqlite_file_restored_from_a_backup_is_named(spark, tmp_path: Path) -> None:
    """Kind: the SQLite file copied back from a backup made one run earlier."""
    inbox, data, backup = tmp_path / "in", tmp_path / "data", tmp_path / "backup"
    write(inbox, "1.jsonl", events(["a"]))
    run(spark, APP, {"S": inbox}, data)
    shutil.copytree(data, backup, ignore=shutil.ignore_patterns("checkpoints"))
    write(inbox, "2.jsonl", events(["b"], start=3))
    run(spark, APP, {"S": inbox}, data)
    for path in backup.iterdir():
        shutil.copy2(path, data / path.name)
    with pytest.raises(StoreError) as err:
        run(spark, APP, {"S": inbox}, data)
    fails_with(err, "up to 0 only", "committed batches up to 1")


@pytest.mark.slow
def test_store_replaced_by_another_deployments_store_is_named(spark, tmp_path: Path) -> None:
    """Kind: the store swapped for another one that holds the same aggregation, written by another pipeline
    (another deployment's data directory): none of this checkpoint's batches are in it."""
    inbox, other_inbox, data, other = tmp_path / "in", tmp_path / "other-in", tmp_path / "data", tmp_path / "other"
    write(inbox, "1.jsonl", events(["a"]))
    write(other_inbox, "1.jsonl", events(["z", "z"]))
    run(spark, APP, {"S": inbox}, data)
    run(spark, APP, {"S": other_inbox}, other)
    for path in data.glob(f"{DB_FILE_NAME}*"):
        path.unlink()
    for path in other.glob(f"{DB_FILE_NAME}*"):
        shutil.copy2(path, data / path.name)
    write(inbox, "2.jsonl", events(["b"], start=4))
    with pytest.raises(StoreError) as err:
        run(spark, APP, {"S": inbox}, data)
    fails_with(err, "holds no batch of pipeline", "replaced or emptied")


@pytest.mark.slow
def test_deleted_sqlite_store_exits_1_from_the_cli_and_rebuild_recovers(spark, tmp_path: Path) -> None:
    """Kind: the embedded store's file deleted; the CLI says so and exits 1, ``run --rebuild`` recovers."""
    inbox, data, app_file = tmp_path / "in", tmp_path / "data", tmp_path / "app.siddhi"
    app_file.write_text(APP, encoding="utf-8")
    rows = events(["x", "y", "x", "z"])
    write(inbox, "1.jsonl", rows)
    args = ["run", str(app_file), "--input", f"S={inbox}", "--data-dir", str(data)]
    runner = CliRunner()
    assert runner.invoke(cli, args).exit_code == 0
    for path in data.glob(f"{DB_FILE_NAME}*"):  # the file, and its -wal and -shm if any
        path.unlink()
    result = runner.invoke(cli, args)
    assert result.exit_code == 1, result.output
    said = " ".join(result.stderr.split())
    assert "holds no batch of pipeline" in said and "--rebuild" in said and "Traceback" not in said, said
    result = runner.invoke(cli, [*args, "--rebuild"])
    assert result.exit_code == 0, result.output
    got = tf.query(tf.load_app(APP), DAY, data_dir=data)
    assert {r.k: (r.total, r.events, r.units) for r in got.itertuples()} == oracle(rows)


@pytest.mark.slow
def test_checkpoint_that_lost_sparks_progress_is_named(spark, tmp_path: Path) -> None:
    """Kind: the checkpoint's Spark part deleted while the store keeps its batches: Spark would number
    batches from 0 again and the store would skip them as replays."""
    inbox, data = tmp_path / "in", tmp_path / "data"
    for i in range(3):
        write(inbox, f"{i}.jsonl", events([f"k{i}"], start=i))
    run(spark, APP, {"S": inbox}, data, max_files_per_trigger=1)
    (spark_dir,) = (data / "checkpoints").glob("A-*/spark")
    shutil.rmtree(spark_dir)
    with pytest.raises(StoreError) as err:
        run(spark, APP, {"S": inbox}, data)
    fails_with(err, "lost Spark's progress", "holds its batches up to 2", "--rebuild")


# --- keys and text ------------------------------------------------------------------------------------


TRICKY = ["IBM", "ibm", "IBM ", "IBM  ", " IBM", "é", "e\u0301", "e", "E", "📈", "😀", "ß", "ss"]
LONG = ["k" * 300, "k" * 299 + "K", "é" * 256, "x" * 20_000]


@pytest.mark.slow
@pytest.mark.parametrize("keys", [TRICKY, LONG], ids=["case-space-accent-emoji", "long"])
def test_distinct_keys_stay_apart_on_every_store(spark, tmp_path: Path, store: str | None, keys: list[str]) -> None:
    """Kinds: keys differing only in case, trailing or leading spaces, accents (composed or not) or emoji;
    keys of 300 characters (two alike but for the last one), 256 two-byte characters and 20 000
    characters: one group each, the same rows on every store."""
    inbox = tmp_path / "in"
    rows = events(keys * 2)
    write(inbox, "1.jsonl", rows)
    out = run(spark, APP, {"S": inbox}, tmp_path / "data", store=store)
    assert daily(out) == oracle(rows)
    assert len(out.rows("A")) == len(rows)  # one row per key and second, none merged
    assert out.totals["A"].events_aggregated == len(rows)


@pytest.mark.slow
def test_a_huge_rejected_value_is_recorded_cut_with_a_marker(spark, tmp_path: Path, store: str | None) -> None:
    """Kind: an event whose bad value is 300 KB: recorded, cut to fit with a visible marker; the run goes on."""
    inbox = tmp_path / "in"
    good = events(["a", "b"])
    huge = "9" * 100_000 + "x" * 200_000
    write(inbox, "1.jsonl", [*good, {"k": "a", "v": huge, "n": 1, "ts": T0}])
    out = run(spark, APP, {"S": inbox}, tmp_path / "data", store=store)
    assert daily(out) == oracle(good)
    recorded = out.recorded("A")
    assert len(recorded) == 1 and recorded["field"][0] == "v"
    for column in ("value", "raw"):
        text = recorded[column][0]
        assert len(text.encode()) <= MAX_RECORDED_BYTES and "…[truncated, " in text, column
    assert recorded["value"][0].endswith(f"…[truncated, {len(huge)} bytes]")
    assert out.totals["A"].events_rejected == 1


@pytest.mark.slow
def test_inspect_values_are_plain_json(spark, tmp_path: Path, store: str | None) -> None:
    """Kind: the servers' drivers give DECIMAL sums; ``inspect`` gives plain numbers on every store."""
    inbox = tmp_path / "in"
    write(inbox, "1.jsonl", [*events(["a"]), {"k": "a", "v": "oops", "n": 1, "ts": T0}])
    out = run(spark, APP, {"S": inbox}, tmp_path / "data", store=store)
    info = json.loads(json.dumps(asdict(out.info("A"))))
    assert (info["events_read"], info["events_aggregated"], info["events_rejected"]) == (2, 1, 1)


# --- sums a state cannot hold -------------------------------------------------------------------------


@pytest.mark.slow
def test_a_long_sum_beyond_64_bits_on_merge_is_a_clear_error(spark, tmp_path: Path, store: str | None) -> None:
    """Kind: two valid longs in two batches whose sum is beyond 64 bits: the batch is refused, naming the
    aggregation, table, key, bucket and values; nothing of it is stored, never a wrapped or float sum."""
    inbox, data = tmp_path / "in", tmp_path / "data"
    big = 2**63 - 100
    write(inbox, "1.jsonl", [{"k": "IBM", "v": 1.0, "n": big, "ts": T0}, {"k": "b", "v": 1.0, "n": 1, "ts": T0}])
    write(inbox, "2.jsonl", [{"k": "IBM", "v": 1.0, "n": 1000, "ts": T0 + 10}, {"k": "b", "v": 2.0, "n": 2, "ts": T0}])
    with pytest.raises(Exception) as err:  # raised in Spark's foreachBatch: Spark wraps it
        run(spark, APP, {"S": inbox}, data, store=store, max_files_per_trigger=1)
    fails_with(err, "StoreError", "could not write batch 1 of aggregation A", "in table A_SECONDS",
               "bucket 2024-01-01 00:00:00 UTC", "key k='IBM'", f"units_SUM = {big} + 1000", "64-bit")
    text, env = app_with_store(APP, store)
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        outcome = Outcome(tf.load_app(text), data, {})
        stored = outcome.rows("A")
        assert sorted(stored["units_SUM"].tolist()) == [1, big]  # batch 0 only
        assert outcome.info("A").batches == 1


@pytest.mark.slow
def test_a_double_sum_beyond_its_range_on_merge_is_a_clear_error(spark, tmp_path: Path,
                                                                  store: str | None) -> None:
    """Kind: two doubles near the top of the range in two batches: their sum is no double."""
    inbox = tmp_path / "in"
    write(inbox, "1.jsonl", [{"k": "a", "v": 1.5e308, "n": 1, "ts": T0}])
    write(inbox, "2.jsonl", [{"k": "a", "v": 1.5e308, "n": 1, "ts": T0 + 1}])
    with pytest.raises(Exception) as err:
        run(spark, APP, {"S": inbox}, tmp_path / "data", store=store, max_files_per_trigger=1)
    fails_with(err, "StoreError", "key k='a'", "total_SUM = 1.5e+308 + 1.5e+308", "range of a double")
