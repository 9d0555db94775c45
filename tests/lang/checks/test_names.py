"""Names an app may not give (``lang.checks.names``): its lists agree with the store and the engine, the
limits are exact, and a spec built in Python is checked like a text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tiltframe.aggregates import layout
from tiltframe.errors import DefinitionError
from tiltframe.lang import builder as b
from tiltframe.lang import parse_app
from tiltframe.lang.checks.names import INTERNAL_PREFIXES, internal

ROOT = Path(__file__).resolve().parents[3]
STREAM = "define stream S (sym string, v double, ts long);\n"


def test_store_names_agree_with_the_store() -> None:
    """``validate`` checks the names the store makes; the store defines them in its own modules."""
    from tiltframe.store import schema, views
    from tiltframe.store.dialects.mysql import MysqlDialect
    from tiltframe.store.dialects.postgresql import PostgresqlDialect
    from tiltframe.store.lifecycle import table_migrations as table_changes

    assert set(layout.BOOKKEEPING_TABLES) == {schema.AGGREGATIONS, schema.BATCHES, schema.REJECTED, schema.PURGES,
                                              schema.TABLES, schema.DEFINITIONS, schema.SKIPPED_VALUES}
    assert {t.name for t in schema.SHARED.sorted_tables} == set(layout.BOOKKEEPING_TABLES)
    assert layout.VIEW_SUFFIX == views.VIEW_SUFFIX
    assert layout.ASIDE_SUFFIX == table_changes.ASIDE_SUFFIX
    servers = (MysqlDialect, PostgresqlDialect)  # the longest name each takes; SQLite takes any
    assert min(d.max_identifier_length for d in servers) == layout.MAX_IDENTIFIER_BYTES


ENGINE_FILES = ("engine/events/typed.py", "engine/events/arrival.py", "engine/rollup/partials.py",
                "engine/inputs/file_reads.py", "engine/events/derived.py", "store/reads/pandas_merges.py")


@pytest.mark.parametrize("path", ENGINE_FILES)
def test_every_working_column_of_the_engine_is_reserved(path: str) -> None:
    """A stream attribute named like a column the engine adds to the events would be overwritten or make
    a reference ambiguous: every such name in these modules must be one ``validate`` refuses."""
    source = (ROOT / "tiltframe" / path).read_text(encoding="utf-8")
    names = set(re.findall(r"""f?["'](_[a-z][a-z_]*)""", source))
    assert names, path
    for name in names:
        assert internal(name) or name.startswith(INTERNAL_PREFIXES), (path, name)


def test_names_right_at_the_limit_are_accepted() -> None:
    """63 bytes fit: a 49-character aggregation (``_SECONDS_FINAL``), a 57-character avg alias (``_COUNT``)."""
    name, alias = "A" * 49, "a" * 57
    parse_app(STREAM + f"define aggregation {name} from S select avg(v) as {alias} aggregate by ts every sec;")
    with pytest.raises(DefinitionError, match="64 characters"):
        parse_app(STREAM + f"define aggregation {name}x from S select avg(v) as {alias} aggregate by ts every sec;")


def test_limit_of_a_multiple_counts_its_longer_table_names() -> None:
    """``every 10 sec`` makes ``<Name>_10_SECONDS_FINAL``, three characters longer."""
    with pytest.raises(DefinitionError, match="at most 46 characters"):
        parse_app(STREAM + f"define aggregation {'A' * 49} from S select sum(v) as t aggregate by ts every 10 sec;")


def test_a_spec_built_in_python_is_checked_too() -> None:
    stream = b.stream("S", sym="string", v="double", ts="long")
    first = b.aggregation("T", source="S", select=b.sum("v").as_("total"), every="10 sec", by="ts")
    second = b.aggregation("T_10", source="S", select=b.sum("v").as_("total"), every="sec", by="ts")
    with pytest.raises(DefinitionError, match="table T_10_SECONDS, which is also the table T_10_SECONDS of "
                                              "aggregation T for its 'every 10 sec' level"):
        b.app(stream, first, second)
    clash = b.aggregation("A", source="S", select=[b.sum("v").as_("total"), b.max("v").as_("Total")], every="sec")
    with pytest.raises(DefinitionError, match="alias 'Total' differs only in case from alias 'total'"):
        b.app(stream, clash)


def test_names_are_plain_identifiers_in_a_python_built_spec() -> None:
    stream = b.stream("S", [("my price", "double")])
    with pytest.raises(DefinitionError, match="attribute 'my price' of stream S must be a plain identifier"):
        b.app(stream)


def test_a_bookkeeping_table_is_never_an_aggregations() -> None:
    """No granularity ends in a bookkeeping table's suffix today; the check stands guard for new ones."""
    from tiltframe.lang.checks.names import _table_names
    from tiltframe.model.durations import Granularity, Unit

    agg = parse_app(STREAM + "define aggregation TILTFRAME from S select sum(v) as t aggregate every sec;")
    real = agg.aggregations[0]
    fake = Granularity(Unit.SECONDS)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(layout, "table_name", lambda name, g: "tiltframe_batches")
        with pytest.raises(DefinitionError, match=r"bookkeeping table TILTFRAME_BATCHES.*rename aggregation"):
            _table_names([real])
    assert layout.table_name("X", fake) == "X_SECONDS"
