"""DDSketch states in the store: written as the DDSketch libraries' protobuf on every store, JSON states of
a store an older tiltframe wrote still read and merged, and ``tiltframe migrate`` rewriting them in place
without changing one answer.  Quantiles are checked against the exact ones of the events (numpy)."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import tiltframe as tf
from tests.servers import STORES, app_with_store, fresh_database
from tiltframe.aggregates.layout import AGG_TIMESTAMP, AggregationLayout
from tiltframe.aggregates.sketches import ddsketch as dd
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store.lifecycle import state_formats
from tiltframe.store.open_stores import StoreRegistry

APP = """
define stream Trades (symbol string, price double, ts long);
define aggregation Prices
from Trades
select symbol, dds(price, [0.1, 0.5, 0.99], 0.01) as q, count() as n
group by symbol
aggregate by ts every sec ... hour;
"""
LEVELS = (Granularity(Unit.SECONDS), Granularity(Unit.MINUTES), Granularity(Unit.HOURS))
QUERY = "from Prices within 0L, 9000000000000L per 'minutes' select AGG_TIMESTAMP, symbol, q_p10, q_p50, q_p99, n"
T0 = 1_700_000_000_000


def trades(seed: int, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "symbol": rng.choice(["IBM", "WSO2", "ORCL"], n),
        "price": np.round(np.concatenate([rng.lognormal(3, 1.5, n - 3), [0.0, -4.5, 1e-3]]), 4),
        "ts": T0 + rng.integers(0, 180_000, n),
    })


def states(app: tf.AppSpec, data: Path) -> dict[str, list[bytes]]:
    """Every stored DDSketch state, per table."""
    layout = AggregationLayout.of(app, "Prices")
    stores = StoreRegistry(data)
    try:
        store = stores.for_aggregation(layout.spec)
        return {f"{g}": [s for s in store.read(layout, g)["q_DDS"] if s is not None] for g in LEVELS}
    finally:
        stores.close()


def downgrade(app: tf.AppSpec, data: Path) -> int:
    """Rewrite every stored state as an older tiltframe stored it (JSON), as that store would hold it."""
    layout = AggregationLayout.of(app, "Prices")
    stores = StoreRegistry(data)
    try:
        store = stores.for_aggregation(layout.spec)
        changed = 0
        with store.write_transaction("downgrade") as conn:
            for table in store._tables(layout).values():
                start = table.c[AGG_TIMESTAMP]
                rows = conn.execute(sa.select(start, table.c.symbol, table.c.q_DDS)).all()
                params = []
                for ts, symbol, state in rows:
                    b = dd.bins(state)
                    old = {"alpha": b.alpha, "zero": b.zero, "pos": {str(k): v for k, v in b.pos.items()},
                           "neg": {str(k): v for k, v in b.neg.items()}}
                    params.append({"ts": ts, "sym": symbol, "old": json.dumps(old, separators=(",", ":")).encode()})
                key = (start == sa.bindparam("ts"), table.c.symbol == sa.bindparam("sym"))
                conn.execute(sa.update(table).where(*key).values(q_DDS=sa.bindparam("old")), params)
                changed += len(params)
        return changed
    finally:
        stores.close()


def check_quantiles(result: pd.DataFrame, events: pd.DataFrame) -> None:
    """Every bucket's count is exact and each quantile within 1% of the exact lower quantile."""
    minute = (events["ts"] // 60_000) * 60_000
    assert len(result) == events.assign(m=minute).groupby(["m", "symbol"]).ngroups
    for row in result.itertuples(index=False):
        start = int(row.AGG_TIMESTAMP)
        prices = np.sort(events[(minute == start) & (events["symbol"] == row.symbol)]["price"].to_numpy())
        assert row.n == len(prices)
        for q, got in ((0.1, row.q_p10), (0.5, row.q_p50), (0.99, row.q_p99)):
            exact = prices[int(np.floor(q * (len(prices) - 1)))]
            assert abs(got - exact) <= 0.01 * abs(exact) + 1e-12, (row, q, exact)


@pytest.mark.slow
@pytest.mark.parametrize("backend", STORES)
def test_json_states_of_an_older_store_are_read_merged_and_migrated(
    spark, tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with nullcontext(None) if backend == "sqlite" else fresh_database(backend) as url:
        text, env = app_with_store(APP, url)
        assert not env
        app = tf.load_app(text)
        data, inbox = tmp_path / "data", tmp_path / "in"
        inbox.mkdir()
        first, second = trades(1, 900), trades(2, 600)
        first.to_csv(inbox / "a.csv", index=False)
        tf.run(app, {"Trades": inbox}, data_dir=data, spark=spark)
        stored = states(app, data)
        assert all(stored.values()) and all(dd.is_stored_format(s) for v in stored.values() for s in v)
        answer = tf.query(app, QUERY, data_dir=data)
        check_quantiles(answer, first)

        written = downgrade(app, data)
        assert written == sum(len(v) for v in stored.values())
        assert not any(dd.is_stored_format(s) for v in states(app, data).values() for s in v)
        pd.testing.assert_frame_equal(tf.query(app, QUERY, data_dir=data), answer)  # read as they are

        # A new file merges into the JSON states: the rows it touches are protobuf, the others stay JSON.
        second.to_csv(inbox / "b.csv", index=False)
        tf.run(app, {"Trades": inbox}, data_dir=data, spark=spark)
        both = pd.concat([first, second], ignore_index=True)
        answer = tf.query(app, QUERY, data_dir=data)
        check_quantiles(answer, both)
        mixed = [dd.is_stored_format(s) for v in states(app, data).values() for s in v]
        assert any(mixed) and not all(mixed)

        monkeypatch.setattr(state_formats, "CHUNK_ROWS", 7)  # many chunks, buckets cut between two
        changes = tf.migrate(app, data_dir=data)["Prices"]
        assert changes and all("hold their sketch states in the current format now" in c for c in changes)
        assert all(dd.is_stored_format(s) for v in states(app, data).values() for s in v)
        pd.testing.assert_frame_equal(tf.query(app, QUERY, data_dir=data), answer)
        assert tf.migrate(app, data_dir=data) == {"Prices": []}


def test_chunks_end_when_no_older_state_is_left(tmp_path: Path) -> None:
    """The rewrite is idempotent: states already in the current format are never selected again."""
    app = tf.load_app(APP)
    layout = AggregationLayout.of(app, "Prices")
    assert state_formats.rewritable(layout) == ["q_DDS"]
    plain = tf.load_app(APP.replace("dds(price, [0.1, 0.5, 0.99], 0.01) as q, ", ""))
    assert state_formats.rewritable(AggregationLayout.of(plain, "Prices")) == []
    stores = StoreRegistry(tmp_path)
    try:
        store = stores.for_aggregation(layout.spec)
        assert store.rewrite_older_states(layout) == {}  # no store file yet: nothing made
        assert not any(tmp_path.iterdir())
    finally:
        stores.close()
