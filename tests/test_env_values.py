"""Numbers, sizes and switches read from TILTFRAME_* variables: their values as written, their defaults when
unset or blank, and a usage error naming the variable for anything else; the variables that use them, down to
the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.oracle import open_pipeline
from tiltframe.engine.inputs.sources import MAX_BYTES_ENV, FileInput
from tiltframe.engine.rollup.staged_writes import STAGED_WRITES_ENV
from tiltframe.engine.spark.session import tiltframe_defaults
from tiltframe.env_values import env_choice, env_int, env_memory, env_seconds, env_switch
from tiltframe.errors import UsageError
from tiltframe.store.retries import RETRY_SECONDS_ENV, retry_seconds

VAR = "TILTFRAME_TEST_NUMBER"


@pytest.mark.parametrize(("text", "want"), [(None, 7), ("", 7), ("  ", 7), ("0", 0), (" 12 ", 12), ("+3", 3)])
def test_a_whole_number_or_the_default(monkeypatch, text: str | None, want: int) -> None:
    if text is None:
        monkeypatch.delenv(VAR, raising=False)
    else:
        monkeypatch.setenv(VAR, text)
    assert env_int(VAR, 7, expected="a count") == want


@pytest.mark.parametrize("text", ["many", "1.5", "1e3", "64MB", "-1", "0x10"])
def test_anything_else_is_a_usage_error_naming_the_variable_and_its_value(monkeypatch, text: str) -> None:
    monkeypatch.setenv(VAR, text)
    with pytest.raises(UsageError, match=f"^{VAR}='{text}': expected a count$"):
        env_int(VAR, 7, expected="a count")


def test_a_lower_bound(monkeypatch) -> None:
    monkeypatch.setenv(VAR, "0")
    with pytest.raises(UsageError, match=f"{VAR}='0': expected one or more"):
        env_int(VAR, 7, least=1, expected="one or more")


@pytest.mark.parametrize(("text", "want"), [(None, 120.0), ("0", 0.0), ("2.5", 2.5), (" 30 ", 30.0)])
def test_seconds(monkeypatch, text: str | None, want: float) -> None:
    if text is None:
        monkeypatch.delenv(VAR, raising=False)
    else:
        monkeypatch.setenv(VAR, text)
    assert env_seconds(VAR, 120.0) == want


@pytest.mark.parametrize("text", ["soon", "-1", "nan", "inf", "1m"])
def test_seconds_refused(monkeypatch, text: str) -> None:
    monkeypatch.setenv(VAR, text)
    with pytest.raises(UsageError, match=f"{VAR}='{text}': expected a number of seconds"):
        env_seconds(VAR, 120.0)


@pytest.mark.parametrize("text", ["4g", "512m", "2048", "1G", "64kb", "1T"])
def test_memory_sizes_spark_takes(monkeypatch, text: str) -> None:
    monkeypatch.setenv(VAR, text)
    assert env_memory(VAR, "4g") == text


@pytest.mark.parametrize("text", ["lots", "1.5g", "4 g", "4gib", "-1g"])
def test_memory_sizes_spark_refuses(monkeypatch, text: str) -> None:
    monkeypatch.setenv(VAR, text)
    with pytest.raises(UsageError, match=f"{VAR}='{text}': expected a memory size"):
        env_memory(VAR, "4g")


@pytest.mark.parametrize(("text", "want"), [(None, True), ("", True), ("0", False), ("off", False), ("No", False),
                                          ("FALSE", False), ("1", True), ("on", True), (" yes ", True), ("True", True)])
def test_switches(monkeypatch, text: str | None, want: bool) -> None:
    if text is None:
        monkeypatch.delenv(VAR, raising=False)
    else:
        monkeypatch.setenv(VAR, text)
    assert env_switch(VAR, True) is want


@pytest.mark.parametrize("text", ["flase", "2", "disabled", "of"])
def test_a_misspelt_switch_is_not_taken_for_its_default(monkeypatch, text: str) -> None:
    monkeypatch.setenv(VAR, text)
    with pytest.raises(UsageError, match=f"{VAR}='{text}': expected on or off"):
        env_switch(VAR, True)


def test_choices(monkeypatch) -> None:
    levels = ("INFO", "WARN")
    monkeypatch.delenv(VAR, raising=False)
    assert env_choice(VAR, None, levels) is None
    monkeypatch.setenv(VAR, " warn ")
    assert env_choice(VAR, None, levels) == "WARN"
    monkeypatch.setenv(VAR, "WARNN")
    with pytest.raises(UsageError, match=f"{VAR}='WARNN': expected one of INFO, WARN$"):
        env_choice(VAR, None, levels)


def test_a_misspelt_staging_switch_stops_the_pipeline_before_its_first_batch(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(STAGED_WRITES_ENV, "flase")
    with pytest.raises(UsageError, match=f"{STAGED_WRITES_ENV}='flase': expected on or off"):
        open_pipeline(tmp_path, "p")
    monkeypatch.setenv(STAGED_WRITES_ENV, "off")
    _, stores, pipeline = open_pipeline(tmp_path, "p")
    assert pipeline._staging is False
    stores.close()


def test_the_variables_that_take_them(monkeypatch) -> None:
    monkeypatch.setenv("TILTFRAME_SHUFFLE_PARTITIONS", "6")
    monkeypatch.setenv("TILTFRAME_DRIVER_MEMORY", "2g")
    conf = tiltframe_defaults("local[2]")
    assert (conf["spark.sql.shuffle.partitions"], conf["spark.driver.memory"]) == ("6", "2g")
    monkeypatch.setenv("TILTFRAME_SHUFFLE_PARTITIONS", "none")
    with pytest.raises(UsageError, match="TILTFRAME_SHUFFLE_PARTITIONS='none'"):
        tiltframe_defaults("local[2]")

    monkeypatch.setenv(MAX_BYTES_ENV, "1000")
    assert FileInput("in", "csv").batch_bound() == ("maxBytesPerTrigger", 1000)
    monkeypatch.setenv(MAX_BYTES_ENV, "0")
    assert FileInput("in", "csv").batch_bound() is None
    monkeypatch.setenv(MAX_BYTES_ENV, "64MB")
    with pytest.raises(UsageError, match=f"{MAX_BYTES_ENV}='64MB': expected a number of bytes"):
        FileInput("in", "csv").batch_bound()
    assert FileInput("in", "csv", max_bytes_per_trigger=10).batch_bound() == ("maxBytesPerTrigger", 10)

    monkeypatch.setenv(RETRY_SECONDS_ENV, "5")
    assert retry_seconds() == 5.0
    monkeypatch.setenv(RETRY_SECONDS_ENV, "soon")
    with pytest.raises(UsageError, match=f"{RETRY_SECONDS_ENV}='soon'"):
        retry_seconds()


@pytest.mark.parametrize(("variable", "value", "said"), [
    ("TILTFRAME_DRIVER_MEMORY", "lots", "expected a memory size"),
    ("TILTFRAME_SPARK_LOG_LEVEL", "WARNN", "expected one of ALL, TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF"),
])
def test_the_command_line_says_which_variable_is_wrong_before_starting_spark(
    tmp_path: Path, variable: str, value: str, said: str
) -> None:
    app = tmp_path / "app.siddhi"
    app.write_text("define stream S (k string, v long, ts long);\n"
                   "define aggregation A from S select k, sum(v) as total group by k aggregate by ts every sec;\n")
    (tmp_path / "in").mkdir()
    env = {**os.environ, variable: value}
    done = subprocess.run([sys.executable, "-m", "tiltframe", "run", str(app), "-i", f"S={tmp_path / 'in'}",
                           "-d", str(tmp_path / "data")], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"{variable}='{value}': {said}" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "data" / "logs" / "spark.log").exists()
