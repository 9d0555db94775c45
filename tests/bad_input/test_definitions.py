"""Bad definitions: each kind is refused by ``validate`` (``tf.load_app`` and ``check_runnable``, as
``tiltframe validate`` runs them) with a message naming the problem and what to change, at the line and
column of the offending part; none reaches the first batch.

Kinds that must keep working (Siddhi's harmless annotations, names right at the stores' limits) run on
every store; a property test throws random apps at ``validate`` and Spark: each is refused with a
position, or runs its first batch without an error.
"""

from __future__ import annotations

import json
import string
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import tiltframe as tf
from tests.bad_input.harness import run
from tiltframe.errors import DefinitionError
from tiltframe.lang.checks.cross_references import check_runnable

STREAM = "define stream S (sym string, v double, n long, ts long);\n"
AGG = "define aggregation A from S select sum(v) as total aggregate by ts every sec;\n"


def refusal(text: str) -> DefinitionError:
    """The error ``tiltframe validate`` reports for ``text`` (fails the test when there is none)."""
    with pytest.raises(DefinitionError) as caught:
        check_runnable(tf.load_app(text))
    return caught.value


def at(text: str, needle: str, nth: int = 1) -> tuple[int, int]:
    """Line and column (1-based) of the ``nth`` occurrence of ``needle`` in ``text``."""
    index = -1
    for _ in range(nth):
        index = text.index(needle, index + 1)
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def assert_refused(text: str, needle: str, *fragments: str, nth: int = 1, snippet: bool = True) -> DefinitionError:
    """Refused at the ``nth`` ``needle`` of ``text``, each fragment in the message; the text's line with a
    caret under the column is shown (``snippet``; not by ``check_runnable``, which sees no text)."""
    error = refusal(text)
    assert (error.line, error.column) == at(text, needle, nth), str(error)
    for fragment in fragments:
        assert fragment in error.message, error.message
    if snippet:
        assert error.snippet is not None and "^" in error.snippet, str(error)
    return error


# --- annotations: closed vocabularies ----------------------------------------------------------------------


def test_misspelled_annotation() -> None:
    text = STREAM + "@purg(enable='false')\n" + AGG
    assert_refused(text, "@purg", "unknown annotation @purg on define aggregation A", "did you mean '@purge'?")


def test_misspelled_element_leaves_no_policy_silently_off() -> None:
    """``@purge(enabled='false')`` used to be accepted and purging stayed on (Siddhi spells it ``enable``)."""
    text = STREAM + "@purge(enabled='false')\n" + AGG
    assert_refused(text, "enabled=", "unknown element 'enabled' of @purge", "did you mean 'enable'?")


def test_misspelled_store_element() -> None:
    text = STREAM + "@store(type='rdbms', jdbc.url='jdbc:sqlite:x.db', username='u', pasword='p')\n" + AGG
    assert_refused(text, "pasword", "unknown element 'pasword' of @store", "did you mean 'password'?")


def test_unknown_option_value() -> None:
    text = STREAM + "@store(type='rdbm', jdbc.url='jdbc:sqlite:x.db')\n" + AGG
    assert_refused(text, "type=", "unknown store type 'rdbm'", "did you mean 'rdbms'?")


def test_store_type_not_supported_yet_points_at_the_annotation() -> None:
    text = STREAM + "@store(type='mongodb', jdbc.url='mongodb://h/db')\n" + AGG
    assert_refused(text, "@store", "@store(type='mongodb') is not supported yet", snippet=False)


def test_flag_that_is_neither_true_nor_false() -> None:
    text = STREAM + "@PartitionById(enable='yes')\n" + AGG
    assert_refused(text, "@PartitionById", "@PartitionById takes 'true' or 'false', got 'yes'")


def test_element_given_twice() -> None:
    text = STREAM + "@purge(enable='true', interval='1 hour', enable='false')\n" + AGG
    assert_refused(text, "enable=", "element 'enable' is given twice in @purge", nth=2)


def test_misspelled_nested_annotation() -> None:
    text = STREAM + "@purge(enable='true', @retentionPeriods(sec='120 sec'))\n" + AGG
    assert_refused(text, "@retentionPeriods", "@purge takes only a nested @retentionPeriod",
                   "did you mean '@retentionPeriod'?")


def test_misspelled_retention_duration() -> None:
    text = STREAM + "@retentionPeriod(sec='120 sec', hors='2 days')\n" + AGG.replace("every sec", "every sec ... hour")
    assert_refused(text, "hors", "unknown element 'hors' of @retentionPeriod", "did you mean 'hours'?")


