"""Output sinks: each keeps one copy of a micro-batch's rows however often the batch is replayed, keeps
missing values missing, and accepts empty frames; ``sink_for`` parses targets and names the bad ones."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import sqlalchemy as sa

from tests.servers import fresh_database
from tiltframe.engine.sinks import (
    BATCH_COLUMN,
    STREAM_COLUMN,
    BatchFileSink,
    CallbackSink,
    ConsoleSink,
    CsvSink,
    JsonLinesSink,
    ParquetSink,
    StoreTableSink,
    sink_for,
)
from tiltframe.errors import StoreError, UsageError
from tiltframe.model.aggregations import StoreSpec
from tiltframe.store.urls import store_target

STREAM = "CpuAlerts"


def alerts(*hosts: str, start: int = 0) -> pd.DataFrame:
    """A plain frame (numpy dtypes): one row per host."""
    n = len(hosts)
    return pd.DataFrame(
        {
            "host": list(hosts),
            "load": [start + i + 0.5 for i in range(n)],
            "count": [start + i for i in range(n)],
            "hot": [i % 2 == 0 for i in range(n)],
        }
    )


def nullable() -> pd.DataFrame:
    """Nullable columns, as retrieval gives them (``Int64``, ``Float64``, strings, booleans, times)."""
    return pd.DataFrame(
        {
            "host": pd.array(["a", None, "c"], dtype="string"),
            "count": pd.array([1, None, 3], dtype="Int64"),
            "p99": pd.array([0.25, 1.5, None], dtype="Float64"),
            "hot": pd.array([True, None, False], dtype="boolean"),
            "at": pd.to_datetime(["2024-01-30 10:00:00.123456", None, "2024-01-31 00:00:00.000000"]).tz_localize("UTC"),
        }
    )


# --- files ----------------------------------------------------------------------------------------------


def read_jsonl(path: Path) -> pd.DataFrame:
    return pd.DataFrame([json.loads(line) for line in path.read_text().splitlines()])


def read_csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path)


FILE_SINKS: dict[str, tuple[type[BatchFileSink], Callable[[Path], pd.DataFrame]]] = {
    "jsonl": (JsonLinesSink, read_jsonl),
    "csv": (CsvSink, read_csv),
    "parquet": (ParquetSink, pd.read_parquet),
}


@pytest.fixture(params=sorted(FILE_SINKS))
def file_sink(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[BatchFileSink, Callable[[Path], pd.DataFrame]]:
    cls, read = FILE_SINKS[request.param]
    return cls(tmp_path / "out"), read


def test_file_sink_writes_one_file_per_stream_and_batch(file_sink, tmp_path: Path) -> None:
    sink, read = file_sink
    sink.write(STREAM, 1, alerts("a", "b"))
    sink.write(STREAM, 2, alerts("c"))
    sink.write("Other", 1, alerts("d"))
    ext = sink.extension
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == [f"CpuAlerts-batch-000001.{ext}", f"CpuAlerts-batch-000002.{ext}", f"Other-batch-000001.{ext}"]
    got = read(sink.file_for(STREAM, 1))
    pd.testing.assert_frame_equal(got, alerts("a", "b"), check_dtype=False)


def test_file_sink_replayed_batch_replaces_its_file(file_sink, tmp_path: Path) -> None:
    sink, read = file_sink
    sink.write(STREAM, 7, alerts("a", "b", "c"))
    sink.write(STREAM, 7, alerts("x", start=10))  # the replay after a crash wins, no second file
    assert [p.name for p in (tmp_path / "out").iterdir()] == [sink.file_for(STREAM, 7).name]
    pd.testing.assert_frame_equal(read(sink.file_for(STREAM, 7)), alerts("x", start=10), check_dtype=False)


def test_file_sink_failed_write_keeps_the_old_file_and_no_temporary(
    file_sink, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink, read = file_sink
    sink.write(STREAM, 1, alerts("a"))

    def broken(fh: Any, rows: pd.DataFrame) -> None:
        fh.write(b"half a fi")
        raise OSError("disk full")

    monkeypatch.setattr(sink, "write_file", broken)
    with pytest.raises(OSError, match="disk full"):
        sink.write(STREAM, 1, alerts("b", "c"))
    assert [p.name for p in (tmp_path / "out").iterdir()] == [sink.file_for(STREAM, 1).name]
    pd.testing.assert_frame_equal(read(sink.file_for(STREAM, 1)), alerts("a"), check_dtype=False)


def test_file_sinks_of_different_formats_share_a_directory(tmp_path: Path) -> None:
    """Temporary names carry the extension, so two formats never write over each other's file."""
    for cls, _ in FILE_SINKS.values():
        cls(tmp_path).write(STREAM, 3, alerts("a"))
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".csv", ".jsonl", ".parquet"]


