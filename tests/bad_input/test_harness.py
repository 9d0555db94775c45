"""The harness itself: clean input keeps the invariant on every store, and the totals match an oracle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bad_input.harness import run

APP = """
define stream S (k string, v double, n long, ts long);
define aggregation A from S
select k, sum(v) as total, count() as events, sum(n) as units
group by k
aggregate by ts every sec ... day;
"""


@pytest.mark.slow
def test_clean_input_keeps_the_invariant_on_every_store(spark, tmp_path: Path, store: str | None) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    events = [{"k": f"k{i % 3}", "v": i / 2, "n": i, "ts": 1_704_067_200_000 + 400 * i} for i in range(20)]
    (inbox / "a.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    out = run(spark, APP, {"S": inbox}, tmp_path / "data", store=store)
    assert out.totals["A"].events_aggregated == 20
    days = out.query('from A within "2024-01-** **:**:**" per "days" select k, total, events, units')
    got = {r.k: (r.total, r.events, r.units) for r in days.itertuples()}
    want = {k: (sum(e["v"] for e in events if e["k"] == k), sum(e["k"] == k for e in events),
                sum(e["n"] for e in events if e["k"] == k)) for k in ("k0", "k1", "k2")}
    assert got == want
