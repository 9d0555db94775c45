"""Readable time on every store, end to end: a real run (Spark) in America/New_York across the March 2024
change to summer time, then what a BI tool and a person read, against a pandas oracle over the raw events.

- each ``_FINAL`` view answers a Grafana-style query (``SELECT "AGG_TIME" AS time ... WHERE "AGG_TIME"
  BETWEEN $from AND $to ORDER BY 1``) in the store's own dialect, ``AGG_TIME`` being the store's time type;
- ``tf.query`` gives ``AGG_TIME`` as a zone-aware datetime beside ``AGG_TIMESTAMP``, by name or with all
  columns, and not to callers who select columns of their own;
- ``tiltframe query`` prints it as ISO-8601 with the zone's offset at that instant;
- a view made by an earlier version (no ``AGG_TIME``) is replaced when the store is opened again.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

import tiltframe as tf
from tests.servers import app_with_store, fresh_database
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.cli.commands import app as cli
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store.open_stores import StoreRegistry
from tiltframe.store.views import view_name

ZONE = "America/New_York"
APP = f"""
define stream TradeStream (symbol string, price double, quantity long, ts long);
@timezone('{ZONE}')
define aggregation TradeAggregation
from TradeStream
select symbol, sum(quantity) as total, count() as trades
group by symbol
aggregate by ts every hour ... month;
"""
DAYS, MONTHS = Granularity(Unit.DAYS), Granularity(Unit.MONTHS)
FROM, TO = datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 3, 15, tzinfo=UTC)  # the dashboard's range

#: The dashboard query of each store's Grafana data source, as its macros expand ($__timeFilter).
GRAFANA = {
    "sqlite": ('SELECT "AGG_TIME" AS time, symbol, total FROM "{view}" '
               "WHERE \"AGG_TIME\" BETWEEN '{start:%Y-%m-%dT%H:%M:%S.000Z}' AND '{end:%Y-%m-%dT%H:%M:%S.000Z}' "
               "ORDER BY 1, 2"),
    "postgresql": ('SELECT "AGG_TIME" AS time, symbol, total FROM "{view}" '
                   "WHERE \"AGG_TIME\" BETWEEN '{start:%Y-%m-%dT%H:%M:%SZ}' AND '{end:%Y-%m-%dT%H:%M:%SZ}' "
                   "ORDER BY 1, 2"),
    "mysql": ("SELECT AGG_TIME AS time, symbol, total FROM `{view}` "
              "WHERE AGG_TIME BETWEEN FROM_UNIXTIME({start_s}) AND FROM_UNIXTIME({end_s}) ORDER BY 1, 2"),
}


def events() -> pd.DataFrame:
    """Trades from late February to late March 2024, many near local midnights and the DST change."""
    rng = np.random.default_rng(20)
    n = 400
    start = pd.Timestamp("2024-02-25", tz=ZONE).value // 1_000_000
    midnights = start + 86_400_000 * rng.integers(0, 30, n) + rng.choice([-1, 0, 1, 3_600_000, 4 * 3_600_000], n)
    spread = start + rng.integers(0, 30 * 86_400_000, n)
    ts = np.where(rng.random(n) < 0.5, midnights, spread)
    return pd.DataFrame({"symbol": rng.choice(["IBM", "WSO2"], n), "price": rng.integers(1, 100, n) / 4,
                         "quantity": rng.integers(1, 1000, n), "ts": ts})


def oracle(frame: pd.DataFrame, per: str) -> pd.DataFrame:
    """Sum and count per local day or month and symbol; ``time`` the bucket's first instant, zone-aware."""
    local = pd.to_datetime(frame["ts"], unit="ms", utc=True).dt.tz_convert(ZONE)
    day = 1 if per == "months" else local.dt.day
    naive = pd.to_datetime(pd.DataFrame({"year": local.dt.year, "month": local.dt.month, "day": day}))
    grouped = frame.assign(time=naive.dt.tz_localize(ZONE)).groupby(["time", "symbol"], as_index=False)
    return grouped.agg(total=("quantity", "sum"), trades=("quantity", "size"))


@pytest.fixture(scope="module")
def stored(store_kind: str, spark: object, tmp_path_factory: pytest.TempPathFactory):
    """The app run over the events into a fresh store of each kind: (backend, app, data directory, events)."""
    backend = store_kind
    tmp = tmp_path_factory.mktemp(f"views-{backend}")
    raw = events()
    inbox = tmp / "in"
    inbox.mkdir()
    raw.to_json(inbox / "trades.jsonl", orient="records", lines=True)
    if backend == "sqlite":
        yield from _run(backend, APP, tmp, raw, spark)
        return
    with fresh_database(backend) as url:
        text, env = app_with_store(APP, url)
        assert not env
        yield from _run(backend, text, tmp, raw, spark)


def _run(backend: str, text: str, tmp: Path, raw: pd.DataFrame, spark: object):
    (tmp / "app.siddhi").write_text(text, encoding="utf-8")
    app = tf.load_app(text)
    tf.run(app, {"TradeStream": tmp / "in"}, data_dir=tmp / "data", spark=spark)
    yield backend, app, tmp, raw


def _engine(app, data: Path) -> tuple[sa.Engine, StoreRegistry]:
    stores = StoreRegistry(data)
    return stores.for_aggregation(app.aggregation("TradeAggregation"))._engine, stores


def _instant(value: object) -> pd.Timestamp:
    """What a driver hands back for AGG_TIME as a UTC instant: ISO text ending in Z (SQLite), an aware
    datetime (PostgreSQL), a naive datetime in UTC (MariaDB's DATETIME)."""
    if isinstance(value, str):
        assert value.endswith("Z") and "T" in value, value
    t = pd.Timestamp(value)
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


