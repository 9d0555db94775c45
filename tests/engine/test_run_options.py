"""A run's options (``engine.run_options``): the checks both doors (``tf.start``, ``tiltframe run``) share,
said as they always were, before anything else of the run is done."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiltframe.engine.rollup.shards import Deployment
from tiltframe.engine.run_options import RunOptions
from tiltframe.errors import UsageError


def test_the_defaults_are_those_of_tf_start() -> None:
    options = RunOptions()
    assert options.data_dir is None and options.checkpoint_dir is None
    assert not options.follow and not options.rebuild and options.on_batch is None
    assert options.on_bad_file == "skip" and options.deployment == Deployment()
    assert options.max_files_per_trigger is None and options.max_bytes_per_trigger is None
    assert options.trigger_seconds == 1.0 and options.trigger_ms == 1000
    assert dict(options.outputs) == {}


def test_the_data_directory_is_a_path_and_an_empty_one_the_default() -> None:
    assert RunOptions(data_dir="d").data_dir == Path("d")  # type: ignore[arg-type]
    assert RunOptions(data_dir="").data_dir is None  # type: ignore[arg-type]


@pytest.mark.parametrize(("seconds", "ms"), [(1.0, 1000), (7.5, 7500), (0.0001, 1), (0.2, 200)])
def test_the_trigger_interval_in_milliseconds_is_at_least_one(seconds: float, ms: int) -> None:
    assert RunOptions(trigger_seconds=seconds).trigger_ms == ms


@pytest.mark.parametrize("seconds", [0, -1.5, float("nan")])
def test_a_trigger_interval_of_no_time_is_refused(seconds: float) -> None:
    with pytest.raises(UsageError, match=f"^trigger_seconds must be more than 0, not {seconds}$"):
        RunOptions(trigger_seconds=seconds)


def test_an_unknown_bad_file_policy_is_refused_with_the_closest_one() -> None:
    with pytest.raises(UsageError) as caught:
        RunOptions(on_bad_file="fial")
    assert str(caught.value).startswith("on_bad_file: unknown policy 'fial'")
    assert "'fail'" in str(caught.value)
    assert RunOptions(on_bad_file="fail").on_bad_file == "fail"


@pytest.mark.parametrize("name", ["max_files_per_trigger", "max_bytes_per_trigger"])
def test_a_negative_batch_bound_is_refused(name: str) -> None:
    with pytest.raises(UsageError, match=f"^{name} must be 0 or more, not -1$"):
        RunOptions(**{name: -1})  # type: ignore[arg-type]
    assert getattr(RunOptions(**{name: 0}), name) == 0  # type: ignore[arg-type]  # 0: as documented


def test_the_outputs_are_a_copy_the_caller_cannot_change() -> None:
    given: dict = {"Out": object()}
    options = RunOptions(outputs=given)
    given["Other"] = object()
    assert list(options.outputs) == ["Out"]
    with pytest.raises(TypeError):
        options.outputs["More"] = object()  # type: ignore[index]


def test_the_options_are_frozen() -> None:
    with pytest.raises(AttributeError):
        RunOptions().follow = True  # type: ignore[misc]
