"""SELECT over tables: the default aggregation clause, GROUP BY over time and dimensions with measures merged
over each group, aggregate calls of a measure's own function, WHERE/HAVING/ORDER BY/LIMIT, partials(T) and
raw tables; every refusal at the line and column of its token."""

from __future__ import annotations

import pytest

from tests.errors import refused_at
from tiltframe.errors import DefinitionError
from tiltframe.lang.siddhiql.parser import parse_app, parse_sql, parse_table_query
from tiltframe.model.expressions import Attr, Binary, Call, Literal
from tiltframe.model.queries import OrderItem
from tiltframe.model.streams import AttrType
from tiltframe.model.tables import TableQuery

TABLES = parse_app(
    """@preaggregate(workers='4')
define table AdImpressions (time long, site string, clicked int, cost double, user string, country string)
    preaggregate by time every min
    dimensions site, country
    measures count() as impressions, sum(clicked) as clicks, mean(cost) as avgCost, max(cost) as maxCost,
             cardinality_approx(user) as users, quantiles_approx(cost, [0.5, 0.99]) as costQ;
define table Raw (time long, x int, name string);
"""
)
MEASURE_OUTPUTS = ("impressions", "clicks", "avgCost", "maxCost", "users", "costQ_p50", "costQ_p99")


def query(sql: str) -> TableQuery:
    return parse_table_query(sql, TABLES)


def refused(sql: str, marker: str, fragment: str, *, occurrence: int = 0) -> DefinitionError:
    return refused_at(query, sql, marker, fragment, occurrence=occurrence)


def outputs(q: TableQuery) -> dict[str, object]:
    return dict(q.outputs)


# --- the default aggregation clause ---------------------------------------------------------------------------


def test_select_star_is_one_row_per_interval_and_dimension_values() -> None:
    q = query("SELECT * FROM AdImpressions")
    assert q.merged
    assert q.keys == ("time", "site", "country")
    assert q.output_names == ("time", "site", "country", *MEASURE_OUTPUTS)
    assert q.measures == ("impressions", "clicks", "avgCost", "maxCost", "users", "costQ")
    assert dict(q.output_types) == {
        "time": AttrType.LONG, "site": AttrType.STRING, "country": AttrType.STRING,
        "impressions": AttrType.LONG, "clicks": AttrType.LONG, "avgCost": AttrType.DOUBLE,
        "maxCost": AttrType.DOUBLE, "users": AttrType.LONG, "costQ_p50": AttrType.DOUBLE,
        "costQ_p99": AttrType.DOUBLE,
    }


def test_without_group_by_the_keys_are_time_and_every_dimension_whatever_is_selected() -> None:
    q = query("SELECT site, clicks FROM AdImpressions")
    assert q.keys == ("time", "site", "country")
    assert q.output_names == ("site", "clicks")
    assert q.measures == ("clicks",)


def test_expressions_over_measures() -> None:
    q = query("SELECT time, site, clicks * 1.0 / impressions AS rate FROM AdImpressions")
    assert outputs(q)["rate"] == Binary("/", Binary("*", Attr("clicks"), Literal(1.0, "double")), Attr("impressions"))
    assert dict(q.output_types)["rate"] is AttrType.DOUBLE
    assert q.measures == ("impressions", "clicks")


def test_an_item_without_alias_is_named_by_its_text() -> None:
    assert query("SELECT clicks + 1 FROM AdImpressions").output_names == ("(clicks + 1)",)


def test_a_quantile_measure_selected_alone_gives_one_column_per_quantile() -> None:
    assert query("SELECT costQ FROM AdImpressions").output_names == ("costQ_p50", "costQ_p99")
    q = query("SELECT costQ AS q, costQ_p99 * 2 AS twice FROM AdImpressions")
    assert outputs(q) == {
        "q_p50": Attr("costQ_p50"),
        "q_p99": Attr("costQ_p99"),
        "twice": Binary("*", Attr("costQ_p99"), Literal(2, "int")),
    }


def test_qualified_columns_lose_the_table_name() -> None:
    q = query("SELECT AdImpressions.site, AdImpressions.clicks FROM AdImpressions")
    assert q.outputs == (("site", Attr("site")), ("clicks", Attr("clicks")))


# --- GROUP BY -------------------------------------------------------------------------------------------------


def test_the_per_site_click_rate() -> None:
    """The issue's example: measures in an expression are merged over each site."""
    q = query("SELECT site, clicks / impressions AS rate FROM AdImpressions GROUP BY site")
    assert q.keys == ("site",)
    assert outputs(q) == {"site": Attr("site"), "rate": Binary("/", Attr("clicks"), Attr("impressions"))}
    assert q.measures == ("impressions", "clicks")
    # '/' of two whole numbers is a whole number, as everywhere in tiltframe; docs/preaggregation.md says so.
    assert dict(q.output_types)["rate"] is AttrType.LONG