def test_jsonl_nullable_columns_become_null(tmp_path: Path) -> None:
    sink = JsonLinesSink(tmp_path)
    sink.write(STREAM, 1, nullable())
    records = [json.loads(line) for line in sink.file_for(STREAM, 1).read_text().splitlines()]
    assert records[1] == {"host": None, "count": None, "p99": 1.5, "hot": None, "at": None}
    assert records[0]["count"] == 1 and records[2]["p99"] is None


def test_csv_has_a_header_and_empty_fields_for_missing_values(tmp_path: Path) -> None:
    sink = CsvSink(tmp_path)
    sink.write(STREAM, 1, nullable())
    lines = sink.file_for(STREAM, 1).read_text().splitlines()
    assert lines == [
        "host,count,p99,hot,at",
        "a,1,0.25,True,2024-01-30T10:00:00.123456+00:00",  # ISO-8601, as fine as the column's values
        ",,1.5,,",
        "c,3,,False,2024-01-31T00:00:00.000000+00:00",
    ]


def test_parquet_keeps_the_dtypes(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path)
    sink.write(STREAM, 1, nullable())
    got = pd.read_parquet(sink.file_for(STREAM, 1))
    pd.testing.assert_frame_equal(got, nullable())
    assert [str(t) for t in got.dtypes] == ["string", "Int64", "Float64", "boolean", "datetime64[ns, UTC]"]


def test_file_sinks_write_an_empty_frame_as_an_empty_file(tmp_path: Path) -> None:
    empty = nullable().iloc[0:0]
    for cls, _ in FILE_SINKS.values():
        cls(tmp_path).write(STREAM, 4, empty)
    assert (tmp_path / "CpuAlerts-batch-000004.jsonl").read_text() == ""
    assert (tmp_path / "CpuAlerts-batch-000004.csv").read_text() == "host,count,p99,hot,at\n"
    got = pd.read_parquet(tmp_path / "CpuAlerts-batch-000004.parquet")
    pd.testing.assert_frame_equal(got, empty)


def test_callback_sink_passes_stream_and_rows() -> None:
    seen: list[tuple[str, int]] = []
    CallbackSink(lambda stream, rows: seen.append((stream, len(rows)))).write(STREAM, 9, alerts("a", "b"))
    assert seen == [(STREAM, 2)]


# --- SQL table ------------------------------------------------------------------------------------------


STORES = ("sqlite", "postgresql", "mysql")


@pytest.fixture(params=STORES)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database on each backend, as a user would write it after ``store:``.

    SQLite is a plain file path; the servers (``tests/servers.py``, skipped without them) get SQLAlchemy
    URLs, the form a ``store:`` target takes."""
    if request.param == "sqlite":
        yield str(tmp_path / "sub" / "out.db")
        return
    with fresh_database(request.param) as jdbc_url:
        yield store_target(StoreSpec("rdbms", jdbc_url)).render_as_string(hide_password=False)


@pytest.fixture
def sink(database: str) -> Iterator[StoreTableSink]:
    with StoreTableSink(database, "cpu_alerts") as s:
        yield s


def engine_for(url: str) -> sa.Engine:
    """A plain engine on the database a sink's ``url`` names, to look at what the sink wrote."""
    target = store_target(StoreSpec("sqlite", url))
    if isinstance(target, Path):
        target.parent.mkdir(parents=True, exist_ok=True)
        return sa.create_engine(f"sqlite:///{target}")
    return sa.create_engine(target)


