"""Every query of Tremor's own tests (tests/compatibility/tremor, transcribed as data) goes through the trickle
front end as written: those Tremor runs parse, unless they use a construct outside the subset, which is refused
by name (listed below with the reason); those Tremor refuses to compile are refused here too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiltframe.errors import DefinitionError, NotSupportedYet
from tiltframe.lang.trickle.trickle_parser import parse_trickle

CASES = Path(__file__).parent / "tremor"
#: Cases Tremor runs whose queries use a construct outside the subset (docs/trickle.md): the refusal names it.
OUTSIDE_THE_SUBSET = {
    "queries/patch": "define script is not supported",  # its patch runs inside a script
    "queries/window_state_by_two": "state (a script's or window's own state) is not supported",
    "queries/window_state_by_two_vec": "state (a script's or window's own state) is not supported",
    "query_runtime_errors/bad_state_window_return": "state (a script's or window's own state) is not supported",
    "query_runtime_errors/bad_vec_state_window_return": "state (a script's or window's own state) is not supported",
}


def _cases(*kinds: str) -> list[str]:
    return [f"{kind}/{case.name}" for kind in kinds for case in sorted((CASES / kind).iterdir())]


@pytest.mark.parametrize("case", _cases("queries", "select_unit", "query_runtime_errors"))
def test_queries_tremor_runs_parse_or_are_refused_by_name(case: str) -> None:
    text = (CASES / case / "query.trickle").read_text(encoding="utf-8")
    if case in OUTSIDE_THE_SUBSET:
        with pytest.raises(NotSupportedYet, match=OUTSIDE_THE_SUBSET[case].replace("(", r"\(").replace(")", r"\)")):
            parse_trickle(text)
        return
    query = parse_trickle(text)
    assert query.selects, "every case selects"


@pytest.mark.parametrize("case", _cases("query_errors"))
def test_queries_tremor_refuses_are_refused(case: str) -> None:
    """Tremor's message is its own; here the error must point into the text (a line and a column)."""
    text = (CASES / case / "query.trickle").read_text(encoding="utf-8")
    with pytest.raises(DefinitionError) as caught:
        parse_trickle(text)
    assert caught.value.line is not None and caught.value.column is not None, str(caught.value)
