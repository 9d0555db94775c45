"""``tiltframe verify`` on stores built by real runs: it passes on intact stores (every function, sketches
within their bounds, late and moved events, several batches) and names the level, bucket, key and column of
one stored value altered or one row deleted, on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import json
import os
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

import tiltframe as tf
from tests.servers import STORES, app_with_store, fresh_database
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.cli.commands import app as cli
from tiltframe.engine.inputs.sources import FileInput
from tiltframe.store.open_stores import StoreRegistry

pytestmark = pytest.mark.slow

APP = """
define stream Trades (symbol string, price double, volume long, ts long);
define aggregation Stats
from Trades
select symbol, sum(price) as total, count() as n, avg(price) as mean, min(volume) as low, max(volume) as high,
       stdDev(price) as sd, distinctCount(volume) as kinds, kll(price, [0.5, 0.9]) as q, dds(price, [0.5, 0.99]) as d,
       hdr(volume, [0.5, 0.99]) as h, price as last
group by symbol
aggregate by ts every sec ... day;
"""
T0 = 1_700_006_400_000  # 2023-11-15 00:00 GMT


def trades(seed: int, n: int, start: int = T0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "symbol": rng.choice(["IBM", "WSO2", "ORCL"], n),
        "price": np.round(rng.lognormal(3, 1, n), 3),
        "volume": rng.integers(1, 200, n),
        "ts": start + rng.integers(0, 3 * 3_600_000, n),
    })


def write(folder: Path, name: str, frame: pd.DataFrame, age: int) -> None:
    """A file with an increasing modification time (arrival order)."""
    path = folder / name
    frame.to_csv(path, index=False)
    os.utime(path, (time.time() - 1000 + age, time.time() - 1000 + age))


def alter(app: tf.AppSpec, data: Path, table: str, where: dict, column: str | None = None, add: float = 0) -> None:
    """Add ``add`` to ``column`` of the rows of ``table`` matching ``where``, or delete them (no column)."""
    layout = AggregationLayout.of(app, "Stats")
    t = sa.table(table, *(sa.column(c) for c in [*where, *([column] if column else [])]))
    match = [t.c[k] == v for k, v in where.items()]
    stores = StoreRegistry(data)
    try:
        with stores.for_aggregation(layout.spec).write_transaction("alter a row") as conn:
            conn.execute(sa.update(t).where(*match).values({column: t.c[column] + add}) if column
                         else sa.delete(t).where(*match))
    finally:
        stores.close()


@pytest.mark.parametrize("backend", STORES)
def test_verify_passes_on_an_intact_store_and_names_what_was_altered(spark, tmp_path: Path, backend: str) -> None:
    with nullcontext(None) if backend == "sqlite" else fresh_database(backend) as url:
        app = tf.load_app(app_with_store(APP, url)[0])
        data, inbox = tmp_path / "data", tmp_path / "in"
        inbox.mkdir()
        for i in range(3):
            write(inbox, f"{i}.csv", trades(i, 700), i)
        tf.run(app, {"Trades": FileInput(str(inbox), max_files_per_trigger=1)}, data_dir=data, spark=spark)
        write(inbox, "unread.csv", trades(9, 50), 10)  # not read by the pipeline yet: left out
        result = tf.verify(app, {"Trades": inbox}, data_dir=data, spark=spark)["Stats"]
        assert result.ok, result.differences[:5]
        assert result.files == 3 and result.events == 2_100
        assert result.notes == ["1 files of the input are not read yet by the pipeline: left out"]
        assert set(result.rows) == {"seconds", "minutes", "hours", "days"} and result.rows["days"] == 3

        hour = T0 + 3_600_000
        alter(app, data, "Stats_HOURS", {"AGG_TIMESTAMP": hour, "symbol": "IBM"}, "total_SUM", 0.5)
        alter(app, data, "Stats_MINUTES", {"AGG_TIMESTAMP": T0, "symbol": "WSO2"})
        found = tf.verify(app, {"Trades": inbox}, data_dir=data, spark=spark)["Stats"].differences
        assert {(d.level, d.bucket, d.key, d.column) for d in found} == {
            ("hours", hour, ("IBM",), "total"), ("minutes", T0, ("WSO2",), None),
        }
        row = next(d for d in found if d.column is None)
        assert (row.stored, row.recomputed) == (None, "row")
        if backend != "sqlite":
            return  # the range is the store's read, the same on every store
        within = tf.verify(app, {"Trades": inbox}, data_dir=data, spark=spark,
                           within=(T0 + 2 * 3_600_000, T0 + 3 * 3_600_000))["Stats"]
        assert within.ok and within.rows["hours"] == 3 and within.rows["days"] == 0


LATE = """
define stream Trades (symbol string, price double, volume long, ts long);
@BufferSize('2')
define aggregation Stats
from Trades
select symbol, sum(price) as total, count() as n, max(volume) as high
group by symbol
aggregate by ts every sec ... hour;
"""


@pytest.mark.parametrize("ignore", [False, True])
def test_events_moved_or_dropped_by_the_buffer_count_as_the_pipeline_counted_them(spark, tmp_path: Path,
                                                                                  ignore: bool) -> None:
    dropped = "@BufferSize('2')\n@IgnoreEventsOlderThanBuffer('true')"
    text = LATE if not ignore else LATE.replace("@BufferSize('2')", dropped)
    app = tf.load_app(text)
    data, inbox = tmp_path / "data", tmp_path / "in"
    inbox.mkdir()
    base = trades(1, 300)
    # One event per file, in an order that leaves some events older than the buffer.
    rng = np.random.default_rng(4)
    for i, chunk in enumerate(np.array_split(base.sort_values("ts").to_numpy(), 30)):
        frame = pd.DataFrame(chunk, columns=base.columns)
        if i % 5 == 4:
            frame.loc[frame.index[0], "ts"] = int(frame["ts"].iloc[0]) - 3_600_000 - int(rng.integers(0, 1000))
        path = inbox / f"{i:03d}.jsonl"
        path.write_text("".join(json.dumps({k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}) + "\n"
                                for r in frame.to_dict("records")))
        os.utime(path, (time.time() - 1000 + i, time.time() - 1000 + i))
    tf.run(app, {"Trades": FileInput(str(inbox), max_files_per_trigger=3)}, data_dir=data, spark=spark)
    info = tf.inspect(app, data_dir=data)[0]
    assert (info.events_moved if not ignore else info.events_rejected) > 0
    result = tf.verify(app, {"Trades": inbox}, data_dir=data, spark=spark)["Stats"]
    assert result.ok, result.differences[:5]


def test_the_command_prints_each_difference_and_exits_1(spark, tmp_path: Path) -> None:
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(APP)
    app = tf.load_app(APP)
    data, inbox = tmp_path / "data", tmp_path / "in"
    inbox.mkdir()
    write(inbox, "a.csv", trades(1, 300), 0)
    tf.run(app, {"Trades": inbox}, data_dir=data, spark=spark)
    ok = CliRunner().invoke(cli, ["verify", str(app_file), "-i", f"Trades={inbox}", "-d", str(data)])
    assert ok.exit_code == 0, ok.output
    assert "Stats: every stored level equals the recomputation" in ok.output
    alter(app, data, "Stats_DAYS", {"symbol": "ORCL"}, "n_COUNT", 1)
    bad = CliRunner().invoke(cli, ["verify", str(app_file), "-i", f"Trades={inbox}", "-d", str(data),
                                   "--within", "2023-11-15, 2023-11-16"], env={"COLUMNS": "160"})
    assert bad.exit_code == 1, bad.output
    assert "Stats: 1 differences" in bad.output
    assert "2023-11-15 00:00:00 (1700006400000)" in bad.output and "ORCL" in bad.output
    refused = CliRunner().invoke(cli, ["verify", str(app_file), "-d", str(data)])
    assert refused.exit_code == 2 and "--input STREAM=PATH" in refused.output
