"""The recorded definition of an aggregation and the plan from one definition to another
(``store.lifecycle.definitions``): pure, no store and no Spark."""

from __future__ import annotations

import pytest

import tiltframe as tf
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.store.lifecycle.definitions import Definition, plan

BASE = """
define stream Trades (symbol string, price double, volume long, ts long);
define aggregation TA
from Trades
select symbol, sum(price) as total, count() as n
group by symbol
aggregate by ts every sec ... day;
"""


def definition(text: str, app: str | None = None) -> Definition:
    return Definition.of(AggregationLayout.of(tf.load_app(text), "TA"), app)


def test_a_definition_survives_its_json() -> None:
    d = definition(BASE.replace("count() as n", "count() as n, max(volume) as big, price as last"), "Trading")
    assert Definition.from_json(d.to_json()) == d
    assert [m.name for m in d.measures] == ["total", "n", "big", "last"]
    assert d.measure("last").latest and d.measure("big").reads == ("volume",)


def test_the_same_definition_plans_nothing() -> None:
    change = plan(definition(BASE), definition(BASE))
    assert not change.changed and change.steps() == []


def test_measures_added_removed_and_changed_under_their_name() -> None:
    new = BASE.replace("count() as n", "max(volume) as n, avg(price) as mean")
    change = plan(definition(BASE), definition(new))
    assert [m.name for m in change.removed] == ["n"] and [m.name for m in change.added] == ["n", "mean"]
    assert change.dropped_columns == ("n_COUNT",)
    assert change.added_columns == {"n_MAX": "long", "mean_SUM": "double", "mean_COUNT": "long"}
    assert not change.rebuild and not change.added_levels


def test_a_measure_whose_attribute_was_retyped_starts_again() -> None:
    change = plan(definition(BASE.replace("sum(price) as total", "sum(volume) as total")),
                  definition(BASE.replace("sum(price) as total", "sum(volume) as total").replace("volume long",
                                                                                                 "volume double")))
    assert [m.name for m in change.added] == ["total"] and change.dropped_columns == ("total_SUM",)
    assert change.added_columns == {"total_SUM": "double"}


def test_a_latest_event_value_brings_the_arrival_columns() -> None:
    change = plan(definition(BASE), definition(BASE.replace("count() as n", "count() as n, price as last")))
    assert change.added_columns == {"last": "double", "AGG_ARRIVAL_BATCH": "long", "AGG_ARRIVAL_SEQ": "long"}
    back = plan(definition(BASE.replace("count() as n", "count() as n, price as last")), definition(BASE))
    assert set(back.dropped_columns) == {"last", "AGG_ARRIVAL_BATCH", "AGG_ARRIVAL_SEQ"}


def test_attributes_no_aggregate_reads_change_nothing_stored() -> None:
    wider = BASE.replace("ts long)", "ts long, venue string)")
    change = plan(definition(BASE), definition(wider))
    assert change.changed and not (change.added or change.removed or change.rebuild or change.added_columns)
    assert change.steps() == ["attribute venue of stream Trades added: no aggregate reads it, nothing stored changes"]
    retyped = plan(definition(BASE), definition(BASE.replace("volume long", "volume double")))
    assert retyped.steps() == ["attribute volume of stream Trades retyped long -> double: no aggregate reads it, "
                               "nothing stored changes"]


def test_settings_that_shape_no_row_change_nothing_stored() -> None:
    kept = BASE.replace("define aggregation", "@purge(enable='true', interval='10 sec', "
                        "@retentionPeriod(sec='120 sec', min='24 hours'))\ndefine aggregation")
    change = plan(definition(BASE), definition(kept))
    assert change.steps() == ["retention, purge or out-of-order settings changed: applied from the next run, nothing "
                              "stored changes (buckets purged before stay purged)"]


@pytest.mark.parametrize(("edit", "part"), [
    (lambda t: t.replace("group by symbol", "group by symbol, volume").replace("select symbol,", "select symbol, "
                                                                                               "volume,"), "group by"),
    (lambda t: "@app:timezone('Asia/Kolkata')\n" + t, "time zone"),
    (lambda t: t.replace("aggregate by ts", "aggregate"), "time attribute"),
    (lambda t: t.replace("symbol string", "symbol long"), "type of symbol"),
])
def test_what_every_row_depends_on_needs_a_rebuild(edit, part: str) -> None:
    change = plan(definition(BASE), definition(edit(BASE)))
    assert part in [p for p, _, _ in change.rebuild]
    assert any(step.startswith("rebuild every level of TA from its inputs") for step in change.steps())


def test_levels_added_and_removed() -> None:
    change = plan(definition(BASE), definition(BASE.replace("every sec ... day", "every sec, min, hour, month")))
    assert change.removed_levels == ("DAYS",) and change.added_levels == ("MONTHS",)
    assert "level DAYS removed: table TA_DAYS dropped" in change.steps()


def test_another_named_app_is_left_alone() -> None:
    change = plan(definition(BASE, "Trading"), definition(BASE.replace("count() as n", "min(price) as low"), "Risk"))
    assert change.other_app
    assert change.steps() == ["aggregation TA in this store belongs to app 'Trading', not to 'Risk': it is left alone"]
    assert not plan(definition(BASE, None), definition(BASE, "Risk")).other_app  # unnamed: cannot tell
