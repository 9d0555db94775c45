"""An input folder given under another name than its checkpoint read: moved (``mv landing landing2``), its
mount point renamed (a symlink changed), a relative path given from another directory.  Each run follows it
without reading a file twice or losing one, checked against pandas over every file's rows; a folder that
is not the one read (a file of a name read before holds other bytes) is refused, naming both folders, and
loses nothing.  Real runs, real files, real checkpoints (Spark's source log compacted too)."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pandas as pd
import pytest

import tiltframe as tf
from tests.bad_input.harness import T0, TOTALS_APP, Outcome, run
from tiltframe.engine.sinks import CallbackSink
from tiltframe.errors import UsageError

pytestmark = pytest.mark.slow

#: Names Hadoop and URIs spell apart: a space, '#', '%', non-ASCII.
NAMES = ["2024-01.csv", "2024-02 trades #2 %.csv", "été.csv", "2024-04.csv"]


def month(seed: int, n: int = 30) -> pd.DataFrame:
    rng = random.Random(seed)
    return pd.DataFrame({"k": [rng.choice("abc") for _ in range(n)], "v": [rng.randrange(0, 400) / 4 for _ in range(n)],
                         "ts": [T0 + rng.randrange(0, 86_400_000) for _ in range(n)]})


def export(folder: Path, name: str, df: pd.DataFrame) -> None:
    """As the user's export writes it: pandas' to_csv, no index."""
    df.to_csv(folder / name, index=False)


def oracle(folders: list[Path]) -> dict[str, tuple[float, int]]:
    """Per key, the sum and count of every row of every file of ``folders`` (each file once)."""
    df = pd.concat([pd.read_csv(f) for folder in folders for f in sorted(folder.glob("*.csv"))])
    got = df.groupby("k").agg(total=("v", "sum"), events=("v", "size"))
    return {k: (float(r.total), int(r.events)) for k, r in got.iterrows()}


def totals(outcome: Outcome) -> dict[str, tuple[float, int]]:
    got = outcome.query('from A within "2024-01-05", "2024-01-06" per "days" select k, total, events')
    return {r.k: (float(r.total), int(r.events)) for r in got.itertuples()}


def test_a_moved_folder_is_followed(spark, tmp_path: Path) -> None:
    """Five files read a file a batch (Spark's source log compacted every second batch), the folder moved
    and a file added: the next run reads that file alone; a third run reads nothing."""
    landing = tmp_path / "landing"
    landing.mkdir()
    for i in range(5):
        export(landing, NAMES[i % 3].replace(".csv", f"-{i}.csv"), month(i))
    data = tmp_path / "data"
    compact = "spark.sql.streaming.fileSource.log.compactInterval"
    spark.conf.set(compact, "2")
    try:
        first = run(spark, TOTALS_APP, {"S": landing}, data, max_files_per_trigger=1)
    finally:
        spark.conf.unset(compact)
    assert first.totals["A"].events_read == 5 * 30
    checkpoint = next((data / "checkpoints").iterdir())
    assert any(p.name.endswith(".compact") for p in (checkpoint / "spark" / "sources" / "0").iterdir())

    moved = tmp_path / "landing2"
    landing.rename(moved)
    export(moved, NAMES[3], month(99, 17))
    second = run(spark, TOTALS_APP, {"S": moved}, data)
    assert second.totals["A"].events_read == 17
    assert totals(second) == oracle([moved])
    third = run(spark, TOTALS_APP, {"S": moved}, data)
    assert third.totals["A"].events_read == 0
    assert json.loads((checkpoint / "input.json").read_text())["folder"] == str(moved)


def test_a_renamed_mount_point_is_followed(spark, tmp_path: Path) -> None:
    """The folder reached through a symlink (a mount point) that is renamed: the same files under a path
    that did not exist before; then the link pointed at a copy of the disk (``cp -r``: new modification
    times), the path unchanged."""
    disk = tmp_path / "disk1"
    (disk / "landing").mkdir(parents=True)
    for i, name in enumerate(NAMES[:3]):
        export(disk / "landing", name, month(10 + i))
    (tmp_path / "mnt-a").symlink_to(disk)
    data = tmp_path / "data"
    run(spark, TOTALS_APP, {"S": tmp_path / "mnt-a" / "landing"}, data, max_files_per_trigger=2)

    (tmp_path / "mnt-a").unlink()
    (tmp_path / "mnt-b").symlink_to(disk)
    export(disk / "landing", NAMES[3], month(20, 11))
    out = run(spark, TOTALS_APP, {"S": tmp_path / "mnt-b" / "landing"}, data)
    assert out.totals["A"].events_read == 11
    assert totals(out) == oracle([disk / "landing"])

    copy = tmp_path / "disk2"
    shutil.copytree(disk, copy, copy_function=shutil.copy)
    (tmp_path / "mnt-b").unlink()
    (tmp_path / "mnt-b").symlink_to(copy)
    export(copy / "landing", "2024-05.csv", month(21, 5))
    out = run(spark, TOTALS_APP, {"S": tmp_path / "mnt-b" / "landing"}, data)
    assert out.totals["A"].events_read == 5
    assert totals(out) == oracle([copy / "landing"])


def test_a_relative_path_from_another_directory_is_followed(spark, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """First given through a symlinked directory, then as a relative path from the directory it leads to
    (another spelling of the same folder), then from a directory beside it (``../real/landing``); and an
    older checkpoint without the marker of its folder, which is found from Spark's log."""
    real = tmp_path / "real"
    (real / "landing").mkdir(parents=True)
    export(real / "landing", NAMES[0], month(30))
    (tmp_path / "link").symlink_to(real)
    data = tmp_path / "data"
    run(spark, TOTALS_APP, {"S": tmp_path / "link" / "landing"}, data)
    checkpoint = next((data / "checkpoints").iterdir())
    (checkpoint / "input.json").unlink()  # as a checkpoint written before the marker existed

    monkeypatch.chdir(real)
    export(real / "landing", NAMES[1], month(31, 9))
    out = run(spark, TOTALS_APP, {"S": Path("landing")}, data)
    assert out.totals["A"].events_read == 9
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    export(real / "landing", NAMES[2], month(32, 4))
    out = run(spark, TOTALS_APP, {"S": Path("../real/landing")}, data)
    assert out.totals["A"].events_read == 4
    assert totals(out) == oracle([real / "landing"])


def test_another_folder_of_the_same_names_is_refused(spark, tmp_path: Path) -> None:
    """A folder whose file of a name read before holds other bytes is not the folder read: refused in one
    line naming both folders and the ways on, nothing read; the folder read goes on as before."""
    jan = tmp_path / "january"
    jan.mkdir()
    export(jan, "day01.csv", month(40))
    data = tmp_path / "data"
    run(spark, TOTALS_APP, {"S": jan}, data)
    feb = tmp_path / "february"
    feb.mkdir()
    export(feb, "day01.csv", month(41, 31))
    with pytest.raises(UsageError) as err:
        run(spark, TOTALS_APP, {"S": feb}, data)
    said = str(err.value)
    assert "\n" not in said
    for part in (str(jan), str(feb), "day01.csv", f"--input S={jan}", "--rebuild", "--data-dir"):
        assert part in said, part
    export(jan, "day02.csv", month(42, 6))
    out = run(spark, TOTALS_APP, {"S": jan}, data)
    assert out.totals["A"].events_read == 6
    assert totals(out) == oracle([jan])


def test_following_keeps_a_grown_file_said(spark, tmp_path: Path) -> None:
    """The same folder under another name, one of its files appended to since it was read: followed (it
    is the same folder), and the growth is said as in the folder's own name, not read."""
    real = tmp_path / "real"
    real.mkdir()
    export(real, "a.csv", month(50))
    data = tmp_path / "data"
    run(spark, TOTALS_APP, {"S": real}, data)
    (tmp_path / "alias").symlink_to(real)
    with (real / "a.csv").open("a") as fh:
        fh.write(f"z,1.0,{T0}\n")
    from tiltframe import api

    result = api.run(api.load_app(TOTALS_APP), {"S": tmp_path / "alias"}, data_dir=data, spark=spark)
    assert result.aggregations["A"].events_read == 0
    assert [os.path.basename(c.path) for c in result.files_changed["A"]] == ["a.csv"]


CONTINUOUS = """
@eventTime('ts')
define stream S (k string, v double, ts long);

@info(name='q')
SELECT window_start, k, count() AS n, sum(v) AS total FROM tumble(S, 1s) GROUP BY k EMIT AFTER WINDOW CLOSE;
"""


def test_a_continuous_query_follows_its_folder_through_a_link_and_refuses_another(spark, tmp_path: Path) -> None:
    """Spark knows a continuous query's files by their paths alone: the same folder through a symlink is
    followed (each file counted once, against pandas), another folder refused in one line naming both; a
    run over a moved folder read every file of it again before."""
    landing = tmp_path / "landing"
    landing.mkdir()
    first = pd.DataFrame({"k": ["a", "a", "b"], "v": [1.0, 2.0, 4.0], "ts": [T0 + 100, T0 + 1500, T0 + 1700]})
    export(landing, "1.csv", first)
    rows: list[dict] = []
    app = tf.load_app(CONTINUOUS)

    def start(folder: Path) -> None:
        tf.run(app, {"S": str(folder)}, data_dir=tmp_path / "data", spark=spark,
               outputs={"q": CallbackSink(lambda name, df: rows.extend(df.to_dict("records")))})

    start(landing)
    link = tmp_path / "mount"
    link.symlink_to(landing, target_is_directory=True)
    second = pd.DataFrame({"k": ["a", "b"], "v": [8.0, 16.0], "ts": [T0 + 1900, T0 + 5000]})
    export(landing, "2.csv", second)
    start(link)
    events = pd.concat([first, second])
    closed = events[events["ts"] < T0 + 5000]  # the watermark closes every window before the last event's
    want = closed.assign(w=closed["ts"] // 1000 * 1000).groupby(["w", "k"]).agg(n=("v", "size"), total=("v", "sum"))
    got = {(r["window_start"], r["k"]): (r["n"], r["total"]) for r in rows}
    assert got == {(int(w), k): (int(r.n), float(r.total)) for (w, k), r in want.iterrows()}

    moved = tmp_path / "landing2"
    shutil.copytree(landing, moved)
    with pytest.raises(UsageError) as refused:
        start(moved)
    said = str(refused.value)
    assert str(landing) in said and str(moved) in said and "--checkpoint-dir" in said
    assert len(rows) == len(got)  # nothing read of the other folder
