"""Tremor's query cases (tests/compatibility/tremor) run on Spark (``tf.start_trickle``) instead of replayed:
every output of each stream, in order, equal to Tremor's expected one.  The cases whose outputs do not
depend on ingest times are taken (a Spark run's ingest time is a file's modification time, in microseconds,
where the cases count nanoseconds): all their events go in one file, in order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tiltframe as tf
from tests.compatibility.test_tremor_cases_parse import CASES
from tests.compatibility.test_tremor_cases_run import _runnable, expected, typed
from tiltframe.engine.replay_inputs import Event, read_replay_file
from tiltframe.lang.trickle.trickle_parser import parse_trickle

pytestmark = pytest.mark.slow


def _on_event_times(case: str) -> bool:
    """Whether the case's outputs depend on its events alone: no interval window on ingest time, no
    ``system::ingest_ns``, no timer tick."""
    text = (CASES / case / "query.trickle").read_text(encoding="utf-8")
    query = parse_trickle(text)
    inputs = list(read_replay_file(CASES / case / "in.jsonl"))
    return ("system::ingest_ns" not in text and all(isinstance(i, Event) for i in inputs)
            and all(w.interval_ns is None or w.script is not None for w in query.windows))


SPARK_CASES = [c for c in _runnable("queries") if _on_event_times(c)]


@pytest.mark.parametrize("case", SPARK_CASES)
def test_tremor_query_cases_on_spark_give_tremors_outputs(spark, tmp_path: Path, case: str) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    events = [i.value for i in read_replay_file(CASES / case / "in.jsonl") if isinstance(i, Event)]
    (inbox / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    got: dict[str, list[object]] = {}
    run = tf.start_trickle(tf.load_trickle((CASES / case / "query.trickle").read_text(encoding="utf-8")), inbox,
                           data_dir=tmp_path / "data", spark=spark,
                           on_output=lambda stream, lines: got.setdefault(stream, []).extend(map(json.loads, lines)))
    assert run.wait().errors == 0
    want: dict[str, list[object]] = {}
    for e in expected(CASES / case):
        want.setdefault(e["stream"], []).append(e["event"])
    assert {s: typed(v) for s, v in got.items()} == {s: typed(v) for s, v in want.items()}
