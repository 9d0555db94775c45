"""TableSpec: the rollup and the stream it compiles to, validation of definitions (text and Python), and
plan_change, the rule that keeps a stored pre-aggregation config consistent with the table's columns."""

from __future__ import annotations

import dataclasses

import pytest

from tests.errors import refused_at
from tests.lang.siddhiql.test_tables_parser import AD_NETWORK, COLUMNS, COLUMNS_TEXT
from tiltframe.aggregates.measures import measure_types
from tiltframe.errors import DefinitionError
from tiltframe.lang.checks.cross_references import validate_app
from tiltframe.lang.checks.table_defs import validate_table
from tiltframe.lang.siddhiql.parser import parse_app
from tiltframe.model.aggregations import AggregateItem, KeyItem
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import Granularity, Unit
from tiltframe.model.expressions import Attr
from tiltframe.model.streams import Attribute, AttrType, StreamDef
from tiltframe.model.table_changes import ConfigChange, plan_change
from tiltframe.model.tables import Measure, Preaggregation, TableSpec


def ad_table() -> TableSpec:
    return parse_app(AD_NETWORK).tables[0]


def python_table(**changes: object) -> TableSpec:
    """The seed's table built in Python; ``changes`` replace fields of its pre-aggregation."""
    pre = Preaggregation(
        granularity=Granularity(Unit.MINUTES),
        dimensions=("site",),
        measures=(
            Measure("count", None, "impressions"),
            Measure("sum", "clicked", "clicks"),
            Measure("avg", "cost", "avgCost"),
        ),
    )
    return TableSpec("AdImpressions", COLUMNS, "time", dataclasses.replace(pre, **changes))  # type: ignore[arg-type]


def refused(clause: str, marker: str, fragment: str, *, columns: str = COLUMNS_TEXT, occurrence: int = 0,
            before: str = "") -> DefinitionError:
    return refused_at(parse_app, f"{before}define table T {columns} {clause};", marker, fragment,
                      occurrence=occurrence)


# --- the compiled rollup --------------------------------------------------------------------------------


def test_as_stream_is_the_tables_rows() -> None:
    stream = ad_table().as_stream()
    assert stream == StreamDef("AdImpressions_ROWS", COLUMNS, event_time="time")


def test_as_aggregation_is_a_rollup_with_one_level() -> None:
    agg = ad_table().as_aggregation()
    assert agg.name == "AdImpressions"
    assert agg.source == "AdImpressions_ROWS"
    assert agg.granularities == (Granularity(Unit.MINUTES),)
    assert agg.group_by == ("site",)
    assert agg.time_attribute == "time"
    assert agg.select == (
        KeyItem("site"),
        AggregateItem("count", None, "impressions"),
        AggregateItem("sum", Attr("clicked"), "clicks"),
        AggregateItem("avg", Attr("cost"), "avgCost"),
        AggregateItem("distinctCount", Attr("user"), "users"),
        AggregateItem("kll", Attr("cost"), "costQ", params=((0.5, 0.99),)),
    )


def test_the_compiled_pair_is_a_valid_app() -> None:
    t = ad_table()
    validate_app(AppSpec(streams=(t.as_stream(),), aggregations=(t.as_aggregation(),)))


def test_a_raw_table_has_no_rollup() -> None:
    raw = parse_app("define table Raw (time long, x int);").tables[0]
    with pytest.raises(DefinitionError, match="table Raw is not pre-aggregated"):
        raw.as_aggregation()
    assert raw.as_stream() == StreamDef("Raw_ROWS", (Attribute("time", AttrType.LONG), Attribute("x", AttrType.INT)))


def test_measure_outputs_and_types() -> None:
    t = ad_table()
    assert measure_types(t) == {
        "impressions": AttrType.LONG,
        "clicks": AttrType.LONG,
        "avgCost": AttrType.DOUBLE,
        "users": AttrType.LONG,
        "costQ_p50": AttrType.DOUBLE,
        "costQ_p99": AttrType.DOUBLE,
    }
    assert t.preaggregation is not None
    assert t.preaggregation.measure("costQ").describe() == "kll(cost, [0.5, 0.99]) as costQ"


def test_python_built_equals_parsed() -> None:
    text = f"define table AdImpressions {COLUMNS_TEXT} preaggregate by time every min dimensions site " \
           "measures count() as impressions, sum(clicked) as clicks, avg(cost) as avgCost;"
    built = python_table()
    assert parse_app(text).tables[0] == built
    assert validate_table(built) is built


# --- validation ---------------------------------------------------------------------------------------------


def test_time_column_must_exist() -> None:
    refused("preaggregate by tme every min measures count() as n", "tme",
            "preaggregate by: unknown column of table T 'tme' — did you mean 'time'?")