def test_group_by_time_and_dimensions() -> None:
    q = query("SELECT time, country, avgCost FROM AdImpressions GROUP BY time, country")
    assert q.keys == ("time", "country")
    q = query("SELECT time, users FROM AdImpressions GROUP BY time")
    assert (q.keys, q.output_names) == (("time",), ("time", "users"))


def test_select_star_with_group_by_is_the_keys_and_every_measure() -> None:
    q = query("SELECT * FROM AdImpressions GROUP BY country")
    assert q.output_names == ("country", *MEASURE_OUTPUTS)


def test_a_selected_dimension_must_be_grouped() -> None:
    refused("SELECT site, clicks FROM AdImpressions GROUP BY country", "site",
            "column 'site' in SELECT is not in GROUP BY: add it to GROUP BY, or drop it (rows are merged per country)")


def test_group_by_takes_the_time_column_and_dimensions() -> None:
    refused("SELECT clicks FROM AdImpressions GROUP BY clicks", "clicks",
            "'clicks' is a measure, merged over each group; GROUP BY takes the time column and dimensions "
            "(time, site, country)", occurrence=1)
    refused("SELECT site FROM AdImpressions GROUP BY user", "user",
            "column 'user' of table AdImpressions is not kept by its pre-aggregation: it is neither the time column "
            "nor a dimension; its measures: users")
    refused("SELECT site FROM AdImpressions GROUP BY sit", "sit", "did you mean 'site'", occurrence=1)
    refused("SELECT site FROM AdImpressions GROUP BY site, site", "site", "column 'site' is listed twice in GROUP BY",
            occurrence=2)
    refused("SELECT site FROM AdImpressions GROUP BY site || 'x'", "|", "unexpected character")


def test_group_by_an_expression_is_refused() -> None:
    refused("SELECT clicks FROM AdImpressions GROUP BY time / 2", "time / 2",
            "GROUP BY takes columns (time, site, country), got '(time / 2)'")


# --- aggregate calls ------------------------------------------------------------------------------------------


def test_a_measures_own_function_is_the_merged_measure() -> None:
    q = query("SELECT site, sum(clicks) AS c, max(maxCost) AS m, mean(avgCost) AS a, cardinality_approx(users) AS u "
              "FROM AdImpressions GROUP BY site")
    assert outputs(q) == {"site": Attr("site"), "c": Attr("clicks"), "m": Attr("maxCost"), "a": Attr("avgCost"),
                          "u": Attr("users")}


def test_sum_of_a_count_is_the_merged_count() -> None:
    q = query("SELECT sum(impressions) AS n FROM AdImpressions")
    assert outputs(q) == {"n": Attr("impressions")}


def test_an_aggregate_call_without_group_by_makes_the_table_one_group() -> None:
    q = query("SELECT sum(clicks), impressions FROM AdImpressions")
    assert q.keys == ()
    assert q.outputs == (("sum(clicks)", Attr("clicks")), ("impressions", Attr("impressions")))


def test_with_one_group_a_dimension_needs_group_by() -> None:
    refused("SELECT site, sum(clicks) FROM AdImpressions", "site",
            "column 'site' in SELECT is neither in GROUP BY nor a measure: with an aggregate call and no GROUP BY "
            "the whole table is one group; add GROUP BY site")


def test_another_function_over_a_measure_is_refused_with_the_name_to_write() -> None:
    refused("SELECT avg(clicks) FROM AdImpressions", "avg",
            "avg(clicks) is not available: measure clicks is sum(clicked) as clicks, merged over each group by its "
            "own function; write clicks (or sum(clicks)) for its merged value")
    refused("SELECT count(impressions) FROM AdImpressions", "count",
            "count(impressions) is not available: measure impressions is count() as impressions, merged over each "
            "group by its own function; write impressions (or sum(impressions)) for its merged value")


def test_an_aggregate_over_a_column_is_refused() -> None:
    refused("SELECT sum(clicked) FROM AdImpressions", "sum",
            "aggregate sum() over 'clicked': a SELECT over a table merges its measures (impressions, clicks, avgCost, "
            "maxCost, users, costQ); write a measure's name, or declare a measure for it")
    refused("SELECT count() FROM AdImpressions", "count", "aggregate count() over 'count'")


def test_an_aggregate_over_a_quantile_measure_is_refused() -> None:
    refused("SELECT kll(costQ) AS q FROM AdImpressions", "kll",
            "kll(costQ) gives one column per quantile: select costQ on its own, or name one of costQ_p50, costQ_p99")


