"""Generated inputs for the property tests of ``test_properties.py``: events as real sources write them,
their cut into files of one format, and the pandas oracle over the events as generated.

An event is generated as what it *means* (a key, a value, a long, an instant in epoch ms, or a reason to be
rejected) together with how it is *written* (the event time as epoch ms, ISO-8601 with an offset and a
fraction, Siddhi's ``yyyy-MM-dd HH:mm:ss``; a NaN as ``"NaN"``; a long as ``12.0``).  The oracle reads only
the meaning, so it shares nothing with the engine's parsers.
"""

from __future__ import annotations

import csv
import io
import json
import os
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

#: The app the properties run: every aggregate that skips a missing value, and count(), which does not.
APP = """
define stream S (k string, v double, n long, ts {ts_type});
define aggregation A from S
select k, count() as events, sum(v) as vsum, avg(v) as vavg, min(v) as vmin, max(v) as vmax,
       sum(n) as nsum, max(n) as nmax
group by k
aggregate by ts every sec ... year;
"""
ATTRIBUTES = ("k", "v", "n", "ts")
#: The types the event-time attribute may be declared with; either takes every written form (docs/time.md).
TS_TYPES = ("string", "long")
MEASURES = ("events", "vsum", "vavg", "vmin", "vmax", "nsum", "nmax")
UNITS = ("seconds", "minutes", "hours", "days", "months", "years")
#: Every bucket of years 0001-9999, as a ``within`` range.
WITHIN = "-62135596800000, 253402300800000"
MIN_MS, MAX_MS = -62_135_596_800_000, 253_402_300_799_999  # 0001-01-01 .. 9999-12-31T23:59:59.999 GMT
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NOW = int(datetime.now(UTC).timestamp())


def ms_of(text: str) -> int:
    """Epoch ms of an ISO text in GMT, written by hand (the oracle uses no parser of the engine)."""
    return (datetime.fromisoformat(text).replace(tzinfo=UTC) - _EPOCH) // timedelta(milliseconds=1)