@pytest.mark.parametrize("kind", ["string", "int", "double"])
def test_time_column_must_be_long(kind: str) -> None:
    refused("preaggregate by ts every min measures count() as n", "ts",
            f"the time column 'ts' of a pre-aggregated table must be long (epoch milliseconds), got {kind}",
            columns=f"(ts {kind}, x int)", occurrence=1)


def test_dimension_must_exist() -> None:
    refused("preaggregate by time every min dimensions sites measures count() as n", "sites",
            "dimension: unknown column of table T 'sites' — did you mean 'site'?")


def test_time_column_is_not_a_dimension() -> None:
    refused("preaggregate by time every min dimensions site, time measures count() as n", "time",
            "'time' is the time column, which every interval is keyed by already", occurrence=2)


def test_measure_column_must_exist() -> None:
    refused("preaggregate by time every min measures sum(clickd) as c", "sum(clickd)",
            "measure 'c': unknown column of table T 'clickd' — did you mean 'clicked'?")


@pytest.mark.parametrize("function", ["sum", "mean", "min", "delta", "quantiles_approx", "stdDev"])
def test_numeric_functions_need_numeric_columns(function: str) -> None:
    refused(f"preaggregate by time every min measures {function}(site) as m", f"{function}(site)",
            "needs a numeric argument in measure 'm', got string")


@pytest.mark.parametrize("function", ["cardinality_approx", "first", "last"])
def test_other_functions_take_any_column(function: str) -> None:
    text = f"define table T {COLUMNS_TEXT} preaggregate by time every min measures {function}(site) as m;"
    assert parse_app(text).tables[0].preaggregation is not None


def test_unbounded_functions_are_refused() -> None:
    refused("preaggregate by time every min measures group_array(site) as sites", "group_array",
            "group_array() keeps every value, so the partial rows would grow without end")


def test_registry_settings_are_checked() -> None:
    refused("preaggregate by time every min measures quantiles_approx(cost, [1.5]) as q", "[1.5]",
            "a quantile must be a number from 0 to 1, got 1.5")


def test_measures_may_not_take_the_name_of_a_dimension_or_the_time_column() -> None:
    refused("preaggregate by time every min dimensions site measures count() as site", "count()",
            "measure 'site' has the name of a dimension")
    refused("preaggregate by time every min measures count() as time", "count()",
            "measure 'time' has the name of the time column")


def test_measure_names_are_unique_including_quantile_outputs() -> None:
    refused("preaggregate by time every min measures count() as n, sum(clicked) as n", "sum(clicked)",
            "measure 'n' has the name of measure n")
    refused("preaggregate by time every min measures count() as q_p50, kll(cost, [0.5]) as q", "kll",
            "an output of measure 'q_p50' has the name of measure q_p50")


def test_a_measure_may_be_named_like_its_column() -> None:
    text = f"define table T {COLUMNS_TEXT} preaggregate by time every min measures sum(clicked) as clicked;"
    assert measure_types(parse_app(text).tables[0]) == {"clicked": AttrType.LONG}


def test_reserved_names() -> None:
    refused("preaggregate by time every min measures count() as AGG_n", "count()",
            "names starting with AGG_ and SHARD_ID are tiltframe's")
    refused("preaggregate by time every min measures count() as n", "SHARD_ID",
            "column 'SHARD_ID'", columns="(time long, SHARD_ID string)")


def test_column_twice() -> None:
    refused("", "x", "column 'x' is defined twice in table T", columns="(x int, x long)", occurrence=1)


def test_durations_are_checked_as_for_rollups() -> None:
    refused("preaggregate by time every 48 hours measures count() as n", "define",
            "durations of table T: '48 hour' is longer than a day")


def test_names_are_unique_across_the_app() -> None:
    refused("", "define table", "'T' is also the name of a stream", columns="(x int)",
            before="define stream T (x int);\n")
    refused("", "define table", "'T_ROWS' (the input stream of table T) is also the name of a stream",
            columns="(x int)", before="define stream T_ROWS (x int);\n")
    with pytest.raises(DefinitionError, match="'T' is also the name of a table"):
        parse_app("define table T (x int); define table T (y int);")


def test_python_specs_get_the_same_checks() -> None:
    with pytest.raises(DefinitionError, match="takes a whole number of at least 1, got 0"):
        validate_table(python_table(workers=0))
    with pytest.raises(DefinitionError, match="has no measure"):
        validate_table(python_table(measures=()))
    with pytest.raises(DefinitionError, match="unknown aggregate function 'median'"):
        validate_table(python_table(measures=(Measure("median", "cost", "m"),)))
    with pytest.raises(DefinitionError, match=r"count\(\) takes no column in measure 'n'"):
        validate_table(python_table(measures=(Measure("count", "cost", "n"),)))
    with pytest.raises(DefinitionError, match=r"dimension 'site' is listed twice"):
        validate_table(python_table(dimensions=("site", "site")))
    with pytest.raises(DefinitionError, match="names no time column"):
        validate_table(dataclasses.replace(python_table(), time_column=None))


