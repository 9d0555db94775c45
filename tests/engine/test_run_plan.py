"""A run's plan (``engine.run_plan``): the inputs bound to their streams and the checks that need neither
Spark nor a store done first, so a wrong input or checkpoint directory changes nothing on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiltframe import api
from tiltframe.engine import run_plan
from tiltframe.engine.inputs.sources import FileInput
from tiltframe.engine.run_options import RunOptions
from tiltframe.engine.run_plan import bind_inputs, plan_run
from tiltframe.errors import UsageError

APP = """define stream S (symbol string, price double, ts long);
from S[price > 0] select symbol, price, ts insert into T;
define aggregation A from T select symbol, sum(price) as total group by symbol aggregate by ts every sec...min;
"""


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> None:
        raise AssertionError("Spark started")

    monkeypatch.setattr(run_plan, "get_session", refuse)


def test_a_folder_is_a_file_input_with_the_options_bounds() -> None:
    app = api.load_app(APP)
    given = FileInput("/there", "csv")
    bound = bind_inputs(app, {"S": Path("/data/s")}, RunOptions(max_files_per_trigger=3, max_bytes_per_trigger=0))
    assert bound == {"S": FileInput("/data/s", max_files_per_trigger=3, max_bytes_per_trigger=0)}
    assert bind_inputs(app, {"S": given}, RunOptions(max_files_per_trigger=3))["S"] is given


def test_a_stream_the_app_does_not_define_is_refused() -> None:
    with pytest.raises(UsageError, match=r"^--input names stream\(s\) X, Y not defined in the app \(streams: S, T\)$"):
        bind_inputs(api.load_app(APP), {"X": "/x", "S": "/s", "Y": "/y"}, RunOptions())


def test_a_stream_a_query_writes_is_refused_with_its_input_stream() -> None:
    said = r"^--input T: stream T is written by a stream query \(line 2\); give the input to stream S, whose"
    with pytest.raises(UsageError, match=said):
        bind_inputs(api.load_app(APP), {"T": "/t"}, RunOptions())


def test_a_wrong_input_fails_before_spark_and_leaves_no_data_directory(tmp_path: Path, no_spark: None) -> None:
    with pytest.raises(UsageError, match="not defined in the app"):
        plan_run(api.load_app(APP), {"X": str(tmp_path)}, RunOptions(data_dir=tmp_path / "data"))
    assert not (tmp_path / "data").exists()


def test_a_checkpoint_directory_that_is_a_file_fails_before_spark(tmp_path: Path, no_spark: None) -> None:
    (tmp_path / "cp").write_text("")
    options = RunOptions(data_dir=tmp_path / "data", checkpoint_dir=tmp_path / "cp")
    with pytest.raises(UsageError, match="is a file, not a directory"):
        plan_run(api.load_app(APP), {"S": str(tmp_path)}, options)
    assert not (tmp_path / "data").exists()
