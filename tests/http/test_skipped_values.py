"""The values each measure skipped (price or quantity missing: empty, or NaN), in ``GET /api/status`` and in
the page's pipeline panel (Playwright), over a store a real run built on SQLite, PostgreSQL and MariaDB:
equal to pandas over the raw events, and "not counted" for the batch a store made before the count holds."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import tiltframe as tf
from tests.bad_input.harness import store_url
from tests.http.served import SYMBOLS, T0, Served, serving
from tests.servers import STORES, app_with_store
from tiltframe.store.open_stores import StoreRegistry
from tiltframe.store.schema import SKIPPED_VALUES

pytestmark = pytest.mark.slow

APP = """\
define stream TradeStream (symbol string, price double, quantity long, timestamp long);

define aggregation TradeAggregation
from TradeStream
select symbol, avg(price) as avgPrice, sum(quantity) as total, max(price * quantity) as biggest, count() as trades
group by symbol
aggregate by timestamp every sec ... day;
"""


def trades(n: int, seed: int) -> pd.DataFrame:
    """Trades over two days whose price is now and then empty or NaN, and quantity empty."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "symbol": rng.choice(SYMBOLS, n), "price": np.round(rng.uniform(5, 500, n), 2),
        "price_as": np.where(rng.random(n) < 0.1, rng.choice(["", "NaN"], n), "value"),
        "quantity": rng.integers(1, 1000, n), "quantity_as": np.where(rng.random(n) < 0.07, "", "value"),
        "ts": T0 + rng.integers(0, 2 * 86_400_000, n)})


def write_csv(df: pd.DataFrame, path: Path) -> None:
    lines = ["symbol,price,quantity,timestamp"]
    for r in df.itertuples(index=False):
        price = r.price if r.price_as == "value" else r.price_as
        quantity = r.quantity if r.quantity_as == "value" else ""
        lines.append(f"{r.symbol},{price},{quantity},{r.ts}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def oracle(df: pd.DataFrame) -> dict[str, int]:
    price, quantity = df["price_as"] != "value", df["quantity_as"] != "value"
    return {"avgPrice": int(price.sum()), "total": int(quantity.sum()), "biggest": int((price | quantity).sum())}


@dataclass
class Counted:
    served: Served
    want: dict[str, int]
    events: int


@pytest.fixture(scope="module", params=STORES)
def counted(request: pytest.FixtureRequest, spark: object,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Counted]:
    """A first batch committed as by a version that did not count (the table dropped), then two counted."""
    tmp = tmp_path_factory.mktemp(f"skipped-{request.param}")
    inbox, data = tmp / "in", tmp / "data"
    inbox.mkdir()
    parts = [trades(200, seed) for seed in (11, 12, 13)]
    with store_url(request.param) as url:
        text, _ = app_with_store(APP, url)
        app = tf.load_app(text)
        write_csv(parts[0], inbox / "0.csv")
        tf.run(app, {"TradeStream": inbox}, data_dir=data, spark=spark)
        stores = StoreRegistry(data)
        try:
            with stores.for_aggregation(app.aggregation("TradeAggregation"))._engine.begin() as conn:  # type: ignore[attr-defined]
                conn.exec_driver_sql(f"DROP TABLE {conn.dialect.identifier_preparer.quote(SKIPPED_VALUES)}")
        finally:
            stores.close()
        for i in (1, 2):
            write_csv(parts[i], inbox / f"{i}.csv")
        result = tf.run(app, {"TradeStream": inbox}, data_dir=data, spark=spark, max_files_per_trigger=1)
        assert result.aggregations["TradeAggregation"].batches == 2
        later = pd.concat(parts[1:], ignore_index=True)
        with serving(app, data, later, 0) as s:
            yield Counted(s, oracle(later), len(later))


def test_the_status_has_each_measures_skipped_values(counted: Counted) -> None:
    with counted.served.client() as c:
        status = c.get("/api/status").json()
    agg = status["aggregations"]["TradeAggregation"]
    assert agg["batches"] == 3
    assert {v["measure"]: (v["skipped"], v["events"], v["batches_counted"], v["batches_not_counted"])
            for v in agg["values_skipped"]} == {m: (n, counted.events, 2, 1) for m, n in counted.want.items()}


def test_the_page_shows_each_measures_skipped_values(counted: Counted, page: Any) -> None:
    page.goto(counted.served.url + "/")
    page.wait_for_selector("#skipped-table tbody tr")
    rows = page.evaluate("""[...document.querySelectorAll('#skipped-table tbody tr')].map(tr =>
        [tr.dataset.aggregation, tr.dataset.measure, ...[...tr.cells].slice(2).map(td => td.textContent)])""")
    n = counted.events
    share = {m: f"{math.floor(1000 * k / n + 0.5) / 10:.1f}%" for m, k in counted.want.items()}  # JS's Math.round
    assert rows == [["TradeAggregation", m, f"{k:,}", f"{n:,}", share[m], "1"] for m, k in counted.want.items()]
