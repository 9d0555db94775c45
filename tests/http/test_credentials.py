"""The server's answers and log lines never show a store URL's secret, for each credential form and each
mistake of the URL (an app built in Python reaches the server without ``validate``'s check, so every
refusal of the URL is the server's to answer)."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

import tiltframe as tf
from tests.http.served import serving
from tests.store.credential_urls import FORMS, MISTAKES, store_url
from tiltframe.model.aggregations import StoreSpec

SECRET = "Zq7-sEcr3t.v4lue"
APP = """define stream S (symbol string, price double, ts long);
define aggregation A from S select symbol, sum(price) as total group by symbol aggregate by ts every sec ... min;
"""
QUERY = 'from A within "2024-01-** **:**:**" per "minutes" select AGG_TIMESTAMP, symbol, total'


@pytest.mark.parametrize("mistake", MISTAKES)
@pytest.mark.parametrize("form", FORMS)
def test_no_answer_shows_the_secret(form: str, mistake: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("TILTFRAME_STORE_RETRY_SECONDS", "0")
    monkeypatch.setenv("DB_SECRET", SECRET)
    app = tf.load_app(APP)
    agg = dataclasses.replace(app.aggregations[0], store=StoreSpec("rdbms", store_url(form, mistake, "${DB_SECRET}")))
    app = dataclasses.replace(app, aggregations=(agg,))
    import pandas as pd

    caplog.set_level(logging.DEBUG)
    with serving(app, tmp_path / "data", pd.DataFrame(), 0) as s, s.client() as c:
        answers = [c.post("/api/query", json={"query": QUERY}), c.get("/api/aggregations"),
                   c.get("/api/aggregations/A"), c.get("/api/aggregations/A/series"), c.get("/api/rejected/A"),
                   c.get("/api/status"), c.get("/metrics")]
    for answer in answers:
        assert SECRET not in answer.text, (answer.request.url, answer.text)
    errors = [a for a in answers if a.status_code >= 400]
    assert errors and all(a.status_code in (400, 503) for a in errors), [(a.status_code, a.text) for a in answers]
    assert any("***" in a.text or "127.0.0.1:1" in a.text for a in errors)
    assert SECRET not in caplog.text
