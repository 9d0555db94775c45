"""Text -> TableSpec: define table with and without a pre-aggregation, measures parsed as define aggregation's
select items, @preaggregate, and every refusal at the line and column of its token."""

from __future__ import annotations

import pytest

from tests.errors import refused_at
from tiltframe.errors import DefinitionError
from tiltframe.lang.siddhiql.parser import parse_app
from tiltframe.model.aggregations import StoreSpec
from tiltframe.model.durations import Granularity, Unit
from tiltframe.model.streams import Attribute, AttrType
from tiltframe.model.tables import DEFAULT_WORKERS, Measure, Preaggregation, TableSpec

#: The seed's ad network: impressions per site, pre-aggregated per minute.
AD_NETWORK = """@preaggregate(workers='4')
define table AdImpressions (time long, site string, clicked int, cost double, user string)
    preaggregate by time every min
    dimensions site
    measures count() as impressions, sum(clicked) as clicks, mean(cost) as avgCost,
             cardinality_approx(user) as users, quantiles_approx(cost, [0.5, 0.99]) as costQ;
"""
COLUMNS = (
    Attribute("time", AttrType.LONG),
    Attribute("site", AttrType.STRING),
    Attribute("clicked", AttrType.INT),
    Attribute("cost", AttrType.DOUBLE),
    Attribute("user", AttrType.STRING),
)
COLUMNS_TEXT = "(time long, site string, clicked int, cost double, user string)"


def table(text: str) -> TableSpec:
    (found,) = parse_app(text).tables
    return found


def table_with(clause: str, *, annotation: str = "") -> TableSpec:
    return table(f"{annotation}define table T {COLUMNS_TEXT} {clause};")


def refused(text: str, marker: str, fragment: str, *, occurrence: int = 0) -> DefinitionError:
    return refused_at(parse_app, text, marker, fragment, occurrence=occurrence)


def clause_refused(clause: str, marker: str, fragment: str, *, annotation: str = "") -> DefinitionError:
    return refused(f"{annotation}define table T {COLUMNS_TEXT} {clause};", marker, fragment)


# --- what parses -----------------------------------------------------------------------------------------


def test_seed_ad_network() -> None:
    app = parse_app(AD_NETWORK)
    # The table adds its input stream and its one-level rollup to the app, so they run like any other.
    assert [s.name for s in app.streams] == ["AdImpressions_ROWS"]
    assert [(a.name, a.source, a.workers) for a in app.aggregations] == [("AdImpressions", "AdImpressions_ROWS", 4)]
    assert app.input_stream("AdImpressions") == "AdImpressions_ROWS"
    assert app.tables == (
        TableSpec(
            "AdImpressions",
            COLUMNS,
            "time",
            Preaggregation(
                granularity=Granularity(Unit.MINUTES),
                dimensions=("site",),
                workers=4,
                measures=(
                    Measure("count", None, "impressions"),
                    Measure("sum", "clicked", "clicks"),
                    Measure("avg", "cost", "avgCost"),
                    Measure("distinctCount", "user", "users"),
                    Measure("kll", "cost", "costQ", ((0.5, 0.99),)),
                ),
            ),
        ),
    )


def test_positions_are_kept_for_errors() -> None:
    t = table(AD_NETWORK)
    pre = t.preaggregation
    assert pre is not None
    found = {
        "table": t.pos,
        "time": pre.pos_of("time"),
        "granularity": pre.pos_of("granularity"),
        "workers": pre.pos_of("workers"),
        "site": pre.pos_of("dimension:site"),
        "clicks": pre.measures[1].pos,
    }
    assert {k: (p.line, p.column) for k, p in found.items() if p is not None} == {
        "table": (2, 1),
        "time": (3, 21),
        "granularity": (3, 32),
        "workers": (1, 1),
        "site": (4, 16),
        "clicks": (5, 38),
    }


def test_raw_table_has_no_time_column_and_no_preaggregation() -> None:
    t = table("define table Clicks (time long, site string);")
    assert t == TableSpec("Clicks", (Attribute("time", AttrType.LONG), Attribute("site", AttrType.STRING)))


def test_dimensions_are_optional_and_workers_default() -> None:
    t = table_with("preaggregate by time every hour measures count() as n")
    assert t.preaggregation == Preaggregation(Granularity(Unit.HOURS), (Measure("count", None, "n"),))
    assert t.preaggregation.workers == DEFAULT_WORKERS == 4