def read_table(
    url: str, table: str = "cpu_alerts", order: tuple[str, ...] = ("_stream", "_batch_id", "host")
) -> list[dict[str, Any]]:
    """All rows of ``table`` as dicts (booleans as bool: MySQL and SQLite give 0/1)."""
    engine = engine_for(url)
    try:
        with engine.connect() as conn:
            t = sa.Table(table, sa.MetaData(), autoload_with=conn)
            rows = conn.execute(sa.select(t).order_by(*(t.c[c] for c in order))).mappings().all()
    finally:
        engine.dispose()
    return [{k: bool(v) if k == "hot" and v is not None else v for k, v in r.items()} for r in rows]


def table_exists(url: str, table: str = "cpu_alerts") -> bool:
    target = store_target(StoreSpec("sqlite", url))
    if isinstance(target, Path) and not target.exists():
        return False
    engine = engine_for(url)
    try:
        with engine.connect() as conn:
            return sa.inspect(conn).has_table(table)
    finally:
        engine.dispose()


def type_kind(t: sa.types.TypeEngine[Any]) -> str:
    kinds = (("bool", sa.Boolean), ("int", sa.Integer), ("float", sa.Float), ("text", sa.String), ("time", sa.DateTime))
    return next(kind for kind, cls in kinds if isinstance(t, cls))


def rows_of(frame: pd.DataFrame, stream: str, batch_id: int) -> list[dict[str, Any]]:
    return [{**r, STREAM_COLUMN: stream, BATCH_COLUMN: batch_id} for r in frame.to_dict("records")]


def test_store_table_appends_batches(sink: StoreTableSink, database: str) -> None:
    sink.write(STREAM, 1, alerts("a", "b"))
    sink.write(STREAM, 2, alerts("c", start=5))
    assert read_table(database) == rows_of(alerts("a", "b"), STREAM, 1) + rows_of(alerts("c", start=5), STREAM, 2)


def test_store_table_replayed_batch_replaces_its_rows(sink: StoreTableSink, database: str) -> None:
    sink.write(STREAM, 1, alerts("a"))
    sink.write(STREAM, 2, alerts("b", "c"))
    sink.write("Other", 2, alerts("z"))  # another stream's batch 2 is left alone
    sink.write(STREAM, 2, alerts("b", "c"))
    assert read_table(database) == (
        rows_of(alerts("a"), STREAM, 1) + rows_of(alerts("b", "c"), STREAM, 2) + rows_of(alerts("z"), "Other", 2)
    )
    # A replay that answers differently (the store moved on meanwhile) replaces, never adds.
    sink.write(STREAM, 2, alerts("d", start=9))
    assert read_table(database) == (
        rows_of(alerts("a"), STREAM, 1) + rows_of(alerts("d", start=9), STREAM, 2) + rows_of(alerts("z"), "Other", 2)
    )


def test_store_table_replay_from_a_new_sink(database: str) -> None:
    """A restarted process (a new sink on the existing table) still replaces the batch's rows."""
    with StoreTableSink(database, "cpu_alerts") as first:
        first.write(STREAM, 3, alerts("a", "b"))
    with StoreTableSink(database, "cpu_alerts") as second:
        second.write(STREAM, 3, alerts("a", "b"))
    assert read_table(database) == rows_of(alerts("a", "b"), STREAM, 3)


def test_store_table_nullable_columns(sink: StoreTableSink, database: str) -> None:
    sink.write(STREAM, 1, nullable())
    got = read_table(database, order=("count",))
    by_host = {r["host"]: r for r in got}
    assert by_host["a"] == {
        "host": "a",
        "count": 1,
        "p99": 0.25,
        "hot": True,
        "at": datetime(2024, 1, 30, 10, 0, 0, 123456),
        STREAM_COLUMN: STREAM,
        BATCH_COLUMN: 1,
    }
    assert by_host[None] == {
        "host": None,
        "count": None,
        "p99": 1.5,
        "hot": None,
        "at": None,
        STREAM_COLUMN: STREAM,
        BATCH_COLUMN: 1,
    }
    assert by_host["c"]["p99"] is None and by_host["c"]["hot"] is False


