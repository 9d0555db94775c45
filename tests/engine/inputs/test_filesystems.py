"""Inputs and checkpoints given as Hadoop file system URIs: file:// end to end against a pandas oracle, a
separate checkpoint directory, and schemes whose connector is missing refused with the package to add."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import tiltframe as tf
from tests.engine.conftest import MountedDir
from tiltframe.cli.commands import app as cli
from tiltframe.engine.inputs.file_batches import batch_files
from tiltframe.engine.inputs.filesystems import Folder, checkpoint_root, local_path, open_folder
from tiltframe.engine.inputs.hadoop_paths import HadoopPath
from tiltframe.errors import UsageError

APP = """
define stream Trades (symbol string, quantity long, ts long);
define aggregation Totals
from Trades select symbol, sum(quantity) as total, count() as trades group by symbol
aggregate by ts every sec ... day;
"""


def test_local_paths_and_file_uris_are_this_machines() -> None:
    assert local_path("/tmp/x") == Path("/tmp/x")
    assert local_path("rel/x") == Path("rel/x")
    # As Hadoop's Path (and so Spark) reads them: written out, never percent-decoded.
    assert local_path("file:///tmp/a b") == Path("/tmp/a b")
    assert local_path("file:///tmp/a%20b") == Path("/tmp/a%20b")
    assert local_path("file:/tmp/x") == Path("/tmp/x")
    assert local_path("s3a://bucket/x") is None
    assert local_path("hdfs:///x") is None


def test_checkpoint_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TILTFRAME_CHECKPOINT_DIR", raising=False)
    assert checkpoint_root(None, tmp_path) == tmp_path / "checkpoints"
    assert checkpoint_root(f"file://{tmp_path}/c", tmp_path) == tmp_path / "c"
    monkeypatch.setenv("TILTFRAME_CHECKPOINT_DIR", str(tmp_path / "e"))
    assert checkpoint_root(None, tmp_path) == tmp_path / "e"
    assert checkpoint_root("s3a://bucket/checkpoints/", tmp_path) == HadoopPath("s3a://bucket/checkpoints")
    (tmp_path / "f").write_text("x")
    with pytest.raises(UsageError, match="is a file"):
        checkpoint_root(str(tmp_path / "f"), tmp_path)


@pytest.mark.parametrize(("uri", "package", "coordinate"), [
    ("s3a://bucket/trades/", "hadoop-aws", "org.apache.hadoop:hadoop-aws:"),
    ("gs://bucket/trades", "gcs-connector", "com.google.cloud.bigdataoss:gcs-connector:"),
    ("abfss://c@account.dfs.core.windows.net/trades", "hadoop-azure", "org.apache.hadoop:hadoop-azure:"),
])
def test_a_scheme_without_its_connector_names_the_package(spark, uri: str, package: str, coordinate: str) -> None:
    with pytest.raises(UsageError) as caught:
        open_folder(spark, uri, "input of stream Trades")
    said = str(caught.value)
    assert said.startswith("input of stream Trades: no Hadoop file system for scheme")
    assert package in said and f"--packages {coordinate}" in said and "spark.jars.packages" in said


def test_unknown_scheme_missing_folder_and_namenode(spark, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no Hadoop file system for scheme 'nosuch'.*--packages"):
        open_folder(spark, "nosuch://x/y", "input")
    with pytest.raises(UsageError, match="does not exist"):
        open_folder(spark, f"file://{tmp_path}/none", "input")
    (tmp_path / "f.json").write_text("{}\n")
    with pytest.raises(UsageError, match="is not a directory"):
        open_folder(spark, f"file://{tmp_path}/f.json", "input")
    with pytest.raises(UsageError, match="names no namenode"):
        open_folder(spark, "hdfs:///trades", "input")


def test_folders_are_listed_and_read_through_hadoop(spark, tmp_path: Path) -> None:
    # The path a remote folder takes (Hadoop's listing and streams), here over the local file system.
    for name, text in (("b.csv", "symbol,quantity\nA,1\n"), ("a.json", "{}\n"), (".hidden", "x"), ("_SUCCESS", "")):
        (tmp_path / name).write_text(text)
    found = open_folder(spark, f"file://{tmp_path}", "input")
    assert found.local == tmp_path
    remote = Folder(f"file://{tmp_path}", None, found._fs, found._jvm)
    files = remote.files()
    assert [(f.name, f.length) for f in files] == [("a.json", 3), ("b.csv", 20)]
    assert [f.name for f in found.files()] == ["a.json", "b.csv"]
    assert remote.head(files[1], 6) == b"symbol"
    assert remote.head(files[1], 1000) == found.head(found.files()[1], 1000) == b"symbol,quantity\nA,1\n"


@pytest.mark.slow
def test_file_uris_end_to_end_with_a_checkpoint_apart(spark, tmp_path: Path) -> None:
    events = pd.DataFrame({
        "symbol": ["A", "B", "A", "B", "A", "C"],
        "quantity": [1, 20, 300, 4000, 50000, 7],
        "ts": [1_704_067_200_000 + i * 3_700_000 for i in range(6)],
    })
    trades = tmp_path / "in put" / "trades"  # a space, written out as Spark takes it
    trades.mkdir(parents=True)
    (trades / "a.csv").write_text(events.iloc[:3].to_csv(index=False))
    (trades / "b.csv").write_text(events.iloc[3:].to_csv(index=False))
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(APP)
    data, checkpoints = tmp_path / "data", tmp_path / "ckpt"
    uri = f"file://{trades}/"
    result = CliRunner().invoke(cli, ["run", str(app_file), "--input", f"Trades={uri}", "--data-dir", str(data),
                                      "--checkpoint-dir", checkpoints.as_uri()])
    assert result.exit_code == 0, result.output
    assert not (data / "checkpoints").exists()
    assert any(checkpoints.glob("Totals-*/spark/commits/0"))
    app = tf.load_app(APP)
    got = tf.query(app, 'from Totals within 0L, 4102444800000L per "days" select symbol, total, trades',
                   data_dir=data).sort_values("symbol").reset_index(drop=True)
    want = events.groupby("symbol", as_index=False).agg(total=("quantity", "sum"), trades=("quantity", "size"))
    assert got["symbol"].tolist() == want["symbol"].tolist()
    assert got["total"].tolist() == want["total"].tolist()
    assert got["trades"].tolist() == want["trades"].tolist()
    # A second run over the same checkpoint reads nothing again.
    again = tf.run(app, {"Trades": uri}, data_dir=data, spark=spark, checkpoint_dir=checkpoints.as_uri())
    assert again.aggregations["Totals"].events_read == 0


def test_cli_refuses_schemes_without_connector_for_inputs_and_checkpoints(spark, tmp_path: Path) -> None:
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(APP)
    runner = CliRunner()
    result = runner.invoke(cli, ["run", str(app_file), "--input", "Trades=s3a://bucket/trades/",
                                 "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 2, result.output
    assert "hadoop-aws" in result.output and "--packages" in result.output
    result = runner.invoke(cli, ["run", str(app_file), "--input", f"Trades={tmp_path}", "--data-dir",
                                 str(tmp_path / "data"), "--checkpoint-dir", "s3a://bucket/ckpt"])
    assert result.exit_code == 2, result.output
    assert "checkpoint directory: no Hadoop file system for scheme 's3a'" in result.output
    assert "hadoop-aws" in result.output and "--packages" in result.output


def _totals(data: Path) -> pd.DataFrame:
    got = tf.query(tf.load_app(APP), 'from Totals within 0L, 4102444800000L per "days" select symbol, total, trades',
                   data_dir=data)
    return got.sort_values("symbol").reset_index(drop=True)[["symbol", "total", "trades"]]


def _oracle(events: pd.DataFrame) -> pd.DataFrame:
    return events.groupby("symbol", as_index=False).agg(total=("quantity", "sum"), trades=("quantity", "size"))


@pytest.mark.slow
def test_checkpoints_on_a_hadoop_file_system(spark, tmp_path: Path, mounted: MountedDir) -> None:
    """Every checkpoint file (Spark's logs, the pipeline id, the store note, the record of files read) goes
    through Hadoop's FileSystem API: a run resumes from it, finds each batch's files in Spark's logs there,
    reports a file that grew, and a rebuild drops it."""
    events = pd.DataFrame({
        "symbol": ["A", "B", "A", "B", "A", "C", "C", "A"],
        "quantity": [1, 20, 300, 4000, 50000, 7, 80, 900],
        "ts": [1_704_067_200_000 + i * 3_700_000 for i in range(8)],
    })
    trades = tmp_path / "trades"
    trades.mkdir()
    for i, part in enumerate((events.iloc[:2], events.iloc[2:5], events.iloc[5:6])):
        (trades / f"{i}.csv").write_text(part.to_csv(index=False))
    app, data = tf.load_app(APP), tmp_path / "data"
    run = tf.run(app, {"Trades": trades}, data_dir=data, spark=spark, checkpoint_dir=mounted.uri,
                 max_files_per_trigger=1)
    assert run.aggregations["Totals"].batches == 3
    pd.testing.assert_frame_equal(_totals(data), _oracle(events.iloc[:6]), check_dtype=False)
    assert not (data / "checkpoints").exists()
    [folder] = [p.name for p in mounted.local.iterdir()]
    assert folder.startswith("Totals-")
    held = {p.name for p in (mounted.local / folder).iterdir()}
    assert {"spark", "files", "tiltframe-pipeline.json", "tiltframe-store.json"} <= held, held
    spark_log = HadoopPath(mounted.uri) / folder / "spark"
    read = [batch_files(spark_log, b) for b in range(3)]  # one file a batch, in Spark's order
    assert sorted(f for files in read for f in files) == [f"file:{trades / f'{b}.csv'}" for b in range(3)], read

    (trades / "3.csv").write_text(events.iloc[6:].to_csv(index=False))
    with (trades / "0.csv").open("a") as grown:  # delivered again, longer: reported, never read twice
        grown.write("Z,1,1704067200000\n")
    again = tf.run(app, {"Trades": trades}, data_dir=data, spark=spark, checkpoint_dir=mounted.uri)
    assert again.aggregations["Totals"].events_read == 2
    pd.testing.assert_frame_equal(_totals(data), _oracle(events), check_dtype=False)
    changed = tf.changed_files(app, data_dir=data, checkpoint_dir=mounted.uri)["Totals"]
    first = len(events.iloc[:2].to_csv(index=False))
    assert [(c.path, c.size_read) for c in changed] == [(f"file:{trades / '0.csv'}", first)]
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(APP)
    shown = CliRunner().invoke(cli, ["inspect", str(app_file), "-d", str(data), "--checkpoint-dir", mounted.uri,
                                     "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert [c["size_read"] for c in json.loads(shown.output)[0]["files_changed"]] == [first]

    rebuilt = tf.run(app, {"Trades": trades}, data_dir=data, spark=spark, checkpoint_dir=mounted.uri, rebuild=True)
    assert rebuilt.aggregations["Totals"].events_read == len(events) + 1
    with_z = pd.concat([events, pd.DataFrame({"symbol": ["Z"], "quantity": [1], "ts": [1_704_067_200_000]})])
    pd.testing.assert_frame_equal(_totals(data), _oracle(with_z), check_dtype=False)


@pytest.mark.slow
def test_a_continuous_query_keeps_its_state_on_a_hadoop_file_system(spark, tmp_path: Path,
                                                                      mounted: MountedDir) -> None:
    """The window state, which executors write, goes under the checkpoint root; the session's own state
    store setting is left as it was (the query alone runs on RocksDB)."""
    from tiltframe.engine.continuous.query import STATE_STORE_PROVIDER
    from tiltframe.engine.sinks import CallbackSink

    app = tf.load_app("""
@eventTime('ts') define stream m (device string, v double, ts long);
@info(name='per5')
SELECT device, count(*) AS n, window_end FROM tumble(m, 5s) GROUP BY device, window_end;
""")
    events = pd.DataFrame({"device": ["a", "b", "a", "a", "b", "a"], "v": [1.0] * 6,
                           "ts": [1_000, 2_000, 3_000, 6_000, 7_000, 21_000]})
    inbox = tmp_path / "m"
    inbox.mkdir()
    (inbox / "m.csv").write_text(events.to_csv(index=False))
    rows: list[pd.DataFrame] = []
    assert spark.conf.get(STATE_STORE_PROVIDER, None) is None
    tf.run(app, {"m": inbox}, data_dir=tmp_path / "data", spark=spark, checkpoint_dir=mounted.uri,
           outputs={"per5": CallbackSink(lambda _s, df: rows.append(df))})
    assert spark.conf.get(STATE_STORE_PROVIDER, None) is None
    got = pd.concat(rows)[["device", "n", "window_end"]].sort_values(["window_end", "device"])
    want = (events.assign(window_end=events["ts"] // 5_000 * 5_000 + 5_000)
            .groupby(["device", "window_end"], as_index=False).agg(n=("v", "size")))
    want = want[want["window_end"] <= events["ts"].max()]  # the watermark closed these; the last stays open
    assert got.to_dict("records") == want.sort_values(["window_end", "device"]).to_dict("records")
    [state] = [p for p in mounted.local.iterdir() if p.name.startswith("continuous-per5")]
    assert (state / "state").is_dir() and (state / "offsets").is_dir()


def test_relative_paths_are_this_processs_after_it_changed_directory(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark resolves a relative path against the JVM's working directory, which stays where the process
    started; tiltframe gives Spark absolute paths, so a run after ``os.chdir`` (a notebook's ``%cd``) reads
    its inputs and keeps its checkpoints and store where Python's relative paths say, and a second run
    continues from them."""
    import os

    jvm_dir = Path(os.getcwd())
    before = set(jvm_dir.iterdir())
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    events = pd.DataFrame({"symbol": ["A", "B", "A"], "quantity": [1, 2, 3], "ts": [1_000, 2_000, 3_000]})
    events.to_csv(tmp_path / "in" / "a.csv", index=False)
    app = tf.load_app(APP)
    first = tf.run(app, {"Trades": "in"}, data_dir="data", spark=spark)
    (tmp_path / "in" / "b.csv").write_text("symbol,quantity,ts\nB,5,4000\n")
    second = tf.run(app, {"Trades": "in"}, data_dir="data", spark=spark)
    assert first.aggregations["Totals"].events_read == 3  # nothing read twice:
    assert second.aggregations["Totals"].events_read == 1
    got = tf.query(app, 'from Totals within 0L, 10000L per "days" select symbol, total', data_dir="data")
    assert dict(zip(got["symbol"], got["total"], strict=True)) == {"A": 4, "B": 7}
    assert (tmp_path / "data" / "checkpoints").is_dir()
    assert set(jvm_dir.iterdir()) == before, "the run wrote into the JVM's working directory"