@pytest.mark.parametrize(
    ("annotation", "workers"),
    [("@preaggregate(workers='8')", 8), ("@preaggregate(workers=1)", 1), ("@PreAggregate(WORKERS=\"16\")", 16)],
)
def test_workers(annotation: str, workers: int) -> None:
    t = table_with("preaggregate by time every min measures count() as n", annotation=annotation + "\n")
    assert t.preaggregation is not None and t.preaggregation.workers == workers


def test_store_annotation_places_the_table_and_its_rollup() -> None:
    annotation = ("@store(type='rdbms', jdbc.url='jdbc:postgresql://db:5432/ads', username='u', "
                  "pool.properties='maximumPoolSize:3')\n")
    t = table_with("preaggregate by time every min measures count() as n", annotation=annotation)
    want = StoreSpec("rdbms", "jdbc:postgresql://db:5432/ads", "u", None, (("pool.properties", "maximumPoolSize:3"),))
    assert t.store == want and t.as_aggregation().store == want
    assert table(f"@store(type='rdbms', jdbc.url='jdbc:sqlite:/x.db') define table R {COLUMNS_TEXT};").store == (
        StoreSpec("rdbms", "jdbc:sqlite:/x.db"))


def test_keywords_are_case_insensitive_and_function_names_too() -> None:
    t = table(
        f"DEFINE TABLE T {COLUMNS_TEXT} PREAGGREGATE BY time EVERY MIN DIMENSIONS site, user "
        "MEASURES COUNT() AS n, SUM(clicked) AS clicks, MEAN(cost) AS avgCost, MIN(cost) AS lo, MAX(cost) AS hi, "
        "DELTA(cost) AS d, CARDINALITY_APPROX(user) AS users, QUANTILES_APPROX(cost) AS q;"
    )
    pre = t.preaggregation
    assert pre is not None and pre.dimensions == ("site", "user")
    assert [m.function for m in pre.measures] == ["count", "sum", "avg", "min", "max", "delta", "distinctCount", "kll"]


@pytest.mark.parametrize(
    ("every", "granularity"),
    [("sec", Granularity(Unit.SECONDS)), ("5 min", Granularity(Unit.MINUTES, 5)), ("days", Granularity(Unit.DAYS)),
     ("month", Granularity(Unit.MONTHS)), ("year", Granularity(Unit.YEARS))],
)
def test_one_duration(every: str, granularity: Granularity) -> None:
    t = table_with(f"preaggregate by time every {every} measures count() as n")
    assert t.preaggregation is not None and t.preaggregation.granularity == granularity


def test_measure_parameters_are_the_registry_functions_constants() -> None:
    t = table_with("preaggregate by time every min measures dds(cost, [0.9], 0.02) as d, distinctCount(user, 14) as u")
    assert t.preaggregation is not None
    assert [(m.function, m.params) for m in t.preaggregation.measures] == [
        ("dds", ((0.9,), 0.02)),
        ("distinctCount", (14,)),
    ]


def test_tables_beside_streams_aggregations_and_continuous_queries() -> None:
    app = parse_app(
        "define stream Trades (symbol string, price double, ts long);\n"
        "define aggregation TradeAgg from Trades select symbol, sum(price) as total group by symbol "
        "aggregate by ts every sec ... min;\n"
        "define table Raw (ts long, symbol string);\n"
        + AD_NETWORK
        + "SELECT symbol, count() AS n FROM tumble(Trades, ts, 5s) GROUP BY symbol, window_end;\n"
    )
    assert [t.name for t in app.tables] == ["Raw", "AdImpressions"]
    assert [a.name for a in app.aggregations] == ["TradeAgg", "AdImpressions"]
    assert len(app.continuous) == 1
    assert app.table("Raw").preaggregation is None


def test_a_column_may_be_named_like_a_keyword_of_the_clause() -> None:
    t = table("define table T (time long, measures string, every int) preaggregate by time every min "
              "dimensions measures measures sum(every) as total;")
    assert t.preaggregation is not None and t.preaggregation.dimensions == ("measures",)


# --- refusals of the clause ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("every", "found"),
    [("min, hour", "got 2 (minutes, hours)"), ("sec ... hour", "got 3 (seconds, minutes, hours)")],
)
def test_one_granularity_only(every: str, found: str) -> None:
    clause_refused(f"preaggregate by time every {every} measures count() as n", every.split()[0].rstrip(","),
                   f"a pre-aggregated table has one granularity, {found}; write one duration")


