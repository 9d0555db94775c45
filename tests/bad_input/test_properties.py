"""Bad-input catalogue, properties: results do not depend on file order, file names, formats or the
micro-batch cut, NaN and nulls included (issue 19).

Hypothesis generates events as real sources write them (keys differing only in case or a trailing space,
unicode, commas, quotes and newlines; doubles of any size, NaN and nulls; longs; event times around
calendar edges in every accepted form, in any order) and cuts them into 1-6 files of one format (CSV with
or without a header per file, JSON Lines, Parquet) with odd names and modification times, read over one or
two runs with a random ``max_files_per_trigger``.  The stored results, queried per second up to per year,
must equal a pandas oracle over the events as generated, and every event must be aggregated or rejected
with its field (``events read = aggregated + moved + rejected``).

Each example runs real Spark streaming queries, so the examples are few; ``TILTFRAME_PROPERTY_EXAMPLES``
raises their number to hunt for bugs (``TILTFRAME_PROPERTY_EXAMPLES=60 pytest -m slow ...``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.bad_input.generated import (
    APP,
    INSTANTS,
    MAX_MS,
    MEASURES,
    MIN_MS,
    UNITS,
    WITHIN,
    Event,
    Plan,
    arrival_order,
    event_lists,
    oracle,
    plans,
    write_file,
    written_time,
)
from tests.bad_input.harness import Outcome, run, store_url
from tests.servers import SERVERS, STORES
from tiltframe.engine.rollup.reports import PipelineTotals
from tiltframe.model.durations import Unit

pytestmark = pytest.mark.slow

STRING_TIME_APP = APP.format(ts_type="string")
EXAMPLES = int(os.environ.get("TILTFRAME_PROPERTY_EXAMPLES", "12"))
#: Shrinking a failure takes hundreds of Spark runs (many minutes): off unless asked for
#: (``TILTFRAME_PROPERTY_SHRINK=1``); a failure shows its plan and the blob for ``@reproduce_failure``.
SHRINK = os.environ.get("TILTFRAME_PROPERTY_SHRINK", "") not in ("", "0")
#: The stores an example may run on: the embedded one, and the test servers that are running.
AVAILABLE_STORES = [s for s in STORES if s == "sqlite" or os.environ.get(SERVERS[s])]
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, print_blob=True,
                    phases=[p for p in Phase if SHRINK or p not in (Phase.shrink, Phase.explain)],
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


@dataclass
class Executed:
    """What the runs of one plan left: the last run's outcome (to query) and the totals of all runs."""

    outcome: Outcome
    totals: PipelineTotals


@contextmanager
def executed(spark: object, root: Path, plan: Plan, annotation: str = "") -> Iterator[Executed]:
    """Write ``plan``'s files round by round, running the app (its aggregation with ``annotation``) after
    each round, on a fresh store (dropped on leaving)."""
    app = plan.app.replace("define aggregation", f"{annotation}\ndefine aggregation", 1)
    folder = root / uuid.uuid4().hex
    inbox = folder / "in"
    inbox.mkdir(parents=True)
    with store_url(plan.store) as url:
        total = PipelineTotals()
        outcome = None
        for files in plan.rounds:
            for f in files:
                write_file(inbox, f, plan.fmt)
            outcome = run(spark, app, {"S": inbox}, folder / "data", store=url,
                          max_files_per_trigger=plan.max_files_per_trigger)
            for report in outcome.totals["A"].reports:
                total.add(report)
        assert outcome is not None
        yield Executed(outcome, total)


