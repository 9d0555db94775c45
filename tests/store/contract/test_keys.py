"""Keys and text on every store: distinct keys stay distinct (case, trailing space, accents, emoji), keys of
any length work, and recorded values too large to keep are cut with a visible marker."""

from __future__ import annotations

import json
import unicodedata
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
import sqlalchemy as sa

from tests.servers import STORES
from tests.store.conftest import MIN, SEC, T0, batch, fresh_store, make_layout, row
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.model.aggregations import AggregateItem, AggregationSpec, KeyItem
from tiltframe.model.app import AppSpec
from tiltframe.model.expressions import Attr
from tiltframe.model.streams import Attribute, AttrType, StreamDef
from tiltframe.store.base import REJECTED_COLUMNS, REJECTED_TIMES, BatchStats, BatchWrite
from tiltframe.store.dialects.lookup import dialect_of
from tiltframe.store.dialects.mysql import KEY_HASH, key_hash_sql
from tiltframe.store.schema import level_tables
from tiltframe.store.sql import SqlStore
from tiltframe.store.writes.recorded import MAX_RECORDED_BYTES, fit_text

#: Keys that a case-insensitive, accent-insensitive or PAD SPACE collation would merge.
TRICKY = ["IBM", "ibm", "IBM ", "IBM  ", " IBM", "é", unicodedata.normalize("NFD", "é"), "e", "E", "📈", "😀",
          "ß", "ss", "İ", "i", "a\u200bb", "ab", ""]
#: Keys beyond MySQL's 255-character VARCHAR, two of them alike but for their last character.
LONG = ["k" * 300, "k" * 299 + "K", "x" * 100_000, "é" * 5_000]


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["AGG_TIMESTAMP", "symbol"], key=lambda s: s.map(repr)).reset_index(drop=True)


def _write_all(store: SqlStore, keys: list[str]) -> None:
    layout = make_layout()
    for b in (1, 2):  # the second batch merges into the first one's rows: the unique key decides
        rows = [row(T0, k, T0 + i, b, i, float(i), i + 1) for i, k in enumerate(keys)]
        store.write_batch(layout, batch(layout, b, rows, min_rows=rows))


def test_the_same_rows_on_every_store(tmp_path: Path) -> None:
    """Same batches, same rows: sqlite, postgresql and mysql keep every distinct key apart."""
    layout = make_layout()
    keys = TRICKY + LONG
    got: dict[str, pd.DataFrame] = {}
    for backend in STORES:
        with fresh_store(backend, tmp_path / backend / "db", layout) as (store, _):
            _write_all(store, keys)
            got[backend] = _sorted(store.read(layout, SEC))
            info = store.info(layout)
            assert [t.rows for t in info.tables] == [len(keys), len(keys)], backend
    expected = _sorted(pd.DataFrame({"AGG_TIMESTAMP": [T0] * len(keys), "symbol": keys,
                                     "total_SUM": [2 * (i + 1) for i in range(len(keys))],
                                     "AGG_COUNT": [2] * len(keys)}))
    for backend, frame in got.items():
        assert frame["symbol"].tolist() == expected["symbol"].tolist(), backend
        assert frame["total_SUM"].tolist() == expected["total_SUM"].tolist(), backend
        assert frame["AGG_COUNT"].tolist() == expected["AGG_COUNT"].tolist(), backend
    pd.testing.assert_frame_equal(got["postgresql"], got["sqlite"])
    pd.testing.assert_frame_equal(got["mysql"], got["sqlite"])


def test_views_keep_tricky_keys_apart(store: SqlStore) -> None:
    """The final-values view groups nothing away either (its key columns are compared byte for byte)."""
    layout = make_layout()
    _write_all(store, TRICKY)
    assert len(store.read(layout, MIN)) == len(TRICKY)


@pytest.mark.parametrize("text", ["short", "x" * MAX_RECORDED_BYTES, "y" * (MAX_RECORDED_BYTES + 1),
                                  "é" * MAX_RECORDED_BYTES, "📈" * 100_000])
def test_fit_text_cuts_at_a_character_and_says_so(text: str) -> None:
    fitted = fit_text(text)
    size = len(text.encode())
    if size <= MAX_RECORDED_BYTES:
        assert fitted == text
        return
    assert len(fitted.encode()) <= MAX_RECORDED_BYTES
    assert fitted.endswith(f"…[truncated, {size} bytes]")
    kept = fitted[: fitted.rindex("…[truncated")]
    assert text.startswith(kept) and len(kept) > MAX_RECORDED_BYTES // 8


def test_a_huge_rejected_value_is_kept_cut_with_a_marker(store: SqlStore) -> None:
    layout = make_layout()
    huge = "v" * 2_000_000
    rej = pa.table({"stream": ["TradeStream"], "kind": ["invalid"], "reason": ["bad price " + huge],
                    "field": ["price"], "value": [huge], "raw": ['{"price": "' + huge + '"}'],
                    "event_timestamp": pa.array([T0], pa.int64()), "adjusted_timestamp": pa.array([None], pa.int64())})
    assert store.write_batch(layout, batch(layout, 1, [row(T0, "A", T0, 1, 0, 1.0, 1)], rejected=rej))
    got = store.rejected(layout).iloc[0]
    assert got["value"].startswith("vvv") and got["value"].endswith(f"…[truncated, {len(huge)} bytes]")
    assert got["raw"].endswith(f"…[truncated, {len(huge) + 13} bytes]")
    assert got["field"] == "price" and got["kind"] == "invalid" and got["event_timestamp"] == T0
    assert store.info(layout).events_rejected == 1