def test_unknown_duration() -> None:
    clause_refused("preaggregate by time every minit measures count() as n", "minit", "did you mean 'min'")


def test_a_dimension_in_measures_is_not_a_measure() -> None:
    text = f"define table T {COLUMNS_TEXT} preaggregate by time every min measures count() as n, site;"
    refused(text, "site", "'site' is not a measure: a measure aggregates a column, such as sum(clicked) as clicks "
            "(columns to group by are listed after 'dimensions')", occurrence=1)


def test_a_measure_aggregates_one_column() -> None:
    clause_refused("preaggregate by time every min measures sum(clicked * 2) as c", "clicked * 2",
                   "a measure aggregates one column of the table, such as sum(<column>); got 'sum(clicked * 2) as c'")


def test_a_measure_needs_a_name() -> None:
    clause_refused("preaggregate by time every min measures sum(clicked)", "sum(clicked)",
                   "select item 'sum(clicked)' needs a name: write 'sum(clicked) as <name>'")


def test_unknown_measure_function() -> None:
    clause_refused("preaggregate by time every min measures summ(clicked) as c", "summ", "did you mean 'sum'")


def test_measure_constants_are_checked_where_written() -> None:
    clause_refused("preaggregate by time every min measures quantiles_approx(cost, 0.5, 0.99) as q", "0.5",
                   "the quantiles must be a list of numbers from 0 to 1 such as [0.5, 0.99], got 0.5")


def test_dimension_twice() -> None:
    text = f"define table T {COLUMNS_TEXT} preaggregate by time every min dimensions site, site measures count() as n;"
    refused(text, "site", "dimension 'site' is listed twice", occurrence=2)


@pytest.mark.parametrize(
    ("annotation", "marker", "fragment"),
    [
        ("@store()", "@store", "@store needs a type: write @store(type='rdbms', ...)"),
        ("@stor(type='rdbms')", "@stor", "unknown annotation @stor on define table T — did you mean '@store'? "
                                         "(it takes: @store, @preaggregate)"),
        ("@preagregate(workers='4')", "@preagregate", "did you mean '@preaggregate'"),
        ("@preaggregate(worker='4')", "worker", "unknown element 'worker' of @preaggregate — did you mean 'workers'"),
        ("@preaggregate('4')", "'4'", "@preaggregate takes named elements only (workers=...), got the value '4'"),
        ("@preaggregate(workers='0')", "workers", "takes a whole number of at least 1, got '0'"),
        ("@preaggregate(workers='two')", "workers", "takes a whole number of at least 1, got 'two'"),
        ("@preaggregate(workers='1', @x())", "@x", "@preaggregate takes no nested annotation, got @x"),
    ],
)
def test_annotation_refusals(annotation: str, marker: str, fragment: str) -> None:
    clause_refused("preaggregate by time every min measures count() as n", marker, fragment,
                   annotation=annotation + "\n")


def test_preaggregate_annotation_twice() -> None:
    text = (f"@preaggregate(workers='2') @preaggregate(workers='3') define table T {COLUMNS_TEXT} "
            "preaggregate by time every min measures count() as n;")
    refused(text, "@preaggregate(workers='3')", "annotation @preaggregate is given twice")


def test_preaggregate_annotation_on_a_raw_table() -> None:
    refused("@preaggregate(workers='2')\ndefine table T (time long);", "@preaggregate",
            "@preaggregate needs a pre-aggregation: write 'define table T (...) preaggregate by <time column> every")


# --- syntax errors in words -----------------------------------------------------------------------------------


def test_missing_measures() -> None:
    clause_refused("preaggregate by time every min dimensions site", ";", "expected")
    error = clause_refused("preaggregate by time every min dimensions site", ";", "'measures'")
    assert "',' or 'measures'" in str(error)


def test_misspelt_dimensions() -> None:
    clause_refused("preaggregate by time every min dimension site measures count() as n", "dimension",
                   "did you mean 'dimensions'?")


def test_missing_every() -> None:
    clause_refused("preaggregate by time measures count() as n", "measures", "'every'")


def test_expected_column_type_in_words() -> None:
    refused("define table T (time long, site);", ")", "expected a type (string, int, long, float, double or bool)")


def test_expected_time_column_after_preaggregate_by() -> None:
    clause_refused("preaggregate by every min measures count() as n", "min", "'every'")