def test_a_quantile_measure_inside_an_expression_names_one_quantile() -> None:
    refused("SELECT costQ * 2 AS x FROM AdImpressions", "costQ",
            "measure 'costQ' gives one column per quantile (costQ_p50, costQ_p99): name one of them")


# --- WHERE, HAVING, ORDER BY, LIMIT ---------------------------------------------------------------------------


def test_where_reads_time_and_dimensions() -> None:
    q = query("SELECT site, clicks FROM AdImpressions WHERE time >= 1700000000000 AND site IN ('a.com', 'b.com') "
              "GROUP BY site")
    assert q.where == Binary(
        "and",
        Binary(">=", Attr("time"), Literal(1700000000000, "long")),
        Binary("or", Binary("==", Attr("site"), Literal("a.com", "string")),
               Binary("==", Attr("site"), Literal("b.com", "string"))),
    )


def test_where_may_use_a_dimension_that_is_not_grouped() -> None:
    assert query("SELECT clicks FROM AdImpressions WHERE country = 'FR' GROUP BY time").keys == ("time",)


def test_where_cannot_read_measures() -> None:
    refused("SELECT site FROM AdImpressions WHERE clicks > 10", "clicks",
            "WHERE filters rows before they are merged, and measure 'clicks' has a value only once they are: filter "
            "on the time column or a dimension, or move the condition to HAVING")
    refused("SELECT site FROM AdImpressions WHERE costQ_p50 > 10", "costQ_p50", "measure 'costQ_p50'")
    refused("SELECT site FROM AdImpressions WHERE sum(clicks) > 10", "sum",
            "aggregate sum() in WHERE, which filters rows before they are merged; use HAVING")


def test_where_cannot_read_columns_the_preaggregation_does_not_keep() -> None:
    refused("SELECT site FROM AdImpressions WHERE cost > 1.5", "cost",
            "column 'cost' of table AdImpressions is not kept by its pre-aggregation: it is neither the time column "
            "nor a dimension; its measures: avgCost, maxCost, costQ")


def test_where_takes_a_condition() -> None:
    refused("SELECT site FROM AdImpressions WHERE time + 1", "time + 1",
            "WHERE takes a condition (such as clicks > 10), got '(time + 1)' of type long")


def test_having_reads_merged_rows_and_output_names() -> None:
    q = query("SELECT site, clicks * 1.0 / impressions AS rate FROM AdImpressions GROUP BY site "
              "HAVING rate > 0.1 AND impressions >= 100")
    rate = Binary("/", Binary("*", Attr("clicks"), Literal(1.0, "double")), Attr("impressions"))
    assert q.having == Binary("and", Binary(">", rate, Literal(0.1, "double")),
                              Binary(">=", Attr("impressions"), Literal(100, "int")))
    assert q.measures == ("impressions", "clicks")


def test_having_may_read_a_measure_that_is_not_selected() -> None:
    q = query("SELECT site FROM AdImpressions GROUP BY site HAVING users > 3")
    assert q.measures == ("users",)


def test_having_reads_keys_only_when_grouped() -> None:
    refused("SELECT clicks FROM AdImpressions GROUP BY time HAVING site = 'x'", "site",
            "column 'site' in HAVING is not in GROUP BY")


def test_order_by_and_limit() -> None:
    q = query("SELECT site, clicks FROM AdImpressions GROUP BY site ORDER BY clicks DESC, site LIMIT 10")
    assert q.order_by == (OrderItem(Attr("clicks"), ascending=False), OrderItem(Attr("site")))
    assert q.limit == 10


def test_order_by_reads_selected_columns() -> None:
    refused("SELECT site FROM AdImpressions GROUP BY site ORDER BY clicks", "clicks",
            "ORDER BY clicks: only selected columns order the result (selected: site); select clicks to order by it")


def test_order_by_takes_no_aggregate_call() -> None:
    refused("SELECT site, clicks FROM AdImpressions GROUP BY site ORDER BY sum(clicks)", "sum",
            "ORDER BY reads selected columns: select sum(clicks) AS <name> and order by that name")


def test_limit_is_a_whole_number() -> None:
    refused("SELECT site FROM AdImpressions LIMIT 2.5", "2.5", "LIMIT must be a whole number, got '2.5'")


# --- partial rows -----------------------------------------------------------------------------------------------


def test_partials_are_the_stored_rows_with_their_worker() -> None:
    q = query("SELECT * FROM partials(AdImpressions) WHERE clicks > 0 ORDER BY time DESC LIMIT 5")
    assert not q.merged and q.keys == ()
    assert q.output_names == ("time", "SHARD_ID", "site", "country", *MEASURE_OUTPUTS)
    assert dict(q.output_types)["SHARD_ID"] is AttrType.STRING
    assert q.where == Binary(">", Attr("clicks"), Literal(0, "int"))
    assert q.table == "AdImpressions" and q.partials


