"""Readers never write: ``query`` and ``inspect`` create, change and lock nothing in the data directory,
so they answer from a read-only one (a read-only bind mount: the tests run as root, for whom file
permissions are not enforced).  Expected answers are worked out by hand from the events below.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tiltframe as tf

ROOT = Path(__file__).resolve().parents[2]

APP = """\
define stream TradeStream (symbol string, price double, quantity long, timestamp long);

define aggregation TradeAggregation
from TradeStream
select symbol, sum(quantity) as total, count() as trades
group by symbol
aggregate by timestamp every sec ... day;
"""
EVENTS = [  # 2024-01-01 00:00:00 GMT = 1704067200000
    '{"symbol": "IBM", "price": 10.0, "quantity": 5, "timestamp": 1704067200000}',
    '{"symbol": "IBM", "price": 20.0, "quantity": 7, "timestamp": 1704070800000}',
    '{"symbol": "WSO2", "price": 3.5, "quantity": 2, "timestamp": 1704153600000}',
]
DAYS = 'from TradeAggregation within "2024-01-** **:**:**" per "days" select AGG_TIMESTAMP, symbol, total, trades'
EXPECTED = [
    {"AGG_TIMESTAMP": 1704067200000, "symbol": "IBM", "total": 12, "trades": 2},
    {"AGG_TIMESTAMP": 1704153600000, "symbol": "WSO2", "total": 2, "trades": 1},
]


@pytest.fixture
def workspace(spark: object, tmp_path: Path) -> tuple[Path, Path]:
    """An app file and the data directory a finished run left (the writer closed: no -wal, no -shm)."""
    app_file = tmp_path / "trades.siddhi"
    app_file.write_text(APP, encoding="utf-8")
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "trades.jsonl").write_text("\n".join(EVENTS) + "\n", encoding="utf-8")
    data = tmp_path / "data"
    tf.run(tf.load_app(app_file), {"TradeStream": inbox}, data_dir=data, spark=spark)
    return app_file, data


def _snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``directory`` with its size and modification time."""
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in [directory, *directory.rglob("*")]}


def _readers(app_file: Path, data: Path) -> list[list[str]]:
    return [["query", str(app_file), DAYS, "--format", "json", "--data-dir", str(data)],
            ["inspect", str(app_file), "--format", "json", "--data-dir", str(data)]]


def _check_answers(outputs: list[str]) -> None:
    assert json.loads(outputs[0]) == EXPECTED
    (info,) = json.loads(outputs[1])
    assert (info["events_read"], info["events_aggregated"], info["events_rejected"]) == (3, 3, 0)


@pytest.mark.slow
def test_readers_leave_the_data_directory_as_it_was(workspace: tuple[Path, Path]) -> None:
    app_file, data = workspace
    before = _snapshot(data)
    outputs = []
    for command in _readers(app_file, data):
        done = subprocess.run([sys.executable, "-m", "tiltframe", *command], cwd=ROOT, capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    _check_answers(outputs)
    assert _snapshot(data) == before  # no -wal, -shm, lock or log file appeared, nothing was touched


def _read_only_mount_works() -> bool:
    if shutil.which("unshare") is None or sys.platform != "linux":
        return False
    probe = subprocess.run(["unshare", "-rm", "mount", "--bind", "/tmp", "/tmp"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.slow
def test_readers_answer_from_a_read_only_data_directory(workspace: tuple[Path, Path]) -> None:
    if not _read_only_mount_works():
        pytest.skip("no user and mount namespaces here (unshare -rm) for a read-only bind mount")
    app_file, data = workspace
    outputs = []
    for command in _readers(app_file, data):
        # A private mount namespace: the data directory is mounted read-only on itself for this process only.
        script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && touch "$1/probe" 2>/dev/null && exit 9; ' \
                 'shift; exec "$@"'
        done = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", str(data), sys.executable, "-m",
                               "tiltframe", *command], cwd=ROOT, capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode != 9, "the bind mount was not read-only"
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    _check_answers(outputs)
