"""New buckets appended by the servers' bulk loads (``store.writes.appends``): the same rows as the upserts would
store, every awkward key and double kept exactly, and a row that meets a stored one failing the batch."""

from __future__ import annotations

import itertools
import math
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tiltframe.store.writes.appends as appends
import tiltframe.store.writes.bulk_formats as bulk_formats
from tests.private_servers import private_server
from tests.servers import SERVER_STORES
from tests.store.conftest import SEC, T0, batch, fresh_store, make_layout, row
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.errors import StoreError
from tiltframe.model.aggregations import StoreSpec
from tiltframe.store.sql import SqlStore
from tiltframe.store.urls import store_target

#: Keys a text format could mangle: its separators, quotes, escapes, NULL's spellings, an empty string.
AWKWARD = ["IBM", "", "a\tb", "line\nbreak", "cr\rlf", "back\\slash", "\\N", "NULL", 'quo"te', "it's", "x,y",
           "ünïcödé 株", " padded ", "\\"]
#: Doubles whose text must read back to the same bits.
DOUBLES = [0.1, 1 / 3, -2.5, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e300, 123456789.12345678]

_names = itertools.count()


@pytest.fixture(params=SERVER_STORES)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    with fresh_store(request.param, tmp_path / "unused.db", make_layout()) as (store, _):
        yield store