def test_partials_refuse_grouping_and_aggregates() -> None:
    refused("SELECT site FROM partials(AdImpressions) GROUP BY site", "site",
            "GROUP BY needs merged rows: partials(AdImpressions) reads the partial rows as they are; read FROM "
            "AdImpressions", occurrence=1)
    refused("SELECT sum(clicks) FROM partials(AdImpressions)", "sum",
            "aggregate sum() in SELECT: partials(AdImpressions) reads the partial rows as they are")


def test_partials_of_a_raw_table_or_a_misspelt_partials() -> None:
    refused("SELECT * FROM partials(Raw)", "Raw",
            "table Raw is not pre-aggregated, so it has no partial rows: read FROM Raw")
    refused("SELECT * FROM partial(AdImpressions)", "partial",
            "a SELECT over a table reads FROM <table> or FROM partials(<table>), got partial(...) — did you mean "
            "'partials'?")
    refused("SELECT * FROM partials(AdImpressions, 5s)", "partials", "partials() takes one table name")


# --- raw tables and other refusals ---------------------------------------------------------------------------


def test_a_raw_table_is_read_as_it_is() -> None:
    q = query("SELECT name, x * 2 AS y FROM Raw WHERE x > 1 ORDER BY y LIMIT 3")
    assert not q.merged and q.keys == () and q.measures == ()
    assert q.output_names == ("name", "y")
    assert query("SELECT * FROM Raw").output_names == ("time", "x", "name")


def test_a_raw_table_groups_and_aggregates_its_rows() -> None:
    """As SQL over a table: any column groups, each distinct aggregate call is computed once from the rows."""
    q = query("SELECT name, sum(x) AS s, count() AS n, sum(x) / count() AS m FROM Raw WHERE time > 0 "
              "GROUP BY name HAVING s > 1")
    assert q.merged and q.keys == ("name",) and q.measures == ()
    assert [(a.function, str(a.arg) if a.arg else None, a.alias) for a in q.aggregates] == [
        ("sum", "x", "_agg0"), ("count", None, "_agg1")]
    assert outputs(q)["m"] == Binary("/", Attr("_agg0"), Attr("_agg1"))
    assert query("SELECT x FROM Raw GROUP BY x").aggregates == ()
    refused("SELECT x, name FROM Raw GROUP BY x", "name", "column 'name' in SELECT is not in GROUP BY")
    refused("SELECT sum(nam) AS s FROM Raw", "nam", "unknown column of Raw 'nam'")


def test_unknown_table_and_columns() -> None:
    refused("SELECT * FROM AdImpresions", "AdImpresions",
            "unknown table 'AdImpresions' — did you mean 'AdImpressions'?")
    refused("SELECT clicsk FROM AdImpressions", "clicsk", "did you mean 'clicks'")
    refused("SELECT Other.site FROM AdImpressions", "Other.site",
            "'Other.site' names Other, but the query reads table AdImpressions")


def test_scalar_functions_are_checked() -> None:
    q = query("SELECT json_encode(site, clicks) AS j FROM AdImpressions")
    assert outputs(q)["j"] == Call("json_object", (Literal("site", "string"), Attr("site"),
                                                   Literal("clicks", "string"), Attr("clicks")))
    refused("SELECT json_encod(site) FROM AdImpressions", "json_encod", "unknown function 'json_encod'")


def test_outputs_are_unique() -> None:
    refused("SELECT clicks, impressions AS clicks FROM AdImpressions", "impressions",
            "output column 'clicks' is selected twice")


def test_syntax_refusals_in_words() -> None:
    refused("SELECT site FROM AdImpressions EMIT PERIODIC 5s", "EMIT",
            "EMIT belongs to continuous queries over streams; a SELECT over a table is answered once")
    refused("SELECT *, site FROM AdImpressions", "*", "SELECT * stands alone")
    refused("SELECT site FROM AdImpressions ORDER site", "site", "'by'", occurrence=1)
    refused("SELECT site FROM AdImpressions GROUP BY site LIMT 3", "LIMT", "did you mean 'limit'?")
    with pytest.raises(DefinitionError) as caught:
        query("SELECT site\nFROM AdImpressions\nWHERE")
    assert (caught.value.line, caught.value.column) == (3, 6)
    assert "expected a condition on the time column or dimensions (such as site = 'a.com')" in str(caught.value)


def test_continuous_queries_still_refuse_order_by() -> None:
    with pytest.raises(DefinitionError, match="ORDER is not supported in continuous queries"):
        parse_sql("SELECT device, count() FROM s GROUP BY device ORDER BY device")