def check_counts(done: Executed, evs: Sequence[Event], late: Sequence[int] = ()) -> None:
    """Every event read once, aggregated or rejected: invalid ones with the field the oracle expects, those
    at the times ``late`` as too late; no file refused."""
    bad = [e.bad for e in evs if e.bad is not None]
    t = done.totals
    recorded = done.outcome.recorded("A")
    shown = recorded[["kind", "field", "value", "reason"]].to_dict("records")
    assert (t.events_read, t.events_aggregated, t.events_moved, t.events_rejected, t.files_rejected) == (
        len(evs), len(evs) - len(bad) - len(late), 0, len(bad) + len(late), 0), shown
    invalid = recorded[recorded["kind"] == "invalid"]
    assert Counter(invalid["field"]) == Counter(bad), shown
    too_late = recorded[recorded["kind"] == "too_late"]
    assert sorted(too_late["event_timestamp"]) == sorted(late), shown
    assert len(invalid) + len(too_late) == len(recorded), shown
    if not late:  # the values each measure skipped: those of the events aggregated that are null or NaN
        kept = [e for e in evs if e.bad is None]
        missing = {"v": sum(e.v is None for e in kept), "n": sum(e.n is None for e in kept)}
        reads = {"vsum": "v", "vavg": "v", "vmin": "v", "vmax": "v", "nsum": "n", "nmax": "n"}
        want = {m: missing[a] for m, a in reads.items()}
        assert t.values_skipped == want
        info = done.outcome.info("A")
        assert {v.measure: (v.skipped, v.events) for v in info.values_skipped} == {
            m: (n, len(kept)) for m, n in want.items()}


def _plain(x: object) -> object:
    """A stored result as a plain Python value: None for a missing one."""
    if x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x)):
        return None
    return x.item() if hasattr(x, "item") else x


def stored(outcome: Outcome, unit: str, within: str = WITHIN) -> dict[tuple[str, int], dict[str, object]]:
    got = outcome.query(f'from A within {within} per "{unit}" select AGG_TIMESTAMP, k, {", ".join(MEASURES)}')
    return {(r["k"], int(r["AGG_TIMESTAMP"])): {m: _plain(r[m]) for m in MEASURES} for r in got.to_dict("records")}


@dataclass(frozen=True)
class Within:
    """A ``within`` range ``[start, end)`` in epoch ms, and its bounds as a query writes them."""

    start: int
    end: int
    text: str


def _bound(written: object) -> str:
    return str(written) if isinstance(written, int) else f'"{written}"'


@st.composite
def within_ranges(draw: st.DrawFn) -> Within:
    """A range between two instants near calendar edges, its bounds in any accepted form (docs/time.md)."""
    start, end = sorted(draw(st.lists(INSTANTS.filter(lambda ms: MIN_MS <= ms <= MAX_MS), min_size=2, max_size=2,
                                      unique=True)))
    return Within(start, end, f"{_bound(draw(written_time(start)))}, {_bound(draw(written_time(end)))}")


def check_results(outcome: Outcome, evs: Sequence[Event], within: Within | None = None) -> None:
    """Per second, minute, hour, day, month and year: the stored results equal the oracle's, over every
    bucket and over the buckets that start ``within``.  Sums and means of doubles depend on the order of
    addition, so they are compared within the rounding of the sum of the magnitudes; everything else
    exactly."""
    for unit in UNITS:
        want, got = oracle(evs, unit), stored(outcome, unit)
        assert sorted(got) == sorted(want), unit
        if within is not None:
            inside = stored(outcome, unit, within.text)
            assert sorted(inside) == sorted(c for c in want if within.start <= c[1] < within.end), (unit, within)
            assert all(inside[c] == got[c] for c in inside), (unit, within)
        for cell, row in want.items():
            have = got[cell]
            scale = row["_vabs"]
            for m in ("events", "vmin", "vmax", "nsum", "nmax"):
                assert have[m] == row[m], (unit, cell, m)
            for m, size in (("vsum", scale), ("vavg", scale / row["events"])):
                if row[m] is None:
                    assert have[m] is None, (unit, cell, m)
                else:
                    assert have[m] == pytest.approx(row[m], rel=1e-12, abs=1e-9 * size + 1e-300), (unit, cell, m)


# --- property 1: the stored results equal the oracle -----------------------------------------------------------


@PROPERTY
@given(data=st.data(), evs=event_lists(40), within=within_ranges())
def test_stored_results_equal_the_oracle(
    spark, tmp_path: Path, data: st.DataObject, evs: list[Event], within: Within
) -> None:
    plan = data.draw(plans(evs, AVAILABLE_STORES), label="plan")
    with executed(spark, tmp_path, plan) as done:
        check_counts(done, evs)
        check_results(done.outcome, evs, within)


# --- property 2: two cuts of the same events store the same rows -----------------------------------------------

#: Doubles whose sums are exact in any order (quarters well inside 2^53), so rows compare exactly.
EXACT = st.integers(-(2**40), 2**40).map(lambda i: i / 4)