def test_store_table_column_types(sink: StoreTableSink, database: str) -> None:
    sink.write(STREAM, 1, nullable().assign(load=[1.0, 2.0, float("nan")], n=[1, 2, 3]))
    engine = engine_for(database)
    with engine.connect() as conn:
        types = {c["name"]: c["type"] for c in sa.inspect(conn).get_columns("cpu_alerts")}
    engine.dispose()
    assert list(types) == ["host", "count", "p99", "hot", "at", "load", "n", STREAM_COLUMN, BATCH_COLUMN]
    kinds = {name: type_kind(t) for name, t in types.items()}
    hot = "int" if sink.url.startswith("mysql") else "bool"  # MySQL's BOOLEAN is TINYINT(1)
    assert kinds == {
        "host": "text",
        "count": "int",
        "p99": "float",
        "hot": hot,
        "at": "time",
        "load": "float",
        "n": "int",
        STREAM_COLUMN: "text",
        BATCH_COLUMN: "int",
    }
    assert read_table(database, order=("n",))[2]["load"] is None  # NaN is stored as NULL


def test_store_table_empty_frame_writes_nothing(sink: StoreTableSink, database: str) -> None:
    sink.write(STREAM, 1, alerts())
    assert not table_exists(database)  # no table from a frame without rows
    sink.write(STREAM, 1, alerts("a"))
    sink.write(STREAM, 2, alerts("b"))
    sink.write(STREAM, 2, alerts())  # a replay with no rows removes the earlier attempt's rows
    assert read_table(database) == rows_of(alerts("a"), STREAM, 1)


def test_store_table_with_other_columns_is_refused(sink: StoreTableSink, database: str) -> None:
    sink.write(STREAM, 1, alerts("a"))
    with StoreTableSink(database, "cpu_alerts") as other:
        bad = alerts("b").drop(columns=["hot"]).assign(zone="eu")
        with pytest.raises(
            StoreError,
            match=r"cpu_alerts .* the rows have zone, which the table lacks; "
            r"the table has hot, which the rows lack",
        ):
            other.write(STREAM, 2, bad)
    assert read_table(database) == rows_of(alerts("a"), STREAM, 1)


def test_store_table_made_elsewhere_is_refused(database: str) -> None:
    engine = engine_for(database)
    md = sa.MetaData()
    sa.Table("cpu_alerts", md, sa.Column("host", sa.String(50)), sa.Column("load", sa.Float))
    md.create_all(engine)
    engine.dispose()
    with StoreTableSink(database, "cpu_alerts") as s, pytest.raises(StoreError) as e:
        s.write(STREAM, 1, alerts("a"))
    assert "output table cpu_alerts" in str(e.value)
    assert "the rows have count, hot, which the table lacks" in str(e.value)
    assert "the table lacks _stream, _batch_id" in str(e.value)


def test_store_table_refuses_its_own_columns_and_unknown_dtypes(tmp_path: Path) -> None:
    with StoreTableSink(tmp_path / "x.db", "t") as s:
        with pytest.raises(StoreError, match="has a column '_batch_id', which output table t keeps for itself"):
            s.write(STREAM, 1, alerts("a").assign(_batch_id=1))
        with pytest.raises(StoreError, match=r"column 'span' has dtype timedelta64\[ns\]"):
            s.write(STREAM, 1, alerts("a").assign(span=pd.to_timedelta([1], unit="s")))
        with pytest.raises(StoreError, match="column 'mixed' has dtype object holding mixed-integer values"):
            s.write(STREAM, 1, alerts("a", "b").assign(mixed=[1, "x"]))


def test_store_table_object_columns_by_their_values(tmp_path: Path) -> None:
    """Frames built from Python lists with None keep object dtypes; their values decide the type."""
    frame = pd.DataFrame({"host": ["a", None], "count": [1, None], "hot": [True, None]}, dtype=object)
    with StoreTableSink(f"sqlite:///{tmp_path / 'x.db'}", "t") as s:
        s.write(STREAM, 1, frame)
    got = read_table(f"sqlite:///{tmp_path / 'x.db'}", "t", order=("_batch_id",))
    assert [(r["host"], r["count"]) for r in got] == [("a", 1), (None, None)]