def test_named_element_of_an_annotation_that_takes_a_value() -> None:
    text = STREAM + "@BufferSize(size='3')\n" + AGG
    assert_refused(text, "size=", "unknown element 'size' of @BufferSize", "as in @BufferSize('3')")


def test_annotation_in_the_wrong_place() -> None:
    text = STREAM + "@preaggregate(workers='2')\n" + AGG
    assert_refused(text, "@preaggregate", "@preaggregate belongs on a define table, not on define aggregation A")


def test_misspelled_annotation_on_a_stream_and_a_query() -> None:
    text = "@sourc(type='http')\n" + STREAM + AGG
    assert_refused(text, "@sourc", "unknown annotation @sourc on define stream S", "did you mean '@source'?")
    text = STREAM + AGG + "@info(nam='q')\nfrom A within 0L, 1L per 'seconds' select total;"
    assert_refused(text, "nam=", "unknown element 'nam' of @info", "did you mean 'name'?")


def test_misspelled_app_annotation() -> None:
    text = "@app:nme('Trades')\n" + STREAM + AGG
    assert_refused(text, "@app:nme", "unknown annotation @app:nme on the app", "did you mean '@app:name'?")


# --- table names ---------------------------------------------------------------------------------------------


def test_two_aggregations_writing_one_table() -> None:
    """``T every 10 sec`` and ``T_10 every sec`` both make ``T_10_SECONDS`` (Siddhi's naming is kept)."""
    text = (STREAM + "define aggregation T from S select sum(v) as total aggregate by ts every 10 sec;\n"
            "define aggregation T_10 from S select sum(v) as total aggregate by ts every sec;\n")
    error = assert_refused(text, "define aggregation T_10", "table T_10_SECONDS", "aggregation T_10",
                           "aggregation T (line 2, column 1)", "'every 10 sec'")
    assert "rename one of the two" in error.message


def test_tables_differing_only_in_case() -> None:
    text = (STREAM + "define aggregation Trades from S select sum(v) as total aggregate by ts every sec;\n"
            "define aggregation TRADES from S select sum(v) as total aggregate by ts every sec;\n")
    assert_refused(text, "define aggregation TRADES", "table TRADES_SECONDS", "table Trades_SECONDS of aggregation "
                   "Trades", "compare case-insensitively")


def test_pre_aggregated_table_writing_an_aggregations_table() -> None:
    text = (STREAM + "define aggregation T from S select sum(v) as total aggregate by ts every 10 sec;\n"
            "define table T_10 (time long, x double) preaggregate by time every sec measures sum(x) as s;\n")
    assert_refused(text, "define table T_10", "table T_10 would store its 'every sec' level in table T_10_SECONDS")


# --- column names ---------------------------------------------------------------------------------------------


def test_attributes_differing_only_in_case() -> None:
    text = "define stream S (Price double, price double, ts long);\n" + AGG.replace("sum(v)", "sum(price)")
    assert_refused(text, "price double", "attribute 'price' of stream S differs from 'Price' only in case")


def test_aliases_differing_only_in_case() -> None:
    text = STREAM + "define aggregation A from S select sum(v) as total, max(v) as TOTAL aggregate by ts every sec;\n"
    assert_refused(text, "max(v)", "alias 'TOTAL' differs only in case from alias 'total'",
                   "choose another alias than 'TOTAL'")


def test_alias_differing_from_a_key_only_in_case() -> None:
    text = STREAM + "define aggregation A from S select sym, sum(v) as SYM group by sym aggregate by ts every sec;\n"
    assert_refused(text, "sum(v) as SYM", "alias 'SYM' differs only in case from group-by attribute 'sym'")


def test_key_named_like_a_state_column() -> None:
    text = ("define stream S (total_SUM string, v double, ts long);\n"
            "define aggregation A from S select total_SUM, sum(v) as total group by total_SUM "
            "aggregate by ts every sec;\n")
    assert_refused(text, "sum(v) as total", "state column 'total_SUM' of sum(...) as total has the same name as "
                   "group-by attribute 'total_SUM'", "choose another alias than 'total'")


@pytest.mark.parametrize("key", ["AGG_COUNT", "agg_timestamp", "SHARD_ID", "Agg_Event_Timestamp", "shard_id"])
def test_key_named_like_one_of_tiltframes_columns(key: str) -> None:
    """Refused even when not selected (its column is in the tables all the same), and ``SHARD_ID`` even
    without ``@PartitionById``: the deployment may partition every aggregation by default."""
    text = (f"define stream S ({key} string, v double, ts long);\n"
            f"define aggregation A from S select sum(v) as total group by {key} aggregate by ts every sec;\n")
    assert_refused(text, f"{key} aggregate", f"group-by attribute '{key}'", f"tiltframe's own column {key.upper()}",
                   f"rename attribute '{key}' in stream S")


