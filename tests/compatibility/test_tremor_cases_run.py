"""Tremor's own cases (tests/compatibility/tremor, transcribed as data) replayed through tiltframe's trickle
queries as written: every output, in order, equal to Tremor's expected one, integers and floats told apart
as Tremor's harness does; and the unit cases of its aggregate functions."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.compatibility.test_tremor_cases_parse import CASES, OUTSIDE_THE_SUBSET
from tiltframe.aggregates.trickle_stats import STATES
from tiltframe.engine.replay_inputs import Event, read_replay_file
from tiltframe.engine.trickle.graph_replay import QueryGraph, replay
from tiltframe.functions.trickle_values import TrickleRuntimeError
from tiltframe.lang.trickle.trickle_parser import parse_trickle


def typed(value: Any) -> Any:
    """A value with the type of each number kept, so that ``1`` and ``1.0`` differ as in Tremor's harness."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return (type(value).__name__, value)
    if isinstance(value, list):
        return [typed(v) for v in value]
    return {k: typed(v) for k, v in value.items()}


def expected(case: Path) -> list[dict[str, Any]]:
    lines = (case / "out.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _runnable(kind: str) -> list[str]:
    names = (f"{kind}/{c.name}" for c in sorted((CASES / kind).iterdir()))
    return [name for name in names if name not in OUTSIDE_THE_SUBSET]


@pytest.mark.parametrize("case", _runnable("queries"))
def test_tremor_query_cases_give_tremors_outputs(case: str) -> None:
    query = parse_trickle((CASES / case / "query.trickle").read_text(encoding="utf-8"))
    outputs = list(replay(query, read_replay_file(CASES / case / "in.jsonl")))
    assert [o.error for o in outputs if o.error] == []
    assert [typed(o.event) for o in outputs] == [typed(e["event"]) for e in expected(CASES / case)]
    assert [o.stream for o in outputs] == [e["stream"] for e in expected(CASES / case)]


@pytest.mark.parametrize("case", _runnable("select_unit"))
def test_tremor_select_tests_with_ticks_emit_after_the_same_input(case: str) -> None:
    """Each output comes after the input (event or tick) Tremor's test expects it after."""
    graph = QueryGraph(parse_trickle((CASES / case / "query.trickle").read_text(encoding="utf-8")))
    got = [(i, typed(o.event)) for i, item in enumerate(read_replay_file(CASES / case / "in.jsonl"))
           for o in graph.push(item)]
    assert got == [(e["after_input"], typed(e["event"])) for e in expected(CASES / case)]


@pytest.mark.parametrize("case", _runnable("query_runtime_errors"))
def test_an_input_a_query_cannot_take_comes_out_on_err_and_the_rest_goes_on(case: str) -> None:
    """Tremor's outputs, and one error output for the input that fails (with the input and the reason)."""
    query = parse_trickle((CASES / case / "query.trickle").read_text(encoding="utf-8"))
    inputs = list(read_replay_file(CASES / case / "in.jsonl"))
    outputs = list(replay(query, inputs))
    errors = [o for o in outputs if o.error]
    assert [typed(o.event) for o in outputs if not o.error] == [typed(e["event"]) for e in expected(CASES / case)]
    assert len(errors) == 1 and errors[0].stream == "err"
    assert errors[0].event in [i.value for i in inputs if isinstance(i, Event)]
    assert errors[0].error


# --- aggregate functions (tremor-script's unit tests) -------------------------------------------------------

FUNCTION_CASES = [c for c in json.loads((CASES / "functions" / "stats.json").read_text(encoding="utf-8"))
                  if c["function"] in STATES]
#: Cases whose Tremor test asserts something else than a state's value (see each note in stats.json).
NOT_A_VALUE = {"sum_continued", "min_source_after_merge", "max_source_after_merge"}


@pytest.mark.parametrize("case", FUNCTION_CASES, ids=[c["name"] for c in FUNCTION_CASES])
def test_tremor_aggregate_function_cases(case: dict[str, Any]) -> None:
    cls = STATES[case["function"]]
    if case.get("expected_error") == "bad percentile":
        with pytest.raises(TrickleRuntimeError, match="the percentile 'snot' is not a number"):
            cls(*case["args"])
        return
    states = []
    for values in case["inputs"]:
        state = cls(*case["args"])
        for value in values:
            if "expected_error" in case:
                with pytest.raises(TrickleRuntimeError, match="takes numbers"):
                    state.add(value)
                return
            state.add(value)
        states.append(state)
    receiver = states[0]
    if case["merge"]:
        for later in states[1:]:
            receiver.merge(later)
    got, want = receiver.value(), case["expected"]
    if case["name"] in NOT_A_VALUE:
        return
    if case["compare"] in ("exact", "elementwise_as_u64"):
        assert typed(got) == typed(want)
    else:
        assert isinstance(got, float) and math.isclose(got, want, rel_tol=1e-12), (got, want)


def test_min_merges_into_an_empty_window_on_purpose_unlike_tremor() -> None:
    """Tremor's min keeps an empty state empty on merge (its tilt frames then emit 0.0): tiltframe takes the
    merged value (tests/compatibility/README.md)."""
    finer, coarser = STATES["aggr::stats::min"](), STATES["aggr::stats::min"]()
    for v in (3, 1, 2):
        finer.add(v)
    coarser.merge(finer)
    assert coarser.value() == 1.0


def test_variance_merges_exactly_whatever_the_first_values() -> None:
    """Chan's merge: the variance of two merged windows is that of all their values (Tremor's is exact only
    when both began with the same value)."""
    a, b = STATES["aggr::stats::var"](), STATES["aggr::stats::var"]()
    for v in (1, 2, 3):
        a.add(v)
    for v in (10, 20):
        b.add(v)
    a.merge(b)
    values = [1, 2, 3, 10, 20]
    mean = sum(values) / 5
    assert math.isclose(a.value(), sum((v - mean) ** 2 for v in values) / 4, rel_tol=1e-12)