def stored_rows(outcome: Outcome) -> dict[str, pd.DataFrame]:
    """Every level's stored partial rows, in key order."""
    out = {}
    for unit in (Unit.SECONDS, Unit.MINUTES, Unit.HOURS, Unit.DAYS, Unit.MONTHS, Unit.YEARS):
        rows = outcome.rows("A", unit)
        out[unit.name] = rows.sort_values(["AGG_TIMESTAMP", "k"], kind="stable").reset_index(drop=True)
    return out


@PROPERTY
@given(data=st.data(), evs=event_lists(30, EXACT))
def test_two_cuts_of_the_same_events_store_the_same_rows(
    spark, tmp_path: Path, data: st.DataObject, evs: list[Event]
) -> None:
    first = data.draw(plans(evs, AVAILABLE_STORES), label="first cut")
    second = data.draw(plans(evs, AVAILABLE_STORES), label="second cut")
    with executed(spark, tmp_path, first) as one, executed(spark, tmp_path, second) as two:
        check_counts(one, evs)
        check_counts(two, evs)
        rows_one, rows_two = stored_rows(one.outcome), stored_rows(two.outcome)
        for level, rows in rows_one.items():
            pd.testing.assert_frame_equal(rows, rows_two[level], check_dtype=False, obj=level)


# --- property 3: late events follow the files' arrival order, however they are cut into batches ------------------


def too_late(plan: Plan, allowed_ms: int) -> list[Event]:
    """The oracle of ``@allowedLateness``: in arrival order, the valid events more than ``allowed_ms``
    behind the greatest valid event time so far (docs/late-events.md)."""
    latest, late = None, []
    for e in arrival_order(plan):
        if e.bad is None:
            latest = e.ms if latest is None else max(latest, e.ms)
            if e.ms < latest - allowed_ms:
                late.append(e)
    return late


@PROPERTY
@given(data=st.data(), evs=event_lists(30), allowed=st.sampled_from([1, 1000, 3_600_000, 86_400_000]))
def test_late_events_follow_the_arrival_of_files(
    spark, tmp_path: Path, data: st.DataObject, evs: list[Event], allowed: int
) -> None:
    """Files arrive by run, then modification time (distinct here: Spark alone picks among equal ones when
    a batch takes only some), then path; their rows in file order.  Whatever ``max_files_per_trigger``
    cuts, and whether its batches are small (ordered in one window) or not (their files ranked apart),
    ``@allowedLateness`` rejects exactly the events the oracle finds too late in that order."""
    plan = data.draw(plans(evs, AVAILABLE_STORES, distinct_mtimes=True), label="plan")
    late = too_late(plan, allowed)
    with pytest.MonkeyPatch.context() as env:
        if not data.draw(st.booleans(), label="small batches"):  # else every batch ranks its files apart
            env.setenv("TILTFRAME_SMALL_BATCH_BYTES", "0")
        with executed(spark, tmp_path, plan, f"@allowedLateness('{allowed} ms')") as done:
            check_counts(done, evs, [e.ms for e in late])  # type: ignore[misc]
            kept = [e for e in evs if all(e is not x for x in late)]
            check_results(done.outcome, kept)


# --- defects the properties found, each kept as a plain case ----------------------------------------------------


