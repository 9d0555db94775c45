"""The page in a real browser (Playwright driving the machine's Chromium, headless): it loads, draws the
oracle's points for the chosen aggregation, measure and granularity, asks for a token when one is needed,
and shows a file a running pipeline has just processed after its next refresh.

``TILTFRAME_SCREENSHOT=docs/images/page.png`` keeps the screenshot the README shows."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import tiltframe as tf
from tests.http.served import APP, DAY, SYMBOLS, T0, build, oracle, serving, trades, write_csv
from tests.retrieval import empty_sketches
from tiltframe.http.status import PipelineStatus

pytestmark = pytest.mark.slow


def drawn(page: Any, timeout: float = 30_000) -> dict[str, Any]:
    page.wait_for_function("['ready', 'error'].includes(document.body.dataset.state)", timeout=timeout)
    assert page.evaluate("document.body.dataset.state") == "ready", page.inner_text("#error")
    return page.evaluate("window.tiltframe.series")


def lines(series: dict[str, Any]) -> dict[str, list[list[Any]]]:
    return {line["label"]: line["points"] for line in series["series"]}


def test_the_page_draws_the_oracle(spark: object, tmp_path: Path, page: Any) -> None:
    app, events = build(spark, tmp_path, None, n=2000, bad=2)
    want = oracle(events)
    with serving(app, tmp_path / "data", events, 2) as s:
        page.goto(s.url + "/")
        drawn(page)
        page.select_option("#measure", "total")
        page.select_option("#per", "days")
        page.wait_for_function("window.tiltframe.series && window.tiltframe.series.measure === 'total' "
                               "&& window.tiltframe.series.per === 'days'")
        series = drawn(page)
        got = lines(series)
        assert sorted(got) == sorted(SYMBOLS)
        for symbol, rows in want.groupby("symbol"):
            assert got[symbol] == [[int(t), int(v)] for t, v in zip(rows["AGG_TIMESTAMP"], rows["total"], strict=True)]
        assert page.locator("#chart canvas").count() >= 1
        assert page.locator("#table [data-ts]").count() == want["AGG_TIMESTAMP"].nunique()
        assert "2" in page.inner_text("#status") and page.locator("#rejected tr").count() >= 3  # header + 2 rows
        assert "n/a0" in page.inner_text("#rejected")

        page.fill('#keys [data-key="symbol"]', "IBM")
        page.click("#draw")
        page.wait_for_function("window.tiltframe.series.series.length === 1")
        (ibm,) = drawn(page)["series"]
        rows = want[want["symbol"] == "IBM"]
        assert ibm["points"] == [[int(t), int(v)] for t, v in zip(rows["AGG_TIMESTAMP"], rows["total"], strict=True)]
        page.fill('#keys [data-key="symbol"]', "")
        page.click("#draw")
        page.wait_for_function("window.tiltframe.series.series.length === 3")
        page.wait_for_timeout(500)  # let the chart settle for the picture
        shot = os.environ.get("TILTFRAME_SCREENSHOT")
        page.screenshot(path=shot or str(tmp_path / "page.png"), full_page=True)


def test_a_token_is_asked_for_and_kept(spark: object, tmp_path: Path, page: Any) -> None:
    app, events = build(spark, tmp_path, None, n=100, bad=0)
    with serving(app, tmp_path / "data", events, 0, token="t0k3n") as s:
        page.goto(s.url + "/")
        page.wait_for_function("document.body.dataset.state === 'error'")
        assert "token" in page.inner_text("#error").lower()
        page.goto(s.url + "/#token=t0k3n")
        page.reload()
        assert lines(drawn(page))


def test_a_file_a_running_pipeline_processes_shows_after_a_refresh(spark: object, tmp_path: Path, page: Any) -> None:
    app = tf.load_app(APP)
    inbox = tmp_path / "in"
    inbox.mkdir()
    first = trades(300, seed=1, days=5)
    write_csv(first, inbox / "day 1-5.csv")
    status = PipelineStatus(["TradeAggregation"])
    handle = tf.start(app, {"TradeStream": inbox}, data_dir=tmp_path / "data", spark=spark, follow=True,
                      on_batch=status.on_batch)
    try:
        with serving(app, tmp_path / "data", first, 0, status=status) as s:
            page.goto(s.url + "/")
            page.wait_for_function("window.tiltframe.series && window.tiltframe.series.series.length === 3",
                                   timeout=120_000)
            page.select_option("#measure", "trades")
            page.select_option("#per", "days")
            page.wait_for_function("window.tiltframe.series.measure === 'trades' "
                                   "&& window.tiltframe.series.per === 'days'")
            assert "running" in page.inner_text("#status").lower()
            later = trades(200, seed=2, days=2, start=T0 + 10 * DAY)
            write_csv(later, inbox / "day 11-12.csv")
            new_day = T0 + 10 * DAY
            page.wait_for_function(
                f"window.tiltframe.series.series.some(l => l.points.some(p => p[0] === {new_day}))", timeout=120_000)
            page.wait_for_function(  # the refresh after the batch committed in full
                f"window.tiltframe.series.series.reduce((n, l) => n + l.points.filter(p => p[0] >= {new_day})"
                f".reduce((m, p) => m + p[1], 0), 0) === {len(later)}", timeout=60_000)
            want = oracle(pd.concat([first, later], ignore_index=True))
            got = lines(drawn(page))
            for symbol, rows in want.groupby("symbol"):
                assert got[symbol] == [[int(t), int(v)] for t, v in zip(rows["AGG_TIMESTAMP"], rows["trades"],
                                                                       strict=True)]
    finally:
        handle.stop()
        handle.close()


def test_the_chart_draws_a_sketch_with_buckets_without_values(spark: object, tmp_path: Path, page: Any) -> None:
    """Quantiles of buckets without a value (NULL states and the empty sketches earlier runs stored) are
    gaps in the chart, not an error: the page draws the other buckets."""
    app, data, _ = empty_sketches.build(spark, tmp_path)
    with serving(app, data, pd.DataFrame(), 0) as s:
        page.goto(s.url + "/")
        drawn(page)
        page.select_option("#measure", "q_p50")
        page.select_option("#per", "days")
        page.wait_for_function("window.tiltframe.series && window.tiltframe.series.measure === 'q_p50' "
                               "&& window.tiltframe.series.per === 'days'")
        got = lines(drawn(page))
        assert sorted(got) == ["a", "b", "c"]
        assert got["b"] == [[empty_sketches.DAY1, None]] and got["a"][1] == [empty_sketches.DAY2, None]
        assert got["a"][0][1] in (1.5, 2.5) and got["c"][0][1] in (4.0, 6.0)
        assert page.locator("#chart canvas").count() >= 1
        assert page.locator("#table [data-ts]").count() == 2