def test_store_table_bad_urls(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown database 'mongodb'"):
        StoreTableSink("mongodb://u:secret@h/db", "t")
    with pytest.raises(UsageError, match="must be a plain name") as e:
        StoreTableSink(tmp_path / "x.db", "public.t")
    with pytest.raises(UsageError, match="must name one database") as e:
        StoreTableSink("postgresql+psycopg://u:secret@h:5432/", "t")
    assert "secret" not in str(e.value)


# --- targets --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "cls", "path"),
    [
        ("out/alerts", JsonLinesSink, "out/alerts"),
        ("jsonl:out/alerts", JsonLinesSink, "out/alerts"),
        ("JSONL:/tmp/a:b", JsonLinesSink, "/tmp/a:b"),
        ("./odd:name", JsonLinesSink, "odd:name"),
        ("csv:out/alerts", CsvSink, "out/alerts"),
        ("parquet:/data/alerts", ParquetSink, "/data/alerts"),
    ],
)
def test_sink_for_files(target: str, cls: type, path: str) -> None:
    sink = sink_for(target)
    assert type(sink) is cls
    assert sink.path == Path(path)


def test_sink_for_console() -> None:
    assert isinstance(sink_for("console"), ConsoleSink)


@pytest.mark.parametrize(
    ("target", "url", "table"),
    [
        ("store:{tmp}/x.db#t", "sqlite:///{tmp}/x.db", "t"),
        ("store:sqlite:///{tmp}/x.db#alerts", "sqlite:///{tmp}/x.db", "alerts"),
        (
            "store:postgresql+psycopg://u:p@127.0.0.1:5432/db#cpu_alerts",
            "postgresql+psycopg://u:***@127.0.0.1:5432/db",
            "cpu_alerts",
        ),
        ("store:mysql+pymysql://u:p%23w@h/db#cpu_alerts", "mysql+pymysql://u:***@h:3306/db", "cpu_alerts"),
        ("store:jdbc:mariadb://h/db?user=u#cpu_alerts", "mariadb+pymysql://u@h:3306/db", "cpu_alerts"),
    ],
)
def test_sink_for_store(target: str, url: str, table: str, tmp_path: Path) -> None:
    """Nothing connects yet: a server that is not running is only found on the first write."""
    sink = sink_for(target.format(tmp=tmp_path))
    assert isinstance(sink, StoreTableSink)
    assert (sink.url, sink.table_name) == (url.format(tmp=tmp_path.resolve()), table)
    sink.close()


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("json:out", "output target 'json:out': unknown kind 'json:' — did you mean 'jsonl'?"),
        ("s3a://bucket/out", "unknown kind 's3a:'"),
        ("", "output target '': it is empty"),
        ("csv:", "csv: needs a directory"),
        ("store:/tmp/x.db", "store: needs a database and a table"),
        ("store:#t", "store: needs a database and a table"),
        ("store:/tmp/x.db#", "store: needs a database and a table"),
    ],
)
def test_sink_for_errors(target: str, message: str) -> None:
    with pytest.raises(UsageError) as e:
        sink_for(target)
    assert message in str(e.value)
    assert "expected one of: console, PATH or jsonl:PATH, csv:PATH, parquet:PATH, store:URL#TABLE" in str(e.value)


def test_sink_for_errors_hide_passwords() -> None:
    with pytest.raises(UsageError) as e:
        sink_for("stor:postgresql+psycopg://u:secret@h/db#t")
    assert "secret" not in str(e.value) and "u:***@h" in str(e.value)
    with pytest.raises(UsageError) as e:
        sink_for("store:mongodb://u:secret@h/db#t")
    assert "secret" not in str(e.value)
    with pytest.raises(UsageError) as e:  # a JDBC password option, and a URL the store refuses
        sink_for("store:jdbc:postgresql://h/?user=u&password=secret#t")
    assert "secret" not in str(e.value) and "password=***" in str(e.value) and "one database" in str(e.value)
    with pytest.raises(UsageError) as e:
        sink_for("store:jdbc:mysql://u:secret@h/db")
    assert "secret" not in str(e.value) and "u:***@h" in str(e.value)
