"""A store URL's secret never shows, whatever else is wrong with the URL: ``validate``, ``inspect`` (with
``--debug``'s traceback and log lines) and ``run`` as real processes, for each credential form and each
mistake (a bad port, an unknown scheme, no database, text that is no URL, a server nobody listens on), the
secret read from the environment (``${DB_SECRET}``) as an app would keep it.  Neither stdout, stderr nor
any file the run leaves in the data directory (``logs/spark.log``, checkpoints) holds the secret."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.store.credential_urls import FORMS, MISTAKES, store_url

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SECRET = "Zq7-sEcr3t.v4lue"

APP = """define stream S (symbol string, price double, ts long);
@store(type='rdbms', jdbc.url='{url}')
define aggregation A from S select symbol, sum(price) as total group by symbol aggregate by ts every sec ... min;
"""


def _tiltframe(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DB_SECRET": SECRET, "TILTFRAME_STORE_RETRY_SECONDS": "0", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tiltframe", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False, env=env)


def _files_holding(folder: Path, secret: str) -> list[Path]:
    if not folder.exists():
        return []
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


#: Every form goes through one masking function (``tests/store/test_credentials.py`` checks each against each
#: mistake); the commands' own paths to a message are what these processes check, with a form of each kind.
CLI_FORMS = ("userinfo", "password", "access_token")
assert set(CLI_FORMS) <= set(FORMS)


@pytest.mark.parametrize("mistake", MISTAKES)
@pytest.mark.parametrize("form", CLI_FORMS)
def test_no_command_shows_the_secret(form: str, mistake: str, tmp_path: Path) -> None:
    app_file = tmp_path / "app.siddhi"
    app_file.write_text(APP.format(url=store_url(form, mistake, "${DB_SECRET}")), encoding="utf-8")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"symbol": "a", "price": 1.5, "ts": 1000}\n', encoding="utf-8")
    data = tmp_path / "data"
    commands = {
        "validate": ["validate", str(app_file), "-d", str(data)],
        "inspect": ["--debug", "inspect", str(app_file), "-d", str(data)],
        "run": ["run", str(app_file), "-i", f"S={tmp_path / 'in'}", "-d", str(data)],
    }
    for name, args in commands.items():
        done = _tiltframe(args)
        assert done.returncode != 0, (name, done.stdout, done.stderr)
        said = done.stdout + done.stderr
        assert SECRET not in said, (name, said)
        assert "error" in said and ("***" in said or "127.0.0.1:1" in said), (name, said)
    assert _files_holding(data, SECRET) == []
    if mistake == "unreachable":  # the run got as far as Spark: its log was written, and holds no secret
        assert (data / "logs" / "spark.log").exists()