# --- plan_change -------------------------------------------------------------------------------------------


def columns_without(*names: str) -> tuple[Attribute, ...]:
    return tuple(c for c in COLUMNS if c.name not in names)


def test_a_new_table_adds_everything() -> None:
    t = python_table()
    change = plan_change(None, t)
    assert change == ConfigChange(
        t,
        added_measures=t.preaggregation.measures,  # type: ignore[union-attr]
        added_dimensions=("site",),
        added_columns=tuple(c.name for c in COLUMNS),
        enabled=True,
        notes=("table AdImpressions is new",),
    )


def test_the_same_definition_changes_nothing() -> None:
    change = plan_change(python_table(), python_table())
    assert not change.changed
    assert change.table == python_table()


def test_mean_and_avg_are_one_measure() -> None:
    stored = python_table()
    text = f"define table AdImpressions {COLUMNS_TEXT} preaggregate by time every min dimensions site " \
           "measures COUNT() as impressions, SUM(clicked) as clicks, MEAN(cost) as avgCost;"
    assert not plan_change(stored, parse_app(text).tables[0]).changed


def test_measures_added_and_removed() -> None:
    stored = python_table()
    new = python_table(measures=(Measure("count", None, "impressions"), Measure("max", "cost", "maxCost")))
    change = plan_change(stored, new)
    assert [m.alias for m in change.added_measures] == ["maxCost"]
    assert [m.alias for m in change.removed_measures] == ["clicks", "avgCost"]
    assert change.notes == (
        "measure clicks removed",
        "measure avgCost removed",
        "measure maxCost added: intervals stored before hold no value (NULL) for it",
    )


def test_a_changed_measure_is_removed_and_added() -> None:
    stored = python_table()
    for replacement in (Measure("max", "clicked", "clicks"), Measure("sum", "cost", "clicks")):
        measures = (Measure("count", None, "impressions"), replacement, Measure("avg", "cost", "avgCost"))
        new = python_table(measures=measures)
        change = plan_change(stored, new)
        assert change.removed_measures == (Measure("sum", "clicked", "clicks"),)
        assert change.added_measures == (replacement,)
        assert change.notes == (
            f"measure clicks changes from sum(clicked) as clicks to {replacement.describe()}: intervals stored "
            "before hold no value (NULL) for it",
        )


def test_changed_parameters_change_the_measure() -> None:
    stored = python_table(measures=(Measure("kll", "cost", "q", ((0.5,),)),))
    new = python_table(measures=(Measure("kll", "cost", "q", ((0.5, 0.99),)),))
    change = plan_change(stored, new)
    assert change.removed_measures == stored.preaggregation.measures  # type: ignore[union-attr]
    assert change.added_measures == new.preaggregation.measures  # type: ignore[union-attr]


def test_dimensions_added_and_removed() -> None:
    stored = python_table()
    change = plan_change(stored, python_table(dimensions=("user",)))
    assert (change.added_dimensions, change.removed_dimensions) == (("user",), ("site",))
    assert change.notes == (
        "dimension site removed: rows stored before are merged over its values",
        "dimension user added: rows stored before have no value (NULL) for it",
    )


def test_a_dropped_column_drops_its_measures_and_dimensions() -> None:
    """The seed's ALTER rule: the new schema lacks cost and site, the config still names them."""
    stored = python_table()
    new = dataclasses.replace(python_table(), columns=columns_without("cost", "site"))
    change = plan_change(stored, new)
    assert change.dropped_columns == ("site", "cost")
    assert [m.alias for m in change.removed_measures] == ["avgCost"]
    assert change.removed_dimensions == ("site",)
    pre = change.table.preaggregation
    assert pre is not None
    assert [m.alias for m in pre.measures] == ["impressions", "clicks"]
    assert pre.dimensions == ()
    assert pre.pos_of("dimension:site") is None
    assert change.notes == (
        "measure avgCost removed: column cost is not in table AdImpressions",
        "dimension site removed: column site is not in table AdImpressions",
        "column site dropped",
        "column cost dropped",
    )
    validate_table(change.table)  # the stored config never names a column the table lacks


def test_dropping_a_column_and_its_measure_says_why() -> None:
    stored = python_table()
    new = python_table(measures=stored.preaggregation.measures[:2])  # type: ignore[union-attr]
    new = dataclasses.replace(new, columns=columns_without("cost"))
    change = plan_change(stored, new)
    assert "measure avgCost removed: column cost is not in table AdImpressions" in change.notes