def test_info_is_plain_json_on_every_store(store: SqlStore) -> None:
    """Drivers return DECIMAL for SUM on the servers; ``info`` gives plain ints."""
    layout = make_layout()
    rej = pa.table({c: ["x"] for c in REJECTED_COLUMNS} | {c: pa.array([T0], pa.int64()) for c in REJECTED_TIMES})
    store.write_batch(layout, batch(layout, 1, [row(T0, "A", T0, 1, 0, 1.0, 1)], rejected=rej))
    info = store.info(layout)
    text = json.dumps(asdict(info))
    assert json.loads(text)["events_read"] == 2
    assert all(type(v) is int for v in (info.batches, info.events_read, info.events_aggregated,
                                        info.events_rejected, info.events_moved, info.min_event_ts))


PAIRS = [("ab", "c"), ("a", "bc"), ("a", "b:c"), ("a:b", "c"), ("é", ""), ("", "é"), ("x" * 5000, "y"),
         ("x" * 5000, "Y")]


def _two_keys() -> AggregationLayout:
    stream = StreamDef("S", (Attribute("a", AttrType.STRING), Attribute("b", AttrType.STRING),
                             Attribute("n", AttrType.LONG), Attribute("ts", AttrType.LONG)))
    agg = AggregationSpec("Pairs", "S", (KeyItem("a"), KeyItem("b"), AggregateItem("sum", Attr("n"), "total")),
                          (SEC,), ("a", "b"), "ts")
    return AggregationLayout.of(AppSpec((stream,), (agg,)), "Pairs")


def test_several_string_keys_never_run_into_each_other(tmp_path: Path, store_kind: str) -> None:
    """Two keys ``("ab", "c")`` and ``("a", "bc")`` are two groups (MySQL digests each key with its length),
    and the digest the store computes is the one MySQL computes for rows copied within the database."""
    layout = _two_keys()
    data = pa.table({"AGG_TIMESTAMP": [T0] * len(PAIRS), "a": [p[0] for p in PAIRS], "b": [p[1] for p in PAIRS],
                     "AGG_EVENT_TIMESTAMP": [T0] * len(PAIRS), "AGG_COUNT": [1] * len(PAIRS),
                     "total_SUM": list(range(1, len(PAIRS) + 1))})
    with fresh_store(store_kind, tmp_path / "db", layout) as (store, _):
        for b in (1, 2):
            assert store.write_batch(layout, BatchWrite("p", b, BatchStats(len(PAIRS), len(PAIRS), 0), {SEC: data}))
        got = store.read(layout, SEC)
        assert sorted(zip(got["a"], got["b"], got["total_SUM"], strict=True)) == sorted(
            (a, b, 2 * (i + 1)) for i, (a, b) in enumerate(PAIRS))
        if store_kind != "mysql":
            return
        table = store._tables(layout)[SEC]
        with store._engine.connect() as conn:
            same = conn.execute(sa.select(sa.func.min(table.c[KEY_HASH] == key_hash_sql(layout, table.c)))).scalar()
        assert same == 1


def test_tables_made_before_key_digests_keep_working_and_are_named(tmp_path: Path, caplog) -> None:
    """A MySQL table made by an earlier tiltframe (VARCHAR(255) keys in the primary key) is written as
    before, with a warning that says how to make it keep every key apart."""
    layout = make_layout()
    with fresh_store("mysql", tmp_path / "db", make_layout(name="Other")) as (store, _):
        with store._engine.begin() as conn:
            for table in level_tables(layout, dialect_of("mysql"), hashed=False).values():
                table.create(conn)
        store.ensure_schema(layout)
        assert "made by an earlier tiltframe" in caplog.text and "--rebuild" in caplog.text
        rows = [row(T0, "IBM", T0, 1, 0, 1.0, 2)]
        assert store.write_batch(layout, batch(layout, 1, rows, min_rows=rows))
        assert store.write_batch(layout, batch(layout, 2, rows, min_rows=rows))
        assert store.read(layout, SEC)["total_SUM"].tolist() == [4]
        store.reset(layout)  # a rebuild makes the tables anew, keyed by the digest
        store.ensure_schema(layout)
        with store._engine.connect() as conn:
            assert KEY_HASH in sa.inspect(conn).get_pk_constraint("TradeAggregation_SECONDS")["constrained_columns"]
        assert store.write_batch(layout, batch(layout, 3, [row(T0, "IBM ", T0, 3, 0, 1.0, 2), *rows]))
        assert sorted(store.read(layout, SEC)["symbol"]) == ["IBM", "IBM "]
