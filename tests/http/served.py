"""A store built by a real run over messy CSV files, the pandas oracle of its rollups, and the server over
it: what the API, CLI and browser tests of ``tiltframe serve`` share."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pandas as pd

import tiltframe as tf
from tests.cli.test_cli import APP  # the README's trades aggregation, with a count
from tests.servers import app_with_store
from tiltframe.http.routes import create_app
from tiltframe.http.server import BackgroundServer
from tiltframe.model.app import AppSpec

SYMBOLS = ("IBM", "WSO2", "ORCL")
T0 = 1_704_067_200_000  # 2024-01-01 00:00:00 GMT
DAY = 86_400_000


def trades(n: int, seed: int, days: int = 20, start: int = T0) -> pd.DataFrame:
    """``n`` trades over ``days`` days from ``start``, in random order (symbol, price, quantity, ts)."""
    rng = random.Random(seed)
    rows = [{"symbol": rng.choice(SYMBOLS), "price": round(rng.uniform(5, 500), 2),
             "quantity": rng.randint(1, 1000), "ts": start + rng.randrange(days * DAY)} for _ in range(n)]
    return pd.DataFrame(rows)


def write_csv(events: pd.DataFrame, path: Path, *, bad: int = 0, iso_every: int = 3) -> None:
    """``events`` as a CSV file with a header; every ``iso_every``-th time as ISO-8601 text and ``bad``
    extra rows whose price is no number (rejected with their reason)."""
    lines = ["symbol,price,quantity,timestamp"]
    for i, r in enumerate(events.itertuples(index=False)):
        when = (datetime.fromtimestamp(r.ts / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
                if i % iso_every == 0 else str(r.ts))
        lines.append(f"{r.symbol},{r.price},{r.quantity},{when}")
    lines += [f"IBM,n/a{i},1,{T0}" for i in range(bad)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def oracle(events: pd.DataFrame, per_ms: int = DAY) -> pd.DataFrame:
    """Per bucket (fixed length, GMT) and symbol: avgPrice, total, trades — computed from the raw events."""
    frame = events.assign(AGG_TIMESTAMP=events["ts"] // per_ms * per_ms)
    out = frame.groupby(["AGG_TIMESTAMP", "symbol"], as_index=False).agg(
        avgPrice=("price", "mean"), total=("quantity", "sum"), trades=("price", "size"))
    return out.sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)


@dataclass
class Served:
    """A store built by a real run and a server over it."""

    app: AppSpec
    data_dir: Path
    events: pd.DataFrame
    rejected: int
    url: str
    token: str | None = None

    def client(self, *, token: str | None = None) -> httpx.Client:
        token = token if token is not None else self.token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


def build(
    spark: object, tmp: Path, store_url: str | None, *, n: int = 600, bad: int = 3
) -> tuple[AppSpec, pd.DataFrame]:
    """Run the app over two CSV files (one with ISO times, one with bad prices) into the store."""
    text, _ = app_with_store(APP, store_url)
    app = tf.load_app(text)
    inbox = tmp / "in put"
    inbox.mkdir(parents=True)
    events = trades(n, seed=7)
    half = len(events) // 2
    write_csv(events.iloc[:half], inbox / "trades 1.csv")
    write_csv(events.iloc[half:], inbox / "trades-2.csv", bad=bad)
    result = tf.run(app, {"TradeStream": inbox}, data_dir=tmp / "data", spark=spark)
    totals = result.aggregations["TradeAggregation"]
    assert (totals.events_read, totals.events_rejected) == (n + bad, bad)
    return app, events


@contextmanager
def serving(app: AppSpec, data_dir: Path, events: pd.DataFrame, rejected: int, *, token: str | None = None,
            **options: object) -> Iterator[Served]:
    with BackgroundServer(create_app(app, data_dir, token=token, **options)) as server:  # type: ignore[arg-type]
        yield Served(app, data_dir, events, rejected, server.url, token)