def test_a_new_table_with_dangling_measures_is_cut_too() -> None:
    new = dataclasses.replace(python_table(), columns=columns_without("cost"))
    change = plan_change(None, new)
    assert [m.alias for m in change.added_measures] == ["impressions", "clicks"]
    assert "measure avgCost removed: column cost is not in table AdImpressions" in change.notes


def test_dropping_every_measure_is_refused() -> None:
    stored = python_table(measures=(Measure("avg", "cost", "avgCost"),))
    with pytest.raises(DefinitionError, match=r"would keep no measure once those of column\(s\) cost are dropped"):
        plan_change(stored, dataclasses.replace(stored, columns=columns_without("cost")))


def test_dropping_the_time_column_is_refused() -> None:
    stored = python_table()
    with pytest.raises(DefinitionError, match="the time column time of table AdImpressions is not among its columns"):
        plan_change(stored, dataclasses.replace(stored, columns=columns_without("time")))


def test_columns_added_and_dropped_outside_the_config() -> None:
    stored = python_table()
    new = dataclasses.replace(stored, columns=(*columns_without("user"), Attribute("country", AttrType.STRING)))
    change = plan_change(stored, new)
    assert (change.added_columns, change.dropped_columns) == (("country",), ("user",))
    assert change.removed_measures == () and change.added_measures == ()


def test_granularity_change_only_on_an_empty_table() -> None:
    stored = python_table()
    new = python_table(granularity=Granularity(Unit.HOURS))
    with pytest.raises(DefinitionError, match="holds rows pre-aggregated per minutes; its granularity cannot change "
                                              "to hours"):
        plan_change(stored, new)
    change = plan_change(stored, new, holds_rows=False)
    assert change.granularity == (Granularity(Unit.MINUTES), Granularity(Unit.HOURS))


def test_granularity_refusal_points_at_every() -> None:
    stored = parse_app(AD_NETWORK).tables[0]
    new = parse_app(AD_NETWORK.replace("every min", "every hour")).tables[0]
    with pytest.raises(DefinitionError) as caught:
        plan_change(stored, new)
    assert (caught.value.line, caught.value.column) == (3, 32)


def test_column_type_change_only_on_an_empty_table() -> None:
    stored = parse_app(AD_NETWORK).tables[0]
    new = parse_app(AD_NETWORK.replace("clicked int", "clicked long")).tables[0]
    with pytest.raises(DefinitionError, match="column clicked of table AdImpressions is int in the stored rows and "
                                              "long here") as caught:
        plan_change(stored, new)
    assert (caught.value.line, caught.value.column) == (2, 53)
    change = plan_change(stored, new, holds_rows=False)
    assert change.notes == ("column clicked changes type from int to long",)


def test_time_column_change_only_on_an_empty_table() -> None:
    columns = (*COLUMNS, Attribute("ts", AttrType.LONG))
    stored = dataclasses.replace(python_table(), columns=columns)
    new = dataclasses.replace(stored, time_column="ts")
    with pytest.raises(DefinitionError, match="holds rows keyed by time column time"):
        plan_change(stored, new)
    assert plan_change(stored, new, holds_rows=False).notes == ("time column changes from time to ts",)


def test_workers_change_any_time() -> None:
    change = plan_change(python_table(), python_table(workers=8))
    assert change.workers == (4, 8)
    assert change.notes == ("workers change from 4 to 8; stored partial rows keep merging",)


def test_enabling_preaggregation_on_a_raw_table() -> None:
    raw = dataclasses.replace(python_table(), preaggregation=None, time_column=None)
    change = plan_change(raw, python_table())
    assert change.enabled
    assert [m.alias for m in change.added_measures] == ["impressions", "clicks", "avgCost"]
    assert change.notes == (
        "pre-aggregation enabled: rows stored raw before are folded into the rollup by tiltframe migrate or the next "
        "insert",
    )


def test_disabling_preaggregation_only_on_an_empty_table() -> None:
    raw = dataclasses.replace(python_table(), preaggregation=None, time_column=None)
    with pytest.raises(DefinitionError, match="holds pre-aggregated rows, which cannot become raw rows again"):
        plan_change(python_table(), raw)
    change = plan_change(python_table(), raw, holds_rows=False)
    assert change.disabled and change.removed_dimensions == ("site",)
    assert len(change.removed_measures) == 3


def test_another_table_is_refused() -> None:
    with pytest.raises(DefinitionError, match="table Other is compared with the stored definition of table"):
        plan_change(python_table(), dataclasses.replace(python_table(), name="Other"))