def _run_one(spark, root: Path, files: dict[str, str | bytes], store: str | None = None) -> Outcome:
    inbox = root / "in"
    inbox.mkdir()
    for name, content in files.items():
        (inbox / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return run(spark, STRING_TIME_APP, {"S": inbox}, root / "data", store=store)


def _per_key(outcome: Outcome) -> dict[str, int]:
    got = outcome.query('from A within "2024-01-05", "2024-01-06" per "days" select k, events')
    return dict(zip(got["k"], got["events"], strict=True))


def _csv_rows(keys: Sequence[str], line_end: str = "\n", time: str = "2024-01-05 10:00:00") -> str:
    """Rows as Python's csv module (like pandas, Excel and RFC 4180) writes them: a quote doubled inside a
    quoted field, a backslash an ordinary character."""
    out = io.StringIO()
    csv.writer(out, lineterminator=line_end).writerows([k, 1.0, 1, time] for k in keys)
    return out.getvalue()


def test_csv_fields_with_quotes_or_backslashes_are_read_as_written(spark, tmp_path: Path) -> None:
    keys = ['q"x', "a,a\\\\", 'c,\\"d']
    out = _run_one(spark, tmp_path, {"a.csv": _csv_rows(keys)})
    assert _per_key(out) == dict.fromkeys(keys, 1)


def test_csv_carriage_returns_in_quoted_fields_are_kept(spark, tmp_path: Path) -> None:
    files = {"a.csv": _csv_rows(["IB\r\nM", "x"]), "b.csv": _csv_rows(["a\rb"]),
             "c.csv": _csv_rows(["y", "c\r\nd"]), "d.csv": _csv_rows(["IB\r\nM"], "\r\n"),
             "e.csv": _csv_rows(["IB\nM", "z"], "\r\n", " 2024-01-05 10:00:00 ")}
    out = _run_one(spark, tmp_path, files)
    assert (out.totals["A"].events_read, out.totals["A"].events_rejected) == (8, 0)
    assert _per_key(out) == {"IB\r\nM": 2, "x": 1, "a\rb": 1, "y": 1, "c\r\nd": 1, "IB\nM": 1, "z": 1}


def test_a_csv_file_holding_only_a_byte_order_mark_has_no_events(spark, tmp_path: Path) -> None:
    out = _run_one(spark, tmp_path, {"empty.csv": "\ufeff", "a.csv": _csv_rows(["x"])})
    assert (out.totals["A"].events_read, out.totals["A"].events_rejected) == (1, 0)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_name_with_a_colon_and_a_pattern_character_is_read(spark, tmp_path: Path, fmt: str) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    row = {"k": "x", "v": 1.0, "n": 1, "ts": "2024-01-05 10:00:00"}
    if fmt == "csv":
        (inbox / "a:b?.csv").write_text(_csv_rows(["x"]))
    else:
        pq.write_table(pa.Table.from_pylist([row]), inbox / "a:b[1].parquet")
    out = run(spark, STRING_TIME_APP, {"S": inbox}, tmp_path / "data")
    assert (out.totals["A"].events_read, out.totals["A"].files_rejected) == (1, 0)
    assert _per_key(out) == {"x": 1}


def test_long_results_stay_exact_beside_nulls(spark, tmp_path: Path) -> None:
    rows = [{"k": "x", "v": 1.0, "n": -72057594037927935, "ts": 0}, {"k": "y", "v": 1.0, "n": None, "ts": 0}]
    out = _run_one(spark, tmp_path, {"a.jsonl": "".join(json.dumps(r) + "\n" for r in rows)})
    assert out.rows("A").set_index("k")["nsum_SUM"]["x"] == -72057594037927935  # stored exactly
    got = out.query('from A within 0, 1000 per "seconds" select k, nsum, nmax').set_index("k")
    assert (got["nsum"]["x"], got["nmax"]["x"]) == (-72057594037927935, -72057594037927935)


@pytest.fixture
def mysql_store() -> Iterator[str | None]:
    with store_url("mysql") as url:
        yield url


def test_mysql_keeps_keys_apart(spark, tmp_path: Path, mysql_store: str | None) -> None:
    keys = ["IBM", "ibm", "IBM "]
    out = _run_one(spark, tmp_path, {"a.csv": _csv_rows(keys)}, mysql_store)
    assert _per_key(out) == dict.fromkeys(keys, 1)


def test_mysql_takes_a_long_key_or_rejects_its_event(spark, tmp_path: Path, mysql_store: str | None) -> None:
    keys = ["x" * 300, "short"]
    out = _run_one(spark, tmp_path, {"a.csv": _csv_rows(keys)}, mysql_store)
    stored_keys = _per_key(out)
    assert stored_keys["short"] == 1
    assert stored_keys.get("x" * 300) == 1 or list(out.recorded("A")["field"]) == ["k"]


def test_an_empty_last_field_of_a_crlf_row_is_missing(spark, tmp_path: Path) -> None:
    out = _run_one(spark, tmp_path, {"a.csv": "x,1.0,1,2024-01-05 10:00:00\r\ny,1.0,1,\r\n"})
    assert (out.totals["A"].events_aggregated, out.totals["A"].events_rejected) == (1, 1)
    recorded = out.recorded("A")[["field", "reason"]].to_dict("records")
    assert recorded == [{"field": "ts", "reason": "missing field 'ts'"}]