def test_selected_key_named_like_one_of_tiltframes_columns() -> None:
    text = ("define stream S (AGG_COUNT string, v double, ts long);\n"
            "define aggregation A from S select AGG_COUNT, sum(v) as total group by AGG_COUNT aggregate every sec;\n")
    assert_refused(text, "AGG_COUNT, sum", "'AGG_COUNT' starts with AGG_, which is reserved for tiltframe's columns")


def test_aggregation_name_too_long_for_postgresql() -> None:
    """``<Name>_SECONDS_FINAL`` (the view) must fit in 63 bytes: a 50-character name makes 64."""
    name = "Trades" + "x" * 44
    text = STREAM + AGG.replace("aggregation A", f"aggregation {name}")
    assert_refused(text, "define aggregation", f"makes the name {name}_SECONDS_FINAL (64 characters)",
                   f"shorten the name of aggregation {name} to at most 49 characters")


def test_alias_too_long_for_postgresql() -> None:
    """``avg(v) as <alias>`` stores ``<alias>_COUNT``: 58 characters make a 64-character column."""
    alias = "a" * 58
    text = STREAM + f"define aggregation A from S select avg(v) as {alias} aggregate by ts every sec;\n"
    assert_refused(text, "avg(v)", f"state column '{alias}_COUNT'", "64 characters",
                   "PostgreSQL takes at most 63 bytes", "at most 57 characters")


def test_key_too_long_for_postgresql() -> None:
    key = "k" * 64
    text = (f"define stream S ({key} string, v double, ts long);\n"
            f"define aggregation A from S select {key}, sum(v) as total group by {key} aggregate by ts every sec;\n")
    assert_refused(text, f"{key} aggregate", f"group-by attribute '{key}'", "at most 63 characters")


@pytest.mark.parametrize("name", ["_tiltframe_level", "_reject_reason", "_REJECT_Field", "_event_ts", "_group"])
def test_attribute_named_like_an_engine_column(name: str) -> None:
    text = f"define stream S ({name} string, v double, ts long);\n" + AGG
    assert_refused(text, name, f"attribute '{name}' of stream S takes a name tiltframe keeps for its working columns")


# --- kinds that keep working -----------------------------------------------------------------------------------

LONGEST = "L" * 49  # + _SECONDS_FINAL: 63 characters, PostgreSQL's limit
ACCEPTED = f"""@app:name('Trades')
@app:description('Siddhi annotations tiltframe accepts and ignores')
@Source(type='http', receiver.url='http://0.0.0.0:8080/s', @map(type='json'))
@sink(type='log')
define stream S (sym string, {"k" * 63} string, v double, ts long);

@PURGE(Enable='false')
@store(type='rdbms', jdbc.url='jdbc:sqlite:unused.db', "com.mysql.jdbc.Driver")
define aggregation {LONGEST}
from S
select sym, {"k" * 63}, avg(v) as {"a" * 57}, sum(v) as total
group by sym, {"k" * 63}
aggregate by ts every sec;

@info(name='totals')
from {LONGEST} within 0L, 9999999999999L per 'seconds' select sym, total;
"""