def appended_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows each bulk load takes, noted as they come."""
    seen: list[int] = []
    append = appends.append_rows

    def noting(conn: Any, dialect: Any, layout: AggregationLayout, table: sa.Table, data: pa.Table) -> int:
        seen.append(data.num_rows)
        return append(conn, dialect, layout, table, data)

    monkeypatch.setattr(appends, "append_rows", noting)
    return seen


def expected(batches: list[list[dict[str, Any]]]) -> dict[tuple[int, str], dict[str, Any]]:
    """Each key's merged row, folding the batches in order as the store does (doubles summed one batch
    after the other, NULLs never winning, the latest event by event time, batch and sequence)."""
    out: dict[tuple[int, str], dict[str, Any]] = {}
    for rows in batches:
        for r in rows:
            key = (r["AGG_TIMESTAMP"], r["symbol"])
            if key not in out:
                out[key] = dict(r)
                continue
            old = out[key]
            for c in ("AGG_COUNT", "avgPrice_SUM", "avgPrice_COUNT", "total_SUM"):
                old[c] = r[c] if old[c] is None else old[c] if r[c] is None else old[c] + r[c]
            for c, pick in (("low_MIN", min), ("high_MAX", max)):
                old[c] = r[c] if old[c] is None else old[c] if r[c] is None else pick(old[c], r[c])
            order = ("AGG_EVENT_TIMESTAMP", "AGG_ARRIVAL_BATCH", "AGG_ARRIVAL_SEQ")
            if tuple(r[c] for c in order) > tuple(old[c] for c in order):
                old.update({c: r[c] for c in (*order, "value")})
    return out


def plain(value: Any) -> Any:
    """A read value as Python compares it: NULL (NaN or NA in the frame) as None."""
    return None if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) else value


rows_of_a_batch = st.lists(
    st.tuples(st.integers(0, 5), st.sampled_from(AWKWARD), st.sampled_from([*DOUBLES, None]),
              st.integers(-10**12, 10**12)),
    min_size=1, max_size=12, unique_by=lambda r: (r[0], r[1]))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=st.lists(st.tuples(st.integers(-3, 3), rows_of_a_batch), min_size=1, max_size=4))
def test_appended_and_merged_rows_are_the_folded_batches(server: SqlStore, drawn, monkeypatch) -> None:
    """Batches move forward and back in time, so each appends some buckets and merges the others; what the
    table holds is every batch folded in order, bit for bit.  Loads come in chunks of three rows."""
    monkeypatch.setattr(bulk_formats, "CHUNK_ROWS", 3)
    layout = make_layout(name=f"Appended{next(_names)}")
    batches, start = [], 0
    for b, (shift, drawn_rows) in enumerate(drawn):
        start = max(0, start + shift)
        rows = [row(T0 + 1000 * (start + s), sym, T0 + 1000 * (start + s) + i, b, i, 1.0, qty,
                    avgPrice_SUM=price, low_MIN=price, high_MAX=None if price is None else -price,
                    value=None if price is None else price * 2)
                for i, (s, sym, price, qty) in enumerate(drawn_rows)]
        batches.append(rows)
        assert server.write_batch(layout, batch(layout, b, rows))
    stored = server.read(layout, SEC).to_dict("records")
    got = {(r["AGG_TIMESTAMP"], r["symbol"]): r for r in stored}
    want = expected(batches)
    assert len(stored) == len(want) and set(got) == set(want)  # one row a key: the digests agree too
    for key, w in want.items():
        bad = {c: (got[key][c], v) for c, v in w.items() if plain(got[key][c]) != v}
        assert not bad, (key, bad)


def test_only_buckets_after_the_latest_stored_are_appended(server: SqlStore, monkeypatch) -> None:
    layout = make_layout()
    seen = appended_rows(monkeypatch)
    first = [row(T0 + 1000 * s, sym, T0 + 1000 * s, 1, i, 1.0, 1) for i, (s, sym) in
             enumerate(itertools.product(range(3), ["A", "B"]))]
    server.write_batch(layout, batch(layout, 1, first))
    assert seen == [6]  # an empty table: all appended
    later = [row(T0 + 1000, "A", T0 + 1500, 2, 0, 2.0, 1), row(T0 + 2000, "C", T0 + 2000, 2, 1, 2.0, 1),
             row(T0 + 3000, "A", T0 + 3000, 2, 2, 2.0, 1), row(T0 + 4000, "B", T0 + 4000, 2, 3, 2.0, 1)]
    server.write_batch(layout, batch(layout, 2, later))
    assert seen == [6, 2]  # buckets 3 and 4 s: later than the stored 2 s; the others merged
    got = {(r["AGG_TIMESTAMP"], r["symbol"]): r["total_SUM"] for r in server.read(layout, SEC).to_dict("records")}
    assert got[(T0 + 1000, "A")] == 2 and got[(T0 + 2000, "C")] == 1 and len(got) == 9


def test_a_row_the_table_already_holds_fails_the_batch_and_writes_nothing(server: SqlStore, monkeypatch) -> None:
    """Were the latest bucket misread, the bulk load would meet a stored key: the batch fails, named, and
    its transaction leaves the table as it was (never a row skipped or doubled)."""
    layout = make_layout()
    server.write_batch(layout, batch(layout, 1, [row(T0, "A", T0, 1, 0, 1.0, 5)]))
    monkeypatch.setattr(appends, "split_new", lambda conn, layout, table, data: (data, data.slice(0, 0)))
    clash = [row(T0, "A", T0 + 1, 2, 0, 1.0, 7), row(T0 + 1000, "B", T0 + 1000, 2, 1, 1.0, 1)]
    with pytest.raises(StoreError, match=r"TradeAggregation_SECONDS|[Dd]uplicate"):
        server.write_batch(layout, batch(layout, 2, clash))
    stored = server.read(layout, SEC)
    assert stored[["symbol", "total_SUM"]].to_dict("records") == [{"symbol": "A", "total_SUM": 5}]
    assert server.last_committed_batch(layout, "p1") == 1


def test_postgresql_appends_nan_and_infinities(tmp_path: Path) -> None:
    layout = make_layout()
    with fresh_store("postgresql", tmp_path / "unused.db", layout) as (store, _):
        rows = [row(T0, s, T0, 1, i, v, 1) for i, (s, v) in enumerate(
            [("nan", math.nan), ("inf", math.inf), ("-inf", -math.inf)])]
        store.write_batch(layout, batch(layout, 1, rows))
        got = {r["symbol"]: r["avgPrice_SUM"] for r in store.read(layout, SEC).to_dict("records")}
    assert math.isnan(got["nan"]) and got["inf"] == math.inf and got["-inf"] == -math.inf


def test_rows_sharing_a_key_go_to_the_upserts() -> None:
    data = pa.table({"AGG_TIMESTAMP": [1, 1, 2], "symbol": ["a", "a", "a"]})
    assert appends._repeats_a_key(data, ("AGG_TIMESTAMP", "symbol"))
    assert not appends._repeats_a_key(data.slice(1), ("AGG_TIMESTAMP", "symbol"))
    assert not appends._repeats_a_key(pa.table({"AGG_TIMESTAMP": [1, 1], "symbol": ["a", "b"]}),
                                      ("AGG_TIMESTAMP", "symbol"))


@pytest.mark.slow
def test_a_server_that_takes_no_local_files_gets_every_row_by_upserts(monkeypatch: pytest.MonkeyPatch) -> None:
    """MariaDB with ``local_infile`` off (MySQL 8's default) refuses ``LOAD DATA LOCAL``: the store asks once
    and merges every row by upserts, the same rows stored."""
    with private_server("mysql") as server:
        subprocess.run([*server._admin("mariadb"), "-e", "SET GLOBAL local_infile = 0"], check=True,
                       capture_output=True, timeout=60)
        layout = make_layout()
        seen = appended_rows(monkeypatch)
        with SqlStore.server(store_target(StoreSpec("rdbms", server.url))) as store:
            rows = [row(T0 + 1000 * s, sym, T0 + 1000 * s, 1, i, 1.5, 2) for i, (s, sym) in
                    enumerate(itertools.product(range(3), AWKWARD[:4]))]
            assert store.write_batch(layout, batch(layout, 1, rows))
            assert store.write_batch(layout, batch(layout, 2, [row(T0 + 9000, "A", T0 + 9000, 2, 0, 1.0, 1)]))
            stored = store.read(layout, SEC)
        assert seen == [] and len(stored) == len(rows) + 1
        assert sorted(stored["symbol"][:12]) == sorted(r["symbol"] for r in rows)
        assert stored["total_SUM"].sum() == 2 * len(rows) + 1