# --- events ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One event: what it means and how it is written.

    ``key``/``v``/``n``/``ms`` are the meaning (None: missing; ``v`` None also for NaN).  ``*_w`` are the
    values as written (None: null or absent), ``bad`` the field that rejects the event, if any."""

    key: str | None
    v: float | None
    n: int | None
    ms: int | None
    v_w: object
    n_w: object
    ts_w: object
    bad: str | None = None


def rejected_field(key: str | None, v_bad: bool, n_bad: bool, ts_bad: bool) -> str | None:
    """The field the engine names for an event: the first problem in attribute order, the event time
    checked last (docs/bad-input.md); a key holding a NUL character is refused like a missing one."""
    if key is None or "\x00" in key:
        return "k"
    if v_bad:
        return "v"
    if n_bad:
        return "n"
    return "ts" if ts_bad else None


CALENDAR_EDGES = [ms_of(t) for t in (
    "2024-12-31T23:59:59.999", "2023-12-31T23:59:59.999", "2024-02-29T23:59:59.999", "2023-02-28T23:59:59.999",
    "2024-06-30T23:59:59.999", "2024-01-31T23:59:59.999", "2000-02-29T12:00:00", "1900-02-28T23:59:59.999",
    "1969-12-31T23:59:59.999", "1970-01-01T00:00:00", "0001-01-01T00:00:00", "9999-12-31T23:59:59.999",
)]
#: Small and large steps from a calendar edge: across the next millisecond, second, minute, hour, day, month.
_STEPS = st.one_of(
    st.integers(-3, 3),
    st.integers(-3, 3).map(lambda i: i * 1000),
    st.integers(-2_000, 2_000),
    st.integers(-90_000, 90_000),
    st.integers(-2 * 3_600_000, 2 * 3_600_000),
    st.integers(-40 * 86_400_000, 40 * 86_400_000),
)
INSTANTS = st.builds(lambda edge, step: edge + step, st.sampled_from(CALENDAR_EDGES), _STEPS)

#: Offsets as written, and their minutes.
OFFSETS = [("Z", 0), ("z", 0), ("", 0), ("+00:00", 0), ("+05:30", 330), ("+0530", 330), ("-08:00", -480),
           ("-0800", -480), ("+05", 300), ("-02", -120), ("+14:00", 840), ("-12:00", -720), ("+05:45", 345),
           ("-03:30", -210)]


@st.composite
def written_time(draw: st.DrawFn, ms: int) -> object:
    """``ms`` in one of the accepted forms (docs/time.md): an int of epoch ms, its text (spaces around
    it), or a date-time with or without an offset, 'T' or a space, seconds or not, 0-9 fraction digits."""
    form = draw(st.sampled_from(["epoch", "epoch-text", "text", "text", "text", "date"]))
    if form == "epoch":
        return ms
    if form == "epoch-text":
        return draw(st.sampled_from(["", " "])) + str(ms) + draw(st.sampled_from(["", " "]))
    offset, minutes = draw(st.sampled_from(OFFSETS))
    try:
        local = _EPOCH + timedelta(milliseconds=ms + minutes * 60_000)
    except OverflowError:
        return ms
    if not 1 <= local.year <= 9999:
        return ms
    day = f"{local.year:04d}-{local.month:02d}-{local.day:02d}"
    millis = local.microsecond // 1000
    if form == "date" and offset == "" and (local.hour, local.minute, local.second, millis) == (0, 0, 0, 0):
        return day
    digits = draw(st.sampled_from([d for d in range(10) if d >= 3 or millis % 10 ** (3 - d) == 0]))
    fraction = f"{millis:03d}"[:digits] + draw(st.text("0123456789", min_size=max(digits - 3, 0),
                                                        max_size=max(digits - 3, 0)))
    clock = f"{local.hour:02d}:{local.minute:02d}"
    if digits or local.second or draw(st.booleans()):
        clock += f":{local.second:02d}"
        if digits:
            clock += draw(st.sampled_from([".", ","])) + fraction
    between = draw(st.sampled_from(["T", " "]))
    before_offset = draw(st.sampled_from(["", " "])) if offset else ""
    pad = draw(st.sampled_from(["", "", " "]))
    return f"{pad}{day}{between}{clock}{before_offset}{offset}{pad}"


#: Texts that are no event time, and epoch ms outside years 0001-9999.
BAD_TIMES = ["yesterday", "2024-02-30 00:00:00", "2024-01-05 25:00:00", "2024-01-05T10:00:00+24:00", "",
             "2024-13-01", "12:00:00", str(MAX_MS + 1), str(MIN_MS - 1)]

#: Keys real sources hold, many differing only in case, spaces, accents or their Unicode form.
KEYS = st.one_of(
    st.sampled_from(["IBM", "ibm", "Ibm", "IBM ", " IBM", "I,B", 'say "hi"', "IB\nM", "IB\r\nM", "a\rb", "é",
                     "e\u0301", "ß", "SS", "İ", "i", "📈", "日本", "a\\b", "x\ty", "  ", "nul\x00"]),
    st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\x00"), min_size=1,
            max_size=6),
    st.text("aAbB ,\"\n\r\\é", min_size=1, max_size=5),
)


def _variants(key: str) -> list[str]:
    """Keys a store or Spark might take for ``key``: other cases, a trailing or leading space, NFD."""
    return [key, key.upper(), key.lower(), key + " ", " " + key, unicodedata.normalize("NFD", key)]


#: The keys of one example: a few, with variants of one of them, so that near-equal keys meet.
KEY_POOLS = st.tuples(st.lists(KEYS, min_size=1, max_size=4), KEYS.map(_variants)).map(
    lambda p: sorted(set(p[0]) | set(p[1])))

#: Doubles real sources hold: any finite double, negative zero, the smallest and largest magnitudes.
FINITE = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1e300, -1e300, 0.1, 1e15 + 0.5]),
    st.integers(-10**6, 10**6).map(float),
)
#: Longs whose sums over an example stay within 2^53: beyond it a query's long results lose digits when the
#: column holds a NULL too, ``test_long_results_stay_exact_beside_nulls`` (2^56 once that is fixed: sums
#: beyond a long's range stop the run by design).
LONGS = st.one_of(st.integers(-(2**47), 2**47), st.integers(-1000, 1000))


@st.composite
def events(draw: st.DrawFn, keys: Sequence[str], values: st.SearchStrategy[float] = FINITE) -> Event:
    """One event as a source writes it, its key one of ``keys``; rarely a missing key or time, or a value
    that rejects it."""
    key = None if draw(st.integers(0, 24)) == 0 else draw(st.sampled_from(keys))
    # v: a double, null, NaN ("NaN" in text), or a text that is no finite double.
    v_kind = draw(st.sampled_from(["num"] * 14 + ["null", "null", "nan", "nan", "bad"]))
    v = draw(values) if v_kind == "num" else None
    v_w: object = {"num": v, "null": None, "nan": float("nan")}.get(v_kind)
    if v is not None:  # as a double, or as text: spaces around it, a sign, 17 significant digits
        signed = repr(v) if repr(v).startswith("-") else f"+{v!r}"
        v_w = draw(st.sampled_from([v, v, f" {v!r} ", f"{v:.16e}", signed]))
    if v_kind == "nan":
        v_w = draw(st.sampled_from([v_w, "NaN", "nan", "NAN"]))
    if v_kind == "bad":
        v_w = draw(st.sampled_from(["abc", "Infinity", "-Infinity", "1e999"]))
    # n: a long, written as an int, as text with spaces, or as a whole fraction; null; or 1.5 (no long).
    n_kind = draw(st.sampled_from(["num"] * 14 + ["null", "null", "bad"]))
    n = draw(LONGS) if n_kind == "num" else None
    n_w: object = n
    if n is not None and abs(n) < 2**53:
        n_w = draw(st.sampled_from([n, n, f" {n} ", f"{n}.0"]))
    if n_kind == "bad":
        n_w = "1.5"
    # ts: an instant in one of its written forms, missing, or no timestamp.
    ts_kind = draw(st.sampled_from(["ok"] * 24 + ["null", "bad"]))
    ms = draw(INSTANTS) if ts_kind == "ok" else None
    ts_w = draw(written_time(ms)) if ms is not None else None
    if ms is not None and not MIN_MS <= ms <= MAX_MS:
        ts_w, ms, ts_kind = ms, None, "bad"
    if ts_kind == "bad" and ts_w is None:
        ts_w = draw(st.sampled_from(BAD_TIMES))
    bad = rejected_field(key, v_kind == "bad", n_kind == "bad", ts_kind != "ok")
    return Event(key, None if v_kind != "num" else v, n, ms, v_w, n_w, ts_w, bad)


@st.composite
def event_lists(draw: st.DrawFn, max_size: int, values: st.SearchStrategy[float] = FINITE) -> list[Event]:
    """1..``max_size`` events over a pool of keys with near-equal variants."""
    keys = draw(KEY_POOLS)
    size = draw(st.integers(1, max_size))  # as likely many as few (lists favour short ones)
    return draw(st.lists(events(keys, values), min_size=size, max_size=size))


# --- files ---------------------------------------------------------------------------------------------------

#: Characters of file names: Hadoop's pattern characters, escapes, spaces, non-ASCII.
NAME_CHARS = "abcXYZ019 []{}?*\\:%#é-,;=+~!@$&'()日📈"
EXTENSIONS = {"csv": [".csv", ".CSV", ".Csv"], "json": [".jsonl", ".json", ".ndjson", ".JSONL"],
              "parquet": [".parquet", ".PARQUET"]}
#: Modification times: 1970, 2001, 2020, 2033 (seconds since the epoch), two hours and an hour ago, now and
#: a day ahead (seconds from now, within a day); equal times are ties broken by path.
MTIMES = [86_401, 1_000_000_000, 1_600_000_000, 2_000_000_000, -7200, -3600, 0, 86_400]


@dataclass
class FilePlan:
    """One input file: its name, its events in file order and how it is written."""

    name: str
    events: list[Event]
    mtime: int  # seconds since the epoch; within a day of 0: seconds from now
    header: tuple[str, ...] | None = None  # CSV: the header as written, None for none
    line_end: str = "\n"  # CSV
    bom: bool = False  # CSV, JSON: a UTF-8 byte order mark first
    quoted_ints: bool = False  # JSON: whole numbers as strings
    absent_nulls: bool = False  # JSON: a missing value left out rather than null
    bare_nan: bool = False  # JSON: NaN as the bare token NaN, not "NaN"
    time_type: str = "string"  # Parquet: the event time's column type (``_time_type``)
    narrow: bool = False  # Parquet: doubles as float32 and longs as int32 where they fit exactly
    row_group_size: int | None = None  # Parquet

    @property
    def mtime_s(self) -> int:
        """The modification time in seconds since the epoch (``now`` read once per process)."""
        return self.mtime + (_NOW if abs(self.mtime) <= 86_400 else 0)


@dataclass
class Plan:
    """The events cut into files of one format, the files into rounds of runs, and the batch cut."""

    fmt: str
    rounds: list[list[FilePlan]]
    max_files_per_trigger: int | None
    store: str = "sqlite"
    ts_type: str = "string"
    events: list[Event] = field(default_factory=list)

    @property
    def app(self) -> str:
        return APP.format(ts_type=self.ts_type)

    def __repr__(self) -> str:
        return "\n".join(
            [f"format={self.fmt} store={self.store} max_files_per_trigger={self.max_files_per_trigger} "
             f"ts {self.ts_type}"]
            + [f"round {i} file {f.name!r} mtime={f.mtime} header={f.header} bom={f.bom} "
               f"line_end={f.line_end!r} time_type={f.time_type} narrow={f.narrow} events={f.events}"
               for i, files in enumerate(self.rounds) for f in files]
        )


def _readable_name(stem: str) -> bool:
    """Not hidden (Spark's file source leaves names starting with '.' or '_' out, as documented)."""
    return not stem.startswith((".", "_"))


def _names(count: int, fmt: str) -> st.SearchStrategy[list[str]]:
    stem = st.text(NAME_CHARS, min_size=1, max_size=10).filter(_readable_name)
    stems = st.lists(stem, min_size=count, max_size=count, unique=True)  # names may differ in case only
    return st.tuples(stems, st.lists(st.sampled_from(EXTENSIONS[fmt]), min_size=count, max_size=count)).map(
        lambda p: [s + e for s, e in zip(*p, strict=True)])


def _header(draw: st.DrawFn) -> tuple[str, ...] | None:
    if not draw(st.booleans()):
        return None
    order = draw(st.permutations(ATTRIBUTES))
    return tuple(draw(st.sampled_from([a, a.upper(), f" {a}"])) for a in order)


def _time_type(draw: st.DrawFn, fmt: str, cut: Sequence[Event]) -> str:
    """A Parquet file's event-time column type: typed (epoch ms, an instant of some unit and zone, a
    zone-less timestamp) where every time it holds is an instant or null, text otherwise."""
    if fmt != "parquet" or any(e.ms is None and e.ts_w is not None for e in cut):
        return "string"
    types = ["string", "int64", "timestamp_ms_utc", "timestamp_ms_kolkata", "timestamp_us"]
    if all(e.ms is None or abs(e.ms) < 9 * 10**12 for e in cut):  # nanoseconds reach years 1677-2262 only
        types.append("timestamp_ns_utc")
    return draw(st.sampled_from(types))


@st.composite
def plans(draw: st.DrawFn, evs: list[Event], stores: Sequence[str], *, shuffle: bool = True,
          distinct_mtimes: bool = False) -> Plan:
    """``evs`` (in a random order unless not ``shuffle``), cut into 1..6 files (some maybe empty) of one
    format with random names, headers, modification times (``distinct_mtimes``: no two alike), written over
    one or two runs with a random ``max_files_per_trigger``."""
    fmt = draw(st.sampled_from(["csv", "json", "parquet"]))
    order = draw(st.permutations(evs)) if shuffle else list(evs)
    count = draw(st.integers(1, 6))
    mtimes = draw(st.lists(st.sampled_from(MTIMES), min_size=count, max_size=count, unique=distinct_mtimes))
    cuts = sorted(draw(st.lists(st.integers(0, len(order)), min_size=count - 1, max_size=count - 1)))
    bounds = [0, *cuts, len(order)]
    names = draw(_names(count, fmt))
    files = []
    for name, mtime, lo, hi in zip(names, mtimes, bounds[:-1], bounds[1:], strict=True):
        cut = list(order[lo:hi])
        files.append(FilePlan(
            name, cut, mtime,
            header=_header(draw) if fmt == "csv" else None,
            line_end=draw(st.sampled_from(["\n", "\r\n"])), bom=draw(st.integers(0, 4)) == 0,
            quoted_ints=draw(st.booleans()), absent_nulls=draw(st.booleans()), bare_nan=draw(st.booleans()),
            time_type=_time_type(draw, fmt, cut), narrow=draw(st.booleans()),
            row_group_size=draw(st.sampled_from([None, 1, 3])),
        ))
    split = draw(st.integers(1, len(files))) if draw(st.booleans()) else len(files)
    rounds = [files[:split], files[split:]] if split < len(files) else [files]
    return Plan(fmt, rounds, draw(st.sampled_from([None, 1, 2, 3])), draw(st.sampled_from(list(stores))),
                draw(st.sampled_from(TS_TYPES)), list(evs))


def uri_path(name: str) -> str:
    """A file name as Spark's ``_metadata.file_path`` writes it (Java's URI path quoting: ASCII outside
    the URI path characters as ``%XX``, non-ASCII kept), which breaks ties of arrival order."""
    safe = "_-!.~'()*,;:$&+=@/"
    return "".join(c if not c.isascii() or c.isalnum() or c in safe else f"%{ord(c):02X}" for c in name)


def arrival_order(plan: Plan) -> list[Event]:
    """The events as they arrive (docs/late-events.md): run by run; in a run, files by modification time,
    then path; rows in file order."""
    return [e for files in plan.rounds for f in sorted(files, key=lambda f: (f.mtime_s, uri_path(f.name)))
            for e in f.events]


def write_file(folder: Path, plan: FilePlan, fmt: str) -> Path:
    """Write one planned file and set its modification time."""
    path = folder / plan.name
    bom = "\ufeff" if plan.bom else ""
    if fmt == "csv":
        path.write_bytes((bom + _csv_text(plan)).encode("utf-8"))
    elif fmt == "json":
        path.write_bytes((bom + "".join(_json_line(e, plan) + "\n" for e in plan.events)).encode("utf-8"))
    else:
        pq.write_table(_parquet_table(plan), path, row_group_size=plan.row_group_size)
    os.utime(path, (plan.mtime_s, plan.mtime_s))
    return path


def _text(value: object) -> str:
    """A written value as text: null as the empty field, NaN as ``NaN``, a double exactly (repr)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return "NaN" if value != value else repr(value)
    return str(value)


def csv_row(values: Sequence[str], line_end: str) -> str:
    """One row as RFC 4180 writes it: a field holding a CR or a line feed, a comma or a quote is quoted,
    whatever the file's line break.  (Python's csv module before 3.12 leaves a lone CR unquoted in a file of
    line feeds, and ``a\\r`` then ends like a CRLF line: no reader can tell them apart.)"""
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(values)
    return out.getvalue()[:-2] + line_end


def _csv_text(plan: FilePlan) -> str:
    columns = [h.strip().lower() for h in plan.header] if plan.header else list(ATTRIBUTES)
    rows = [plan.header] if plan.header else []
    for e in plan.events:
        written = {"k": e.key, "v": e.v_w, "n": e.n_w, "ts": e.ts_w}
        rows.append([_text(written[c]) for c in columns])
    return "".join(csv_row(row, plan.line_end) for row in rows)


def _json_value(value: object, plan: FilePlan) -> object:
    if isinstance(value, float) and value != value:
        return value if plan.bare_nan else "NaN"
    if isinstance(value, int) and plan.quoted_ints:
        return str(value)
    return value


def _json_line(e: Event, plan: FilePlan) -> str:
    row = {"k": e.key, "v": e.v_w, "n": e.n_w, "ts": e.ts_w}
    row = {c: _json_value(x, plan) for c, x in row.items() if x is not None or not plan.absent_nulls}
    return json.dumps(row, ensure_ascii=plan.quoted_ints)  # either escaping of non-ASCII


def _parquet_table(plan: FilePlan) -> pa.Table:
    evs = plan.events

    def typed_or_text(values: list[object], kind: type, arrow: pa.DataType, narrow: pa.DataType) -> pa.Array:
        if not all(x is None or (isinstance(x, kind) and not isinstance(x, bool)) for x in values):
            return pa.array([None if x is None else _text(x) for x in values], pa.string())
        typed = pa.array(values, arrow)
        if plan.narrow:  # where every value fits exactly
            try:
                narrowed = typed.cast(narrow, safe=True)
            except pa.ArrowInvalid:  # an int beyond int32
                return typed
            back = narrowed.cast(arrow).to_pylist()
            if all(x == y or x != x for x, y in zip(back, typed.to_pylist(), strict=True)):
                return narrowed
        return typed

    def instants(unit: str, per_ms: int, tz: str | None) -> pa.Array:
        values = pa.array([None if e.ms is None else e.ms * per_ms for e in evs], pa.int64())
        return values.cast(pa.timestamp(unit, tz=tz))

    times = {
        "int64": lambda: pa.array([e.ms for e in evs], pa.int64()),
        "timestamp_ms_utc": lambda: instants("ms", 1, "UTC"),
        "timestamp_ms_kolkata": lambda: instants("ms", 1, "Asia/Kolkata"),
        "timestamp_us": lambda: instants("us", 1000, None),
        "timestamp_ns_utc": lambda: instants("ns", 1_000_000, "UTC"),
        "string": lambda: pa.array([None if e.ts_w is None else _text(e.ts_w) for e in evs], pa.string()),
    }[plan.time_type]()
    return pa.table({
        "k": pa.array([e.key for e in evs], pa.string()),
        "v": typed_or_text([e.v_w for e in evs], float, pa.float64(), pa.float32()),
        "n": typed_or_text([e.n_w for e in evs], int, pa.int64(), pa.int32()),
        "ts": times,
    })


# --- the oracle ----------------------------------------------------------------------------------------------


def bucket(ms: int, unit: str) -> int:
    """Start of the GMT bucket of ``unit`` holding ``ms``."""
    fixed = {"seconds": 1000, "minutes": 60_000, "hours": 3_600_000, "days": 86_400_000}
    if unit in fixed:
        return ms // fixed[unit] * fixed[unit]
    t = _EPOCH + timedelta(milliseconds=ms)
    start = t.replace(month=1 if unit == "years" else t.month, day=1, hour=0, minute=0, second=0, microsecond=0)
    return (start - _EPOCH) // timedelta(milliseconds=1)


def oracle(evs: Sequence[Event], unit: str) -> dict[tuple[str, int], dict[str, object]]:
    """Per key and GMT bucket of ``unit``: count() of every aggregated event, the other aggregates over
    the values that are there (null and NaN skipped), None where a bucket has none."""
    good = [e for e in evs if e.bad is None]
    frame = pd.DataFrame({
        "k": [e.key for e in good], "b": [bucket(e.ms, unit) for e in good],  # type: ignore[arg-type]
        "v": pd.array([e.v for e in good], dtype="Float64"), "n": pd.array([e.n for e in good], dtype="Int64"),
    })
    out: dict[tuple[str, int], dict[str, object]] = {}
    for (k, b), g in frame.groupby(["k", "b"], sort=False):
        v, n = g["v"].dropna(), g["n"].dropna()
        out[(k, int(b))] = {
            "events": len(g),
            "vsum": float(v.sum()) if len(v) else None, "vavg": float(v.mean()) if len(v) else None,
            "vmin": float(v.min()) if len(v) else None, "vmax": float(v.max()) if len(v) else None,
            "nsum": sum(int(x) for x in n) if len(n) else None, "nmax": int(n.max()) if len(n) else None,
            "_vabs": float(v.abs().sum()) if len(v) else 0.0,  # the scale of the sum's rounding
        }
    return out
