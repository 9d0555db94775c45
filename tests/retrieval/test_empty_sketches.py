"""Buckets without a value for a sketch, stored as NULL (as runs store them now) or as empty sketch
binaries (as earlier runs did), read through every reader: ``tf.query`` and ``tiltframe query`` with and
without the sketch columns, the totals of a range, ``tiltframe verify``, the HTTP series and the ``_FINAL``
views.  Each answers NULL there (0 for the distinct count) and merges an empty sketch with values as if it
were not there (the store's merge of a later batch into it)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

import tiltframe as tf
from tests.http.served import serving
from tests.retrieval.empty_sketches import DAY1, DAY2, DAYS, EMPTY, HOUR, build, sketch_states
from tiltframe.cli.commands import app as cli

pytestmark = pytest.mark.slow
OUTPUTS = ("c", "q_p50", "d_p50", "h_p50", "u", "m")
SELECT = f"AGG_TIMESTAMP, k, {', '.join(OUTPUTS)}"


@pytest.fixture(scope="module")
def stored(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[tf.AppSpec, Path, Path]:
    return build(spark, tmp_path_factory.mktemp("empty_sketches"))


def plain(value: Any) -> Any:
    return None if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) else value


def assert_row(got: tuple[Any, ...], want: tuple[Any, ...], where: object) -> None:
    for name, g, w in zip(OUTPUTS, got, want, strict=True):
        g = plain(g)
        if w is None:
            assert g is None, (where, name, g)
        elif name == "d_p50":  # DDSketch: within its relative accuracy
            assert g == pytest.approx(w, rel=0.01), (where, name, g)
        elif isinstance(w, tuple):  # KLL: any value of the quantile's rank
            assert g in w, (where, name, g)
        else:
            assert g == w, (where, name, g)


def test_the_store_holds_the_empty_sketches_of_earlier_runs_and_no_new_one(stored) -> None:
    app, data, _ = stored
    states = sketch_states(data, app)
    assert states[("A_DAYS", DAY1, "b")] == EMPTY  # as written: read as NULL below
    assert all(v is not None and v not in EMPTY.values() for v in states[("A_DAYS", DAY1, "c")].values())
    assert states[("A_DAYS", DAY2, "a")] == dict.fromkeys(EMPTY)  # this run's bucket without a value: NULL


def test_queries_of_every_level_with_and_without_the_sketches(stored) -> None:
    app, data, _ = stored
    days = tf.query(app, f'from A within "2024-01-01", "2024-01-03" per "days" select {SELECT}', data_dir=data)
    got = {(int(r.AGG_TIMESTAMP), r.k): tuple(getattr(r, o) for o in OUTPUTS) for r in days.itertuples()}
    assert sorted(got) == sorted(DAYS)
    for key, want in DAYS.items():
        assert_row(got[key], want, key)
    counts = tf.query(app, 'from A within "2024-01-01", "2024-01-03" per "days" select k, c', data_dir=data)
    assert sorted(zip(counts["k"], counts["c"], strict=True)) == [("a", 1), ("a", 2), ("b", 2), ("c", 3)]
    hours = tf.query(app, f'from A within "2024-01-01" per "hours" select {SELECT}', data_dir=data)
    got = {(int(r.AGG_TIMESTAMP), r.k): tuple(getattr(r, o) for o in OUTPUTS) for r in hours.itertuples()}
    assert_row(got[(DAY1 + 11 * HOUR, "b")], (2, None, None, None, 0, None), "b at 11:00")
    assert_row(got[(DAY1 + 12 * HOUR, "c")], (2, 4.0, 4.0, 7.0, 1, 4.0), "c at 12:00: empty + 4.0")
    assert_row(got[(DAY1 + 13 * HOUR, "c")], (1, 6.0, 6.0, 9.0, 1, 6.0), "c at 13:00")


def test_the_totals_of_a_range(stored) -> None:
    app, data, _ = stored
    totals = tf.query(app, f'from A within "2024-01-01", "2024-01-03" select k, {", ".join(OUTPUTS)}', data_dir=data)
    got = {r.k: tuple(getattr(r, o) for o in OUTPUTS) for r in totals.itertuples()}
    assert_row(got["a"], (3, (1.5, 2.5), 1.5, 3.0, 2, 2.0), "a")
    assert_row(got["b"], (2, None, None, None, 0, None), "b")
    assert_row(got["c"], (3, (4.0, 6.0), 4.0, 7.0, 2, 5.0), "c")


def test_the_query_command_with_and_without_the_sketch_column(stored) -> None:
    _, data, _ = stored
    app_file = data.parent / "app.siddhi"
    for select in ("k, c", "k, c, q_p50, u"):
        result = CliRunner().invoke(cli, ["query", str(app_file), "-d", str(data), "--format", "json",
                                          f'from A within "2024-01-01" per "days" select {select}'])
        assert result.exit_code == 0, result.output
        rows = {r["k"]: r for r in json.loads(result.stdout)}
        assert rows["b"]["c"] == 2
        if "q_p50" in select:
            assert rows["b"]["q_p50"] is None and rows["b"]["u"] == 0
            assert rows["c"]["q_p50"] in (4.0, 6.0) and rows["c"]["u"] == 2


def test_verify_passes(stored) -> None:
    _, data, inbox = stored
    result = CliRunner().invoke(cli, ["verify", str(data.parent / "app.siddhi"), "-i", f"S={inbox}", "-d", str(data)])
    assert result.exit_code == 0, result.output
    assert "A: every stored level equals the recomputation" in result.output


def test_the_final_views_leave_the_sketches_out_and_read_the_rest(stored) -> None:
    _, data, _ = stored
    engine = sa.create_engine(f"sqlite:///{data / 'tiltframe.db'}")
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text('SELECT * FROM "A_DAYS_FINAL" ORDER BY AGG_TIMESTAMP, k')).mappings().all()
    finally:
        engine.dispose()
    assert [(r["k"], r["c"], r["m"]) for r in rows] == [("a", 2, 2.0), ("b", 2, None), ("c", 3, 5.0), ("a", 1, None)]
    assert not {"q_p50", "u"} & set(rows[0])


def test_the_http_series_of_a_sketch(stored) -> None:
    app, data, _ = stored
    with serving(app, data, pd.DataFrame(), 0) as s, s.client() as c:
        quantiles = c.get("/api/aggregations/A/series", params={"per": "days", "measure": "q_p50"})
        distinct = c.get("/api/aggregations/A/series", params={"per": "days", "measure": "u"})
        query = c.post("/api/query", json={"query": 'from A within "2024-01-01" per "days" select k, h_p50, d_p50'})
    assert quantiles.status_code == distinct.status_code == query.status_code == 200, quantiles.text
    lines = {line["label"]: line["points"] for line in quantiles.json()["series"]}
    assert {k: [t for t, _ in points] for k, points in lines.items()} == {"a": [DAY1, DAY2], "b": [DAY1], "c": [DAY1]}
    assert (lines["a"][0][1] in (1.5, 2.5), lines["a"][1][1], lines["b"][0][1], lines["c"][0][1] in (4.0, 6.0)) == (
        True, None, None, True)
    assert {line["label"]: line["points"] for line in distinct.json()["series"]} == {
        "a": [[DAY1, 2], [DAY2, 0]], "b": [[DAY1, 0]], "c": [[DAY1, 2]]}
    rows = {r["k"]: (r["h_p50"], r["d_p50"]) for r in query.json()["rows"]}
    assert rows["b"] == (None, None) and rows["c"][0] == 7.0