@pytest.mark.slow
def test_siddhi_annotations_and_names_at_the_limit_run_on_every_store(
    spark: object, tmp_path: Path, store: str | None
) -> None:
    """What ``validate`` accepts runs: ignored Siddhi annotations, annotation names in any case, and a view,
    a key and a state column of exactly 63 characters on PostgreSQL, MySQL/MariaDB and SQLite."""
    text = ACCEPTED
    if store is None:
        text = text.replace("@store(type='rdbms', jdbc.url='jdbc:sqlite:unused.db', \"com.mysql.jdbc.Driver\")\n", "")
    else:
        text = text.replace("jdbc:sqlite:unused.db", store)
    inbox = tmp_path / "in"
    inbox.mkdir()
    events = [{"sym": "a", "k" * 63: "x", "v": float(i), "ts": 1_704_067_200_000 + 300 * i} for i in range(8)]
    (inbox / "a.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    out = run(spark, text, {"S": inbox}, tmp_path / "data")
    assert out.totals[LONGEST].events_aggregated == 8
    assert out.app.aggregations[0].purge is not None and not out.app.aggregations[0].purge.enable
    got = out.query(f"from {LONGEST} within 0L, 9999999999999L per 'seconds' select sym, total, {'a' * 57}")
    assert got["total"].sum() == sum(e["v"] for e in events)


@pytest.mark.slow
def test_count_over_strings_only(spark: object, tmp_path: Path) -> None:
    """A valid app that reads no attribute (count the clicks per second) of an all-string JSON stream runs
    (Spark refuses a scan of the corrupt-record column alone; the typing keeps a data column)."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "a.jsonl").write_text("".join(json.dumps({"url": f"/p{i}"}) + "\n" for i in range(5)))
    text = "define stream S (url string);\ndefine aggregation Clicks from S select count() as n aggregate every sec;\n"
    out = run(spark, text, {"S": inbox}, tmp_path / "data")
    assert out.totals["Clicks"].events_aggregated == 5


# --- property: refused with a position, or the first batch runs -----------------------------------------------

_KEYWORDS = ["select", "from", "group", "by", "every", "as", "order", "limit", "sum", "count", "table", "events"]
_BASE = st.text(string.ascii_letters + "_", min_size=1, max_size=3).map(lambda s: s if s[0] != "_" else "a" + s)
_AWKWARD = st.sampled_from(
    ["price", "Price", "PRICE", "total_SUM", "AGG_COUNT", "agg_timestamp", "SHARD_ID", "_tiltframe_x", "_reject_x",
     "_group", "x" * 63, "y" * 64, *_KEYWORDS]
)
_NAMES = st.one_of(_BASE, _AWKWARD)
_TYPES = st.sampled_from(["string", "int", "long", "double", "float", "bool"])
_FUNCTIONS = st.sampled_from(["sum", "count", "avg", "min", "max", "stdDev", "distinctCount", "first", "last"])
_EVERY = st.sampled_from(["sec", "sec ... min", "10 sec", "10 sec, min", "min, hour", "sec ... day", "5 sec, 30 sec"])
_AGG_NAMES = st.one_of(st.sampled_from(["T", "T_10", "t", "A", "A" * 50]), _BASE)


@st.composite
def apps(draw: st.DrawFn) -> tuple[str, list[tuple[str, str]]]:
    """An app of one stream (random attributes) and one or two aggregations over it."""
    attrs = draw(st.lists(st.tuples(_NAMES, _TYPES), min_size=1, max_size=4, unique_by=lambda a: a[0]))
    if draw(st.booleans()) and all(n != "ts" for n, _ in attrs):
        attrs.append(("ts", "long"))
    numeric = [n for n, t in attrs if t in ("int", "long", "double", "float")] or [attrs[0][0]]
    columns = ", ".join(f"{n} {t}" for n, t in attrs)
    definitions = []
    for name in draw(st.lists(_AGG_NAMES, min_size=1, max_size=2, unique=True)):
        keys = draw(st.lists(st.sampled_from([n for n, _ in attrs]), max_size=2, unique=True))
        items = list(keys)
        if draw(st.booleans()):  # the latest event's value
            items.append(f"{draw(st.sampled_from([n for n, _ in attrs]))} as {draw(_NAMES)}")
        for _ in range(draw(st.integers(1, 3))):
            fn = draw(_FUNCTIONS)
            args = numeric if fn in ("sum", "avg", "stdDev") else [n for n, _ in attrs]
            arg = "" if fn == "count" else draw(st.sampled_from(args))
            items.append(f"{fn}({arg}) as {draw(_NAMES)}")
        group = f" group by {', '.join(keys)}" if keys else ""
        by = " by ts" if ("ts", "long") in attrs and draw(st.booleans()) else ""
        definitions.append(f"define aggregation {name} from S select {', '.join(items)}{group} "
                           f"aggregate{by} every {draw(_EVERY)};")
    return f"define stream S ({columns});\n" + "\n".join(definitions) + "\n", attrs


def _value(kind: str, i: int) -> object:
    return {"string": f"s{i % 2}", "int": i, "long": 10 * i, "double": i / 4, "float": i / 2,
            "bool": i % 2 == 0}[kind]


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=apps())
def test_random_apps_are_refused_with_a_position_or_run(spark: object, tmp_path: Path, case: tuple) -> None:
    text, attrs = case
    try:
        app = tf.load_app(text)
        check_runnable(app)
    except DefinitionError as exc:
        assert exc.line is not None and exc.column is not None, f"{exc}\n{text}"
        return
    note(text)
    folder = tmp_path / uuid.uuid4().hex  # one per example: hypothesis reuses the test's tmp_path
    inbox = folder / "in"
    inbox.mkdir(parents=True)
    rows = [{name: (1_704_067_200_000 + 700 * i if name == "ts" else _value(kind, i)) for name, kind in attrs}
            for i in range(6)]
    (inbox / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = tf.run(app, {"S": inbox}, data_dir=folder / "data", spark=spark)
    for name, totals in result.aggregations.items():
        assert totals.events_read == 6, (name, text)
        assert totals.events_read == totals.events_aggregated + totals.events_moved + totals.events_rejected