@pytest.mark.slow
def test_a_dashboard_query_on_each_view_equals_the_oracle(stored) -> None:
    backend, app, tmp, raw = stored
    layout = AggregationLayout.of(app, "TradeAggregation")
    engine, stores = _engine(app, tmp / "data")
    try:
        with engine.connect() as conn:
            if backend == "mysql":
                conn.exec_driver_sql("SET time_zone = '+00:00'")  # as Grafana's MySQL source does
            for g, per in ((DAYS, "days"), (MONTHS, "months")):
                sql = GRAFANA[backend].format(view=view_name(layout, g), start=FROM, end=TO,
                                              start_s=int(FROM.timestamp()), end_s=int(TO.timestamp()))
                got = pd.DataFrame(conn.exec_driver_sql(sql).fetchall(), columns=["time", "symbol", "total"])
                want = oracle(raw, per)
                want = want[(want["time"] >= FROM) & (want["time"] <= TO)].reset_index(drop=True)
                assert len(want) > 0 and len(got) == len(want), per
                assert [_instant(v) for v in got["time"]] == list(want["time"].dt.tz_convert("UTC")), per
                assert list(got["symbol"]) == list(want["symbol"])
                assert [int(v) for v in got["total"]] == list(want["total"])
            kind = {c["name"]: c["type"] for c in sa.inspect(conn).get_columns(view_name(layout, DAYS))}["AGG_TIME"]
            if backend == "postgresql":
                assert isinstance(kind, sa.TIMESTAMP) and kind.timezone
            elif backend == "mysql":
                assert isinstance(kind, sa.DATETIME) and kind.fsp == 3
    finally:
        stores.close()


@pytest.mark.slow
def test_query_results_carry_agg_time_in_the_zone(stored) -> None:
    backend, app, tmp, raw = stored
    data = tmp / "data"
    within = 'within "2024-**-** **:**:**"'
    everything = tf.query(app, f'from TradeAggregation {within} per "days" select *', data_dir=data)
    assert list(everything.columns[:3]) == ["AGG_TIMESTAMP", "AGG_TIME", "symbol"]
    assert str(everything["AGG_TIME"].dtype) == f"datetime64[ms, {ZONE}]"
    want = oracle(raw, "days")
    got = everything.sort_values(["AGG_TIMESTAMP", "symbol"]).reset_index(drop=True)
    assert list(got["AGG_TIME"]) == list(want["time"])
    assert list(got["AGG_TIMESTAMP"]) == [t.value // 1_000_000 for t in want["time"]]
    assert list(got["total"]) == list(want["total"])
    # Callers who choose their columns get those; AGG_TIME is one they can choose and order by.
    chosen = tf.query(app, f'from TradeAggregation {within} per "months" select AGG_TIMESTAMP, symbol, total',
                      data_dir=data)
    assert list(chosen.columns) == ["AGG_TIMESTAMP", "symbol", "total"]
    named = tf.query(app, f'from TradeAggregation {within} per "months" select AGG_TIME as month, symbol, total '
                          "order by month", data_dir=data)
    months = oracle(raw, "months")
    assert list(named["month"]) == list(months["time"])
    assert [t.isoformat() for t in named["month"].drop_duplicates()] == [
        "2024-02-01T00:00:00-05:00", "2024-03-01T00:00:00-05:00"]
    if backend != "sqlite":
        return  # the CLI's rendering does not depend on the store
    runner = CliRunner()
    text = f'from TradeAggregation {within} per "days" select *'
    args = ["query", str(tmp / "app.siddhi"), text, "--data-dir", str(data)]
    doc = json.loads(runner.invoke(cli, [*args, "--format", "json"]).stdout)
    days = {r["AGG_TIME"] for r in doc}
    assert {"2024-03-09T00:00:00.000-05:00", "2024-03-10T00:00:00.000-05:00", "2024-03-11T00:00:00.000-04:00"} <= days
    assert {r["AGG_TIMESTAMP"] for r in doc} == {t.value // 1_000_000 for t in want["time"]}
    csv = pd.read_csv(StringIO(runner.invoke(cli, [*args, "--format", "csv"]).stdout))
    assert list(csv["AGG_TIME"]) == [r["AGG_TIME"] for r in doc]
    table = runner.invoke(cli, [*args, "--format", "table"]).stdout
    assert "2024-03-11T00:00:00.000-04:00" in table and "time (" not in table


@pytest.mark.slow
def test_a_view_of_an_earlier_version_is_replaced_on_open(stored) -> None:
    _, app, tmp, _ = stored
    layout = AggregationLayout.of(app, "TradeAggregation")
    engine, stores = _engine(app, tmp / "data")
    view, table = view_name(layout, DAYS), layout.table_name(DAYS)
    try:
        with engine.begin() as conn:  # the view as the previous version made it: no AGG_TIME
            quote = conn.dialect.identifier_preparer.quote
            conn.exec_driver_sql(f"DROP VIEW {quote(view)}")
            conn.exec_driver_sql(f"CREATE VIEW {quote(view)} AS SELECT {quote('AGG_TIMESTAMP')}, "
                                 f"{quote('symbol')} FROM {quote(table)}")
        stores.for_aggregation(layout.spec).ensure_schema(layout)  # a new process opening the store
        with engine.connect() as conn:
            columns = [c["name"] for c in sa.inspect(conn).get_columns(view)]
        assert columns[:3] == ["AGG_TIMESTAMP", "AGG_TIME", "symbol"] and "total" in columns
    finally:
        stores.close()
