"""Siddhi's own aggregation tests, run through tiltframe as a Siddhi user would write them.

Each case is data: the app (stream, aggregation and, for a join, the query) and the on-demand query as the
Siddhi test writes them, the events it sends, and the rows it expects.  The facts come from siddhi-io/siddhi,
``modules/siddhi-core/src/test/java/io/siddhi/core/aggregation/`` (named per case); the cases are written
here in our own words.  Events go to a folder of JSON Lines files and through ``tf.run``; on-demand queries
are answered by ``tf.query`` and joins by the running app into a JSON Lines sink.

Where the comparison is looser than Siddhi's, or tiltframe refuses on purpose, the case says why
(tests/compatibility/README.md lists these differences):

- ``AGG_TIME`` (the bucket start as a datetime) follows ``AGG_TIMESTAMP`` in an answer without a select
  clause; Siddhi has no such column, so it is left out of the comparison.
- Siddhi's numbers are Java floats where the aggregation keeps a float (``1600f``); tiltframe answers doubles.
  Values are compared to 1e-6, relative.
- ``order by AGG_TIMESTAMP`` with two rows in one bucket: Siddhi leaves them in its in-memory order,
  tiltframe orders them by the group-by attributes; such cases check the order of ``AGG_TIMESTAMP`` only.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

import tiltframe as tf
from tiltframe.cli.commands import app as cli
from tiltframe.engine.sinks import JsonLinesSink
from tiltframe.errors import DefinitionError
from tiltframe.timeutil.time_columns import AGG_TIME

STOCK = (
    "define stream stockStream (symbol string, price float, lastClosingPrice float, volume long , "
    "quantity int, timestamp long);\n"
)
STOCK_TEXT_TIME = STOCK.replace("timestamp long", "timestamp string")
INPUT = "define stream inputStream (symbol string, value int, startTime string, endTime string, perValue string);\n"
STOCK_COLUMNS = ("symbol", "price", "lastClosingPrice", "volume", "quantity", "timestamp")
INPUT_COLUMNS = ("symbol", "value", "startTime", "endTime", "perValue")

#: Events several SelectOptimisationAggregationTestCase tests send (1 June 2017, 04:05:50 GMT onwards).
COUNTED = [
    ("WSO2", 50.0, 60.0, 90, 6, 1496289950000), ("WSO2", 70.0, None, 40, 10, 1496289950000),
    ("WSO2", 60.0, 44.0, 200, 56, 1496289952000), ("WSO2", 100.0, None, 200, 16, 1496289952000),
    ("IBM", 100.0, None, 200, 26, 1496289954000), ("IBM", 100.0, None, 200, 96, 1496289954000),
    ("IBM", 900.0, None, 200, 60, 1496289956000), ("IBM", 500.0, None, 200, 7, 1496289956000),
    ("IBM", 400.0, None, 200, 9, 1496290016000), ("IBM", 600.0, None, 200, 6, 1496290076000),
    ("CISCO", 700.0, None, 200, 20, 1496293676000),
]
#: Events of SelectOptimisationAggregationTestCase tests 10 to 12: six symbols, one event out of order.
SUMMED = [
    ("WSO2", 50.0, 60.0, 90, 6, 1496289950000), ("WSO22", 75.0, None, 40, 10, 1496289950100),
    ("WSO23", 60.0, 44.0, 200, 56, 1496289952000), ("WSO24", 100.0, None, 200, 16, 1496289952000),
    ("WSO23", 70.0, None, 40, 10, 1496289950090),
    ("IBM", 101.0, None, 200, 26, 1496289954000), ("IBM1", 102.0, None, 200, 100, 1496289954000),
    ("IBM", 900.0, None, 200, 60, 1496289956000), ("IBM1", 500.0, None, 200, 7, 1496289956000),
]
SUMMED_AGGREGATION = (
    "define aggregation stockAggregation from stockStream select symbol, sum(price) as sumPrice "
    "group by symbol aggregate by timestamp every sec...year ;\n"
)
#: Events of Aggregation1TestCase tests 38 and 46, with event times as text.
TEXT_TIMES = [
    ("WSO2", 50.0, 60.0, 90, 6, "2017-06-01 04:05:50"), ("IBM", 50.0, 60.0, 90, 6, "2017-06-01 04:05:51"),
    ("WSO2", 60.0, 44.0, 200, 56, "2017-06-01 04:05:52"), ("WSO2", 100.0, None, 200, 16, "2017-06-01 04:05:52"),
    ("WSO2", 70.0, None, 40, 10, "2017-06-01 04:05:50"), ("IBM", 100.0, None, 200, 26, "2017-06-01 04:05:54"),
    ("IBM", 100.0, None, 200, 96, "2017-06-01 04:05:54"), ("IBM", 50.0, 60.0, 90, 6, "2017-06-01 04:05:50"),
    ("IBM", 900.0, None, 200, 60, "2017-06-01 04:05:56"), ("IBM", 500.0, None, 200, 7, "2017-06-01 04:05:56"),
    ("IBM", 400.0, None, 200, 9, "2017-06-01 04:06:56"), ("IBM", 600.0, None, 200, 6, "2017-06-01 04:07:56"),
    ("IBM", 700.0, None, 200, 20, "2017-06-01 05:07:56"),
]
TEXT_AGGREGATION = (
    "define aggregation stockAggregation from stockStream "
    "select avg(price) as avgPrice, sum(price) as totalPrice, (price * quantity) as lastTradeValue "
    "aggregate by timestamp every sec...year;\n"
)
REQUEST_SECONDS = ("IBM", 1, "2017-06-01 09:35:51 +05:30", "2017-06-01 09:35:52 +05:30", "seconds")


@dataclass(frozen=True)
class Case:
    """One Siddhi test: ``app`` holds the definitions and, for a join, the query; ``query`` is an on-demand
    query answered after the run.  ``expected`` are Siddhi's rows, positionally.  ``order``: "exact" (Siddhi
    checks the order), "any" (it does not), or "first column" (only that column's order is compared)."""

    id: str
    origin: str
    app: str
    events: list[tuple[Any, ...]]
    expected: list[tuple[Any, ...]]
    query: str | None = None
    request: tuple[Any, ...] | None = None
    order: str = "any"
    columns: tuple[str, ...] | None = None
    notes: list[str] = field(default_factory=list)


CASES = [
    Case(
        "no select returns every attribute",
        "Aggregation1TestCase.incrementalStreamProcessorTest5",
        STOCK + "define aggregation stockAggregation from stockStream "
        "select symbol, avg(price) as avgPrice, sum(price) as totalPrice, (price * quantity) as lastTradeValue "
        "group by symbol aggregate by timestamp every sec...hour ;",
        [("WSO2", 50.0, 60.0, 90, 6, 1496289950000), ("WSO2", 70.0, None, 40, 10, 1496289950000),
         ("WSO2", 60.0, 44.0, 200, 56, 1496289952000), ("WSO2", 100.0, None, 200, 16, 1496289952500),
         ("IBM", 100.0, None, 200, 26, 1496289954000), ("IBM", 100.0, None, 200, 96, 1496289954500)],
        [(1496289952000, "WSO2", 80.0, 160.0, 1600.0), (1496289950000, "WSO2", 60.0, 120.0, 700.0),
         (1496289954000, "IBM", 100.0, 200.0, 9600.0)],
        query='from stockAggregation within "2017-06-** **:**:**" per "seconds"',
        columns=("AGG_TIMESTAMP", "AGG_TIME", "symbol", "avgPrice", "totalPrice", "lastTradeValue"),
    ),
    Case(
        "join with aliases, within and per from the request",
        "Aggregation1TestCase.incrementalStreamProcessorTest6",
        STOCK + "define aggregation stockAggregation from stockStream "
        "select symbol, avg(price) as avgPrice, sum(price) as totalPrice, (price * quantity) as lastTradeValue "
        "group by symbol aggregate by timestamp every sec...year  ; " + INPUT + "@info(name = 'query1') "
        "from inputStream as i join stockAggregation as s within i.startTime, i.endTime per i.perValue "
        "select AGG_TIMESTAMP, s.symbol, avgPrice, totalPrice as sumPrice, lastTradeValue "
        "order by AGG_TIMESTAMP insert all events into outputStream; ",
        [("WSO2", 50.0, 60.0, 90, 6, 1496289950000), ("WSO2", 70.0, None, 40, 10, 1496289950000),
         ("WSO2", 50.0, 60.0, 90, 6, 1496289950000), ("WSO2", 70.0, None, 40, 10, 1496289950000),
         ("IBM", 100.0, None, 200, 26, 1496289951000), ("IBM", 100.0, None, 200, 96, 1496289951000),
         ("IBM", 900.0, None, 200, 60, 1496289952000), ("IBM", 500.0, None, 200, 7, 1496289952000),
         ("WSO2", 60.0, 44.0, 200, 56, 1496289953000), ("WSO2", 100.0, None, 200, 16, 1496289953000),
         ("IBM", 400.0, None, 200, 9, 1496289953000), ("WSO2", 140.0, None, 200, 11, 1496289953000),
         ("IBM", 600.0, None, 200, 6, 1496289954000), ("IBM", 1000.0, None, 200, 9, 1496290016000)],
        [(1496289950000, "WSO2", 60.0, 240.0, 700.0), (1496289951000, "IBM", 100.0, 200.0, 9600.0),
         (1496289952000, "IBM", 700.0, 1400.0, 3500.0), (1496289953000, "WSO2", 100.0, 300.0, 1540.0),
         (1496289953000, "IBM", 400.0, 400.0, 3600.0), (1496289954000, "IBM", 600.0, 600.0, 3600.0),
         (1496290016000, "IBM", 1000.0, 1000.0, 9000.0)],
        request=("IBM", 1, "2017-06-01 04:05:50", "2017-06-01 04:06:57", "seconds"),
        order="first column",
        notes=["two rows in the 04:05:53 bucket: Siddhi gives WSO2 first, tiltframe orders ties by symbol"],
    ),
    Case(
        "a stream query reads the join's output stream",
        "Aggregation1TestCase.incrementalStreamProcessorTest12",
        STOCK + "define aggregation stockAggregation from stockStream "
        "select symbol, avg(price) as avgPrice, sum(price) as totalPrice, (price * quantity) as lastTradeValue, "
        "max(price) as maxPrice, min(price) as minPrice group by symbol aggregate by timestamp every sec...year  ; "
        + INPUT + "from inputStream as i join stockAggregation as s "
        'within "2017-06-01 04:05:50", "2017-06-01 04:06:57" per "seconds" '
        "select AGG_TIMESTAMP, totalPrice, avgPrice, lastTradeValue, s.symbol, maxPrice, minPrice "
        "order by AGG_TIMESTAMP insert into tempStream; @info(name = 'query1') from tempStream "
        "select AGG_TIMESTAMP, totalPrice, avgPrice, lastTradeValue, symbol, maxPrice, minPrice "
        "insert into outputStream ",
        [("WSO2", 50.0, 60.0, 90, 6, 1496289950000), ("WSO2", 70.0, None, 40, 10, 1496289950000),
         ("WSO2", 60.0, 44.0, 200, 56, 1496289953000), ("WSO2", 100.0, None, 200, 16, 1496289953000),
         ("IBM", 900.0, None, 200, 60, 1496289952000), ("IBM", 500.0, None, 200, 7, 1496289952000),
         ("IBM", 100.0, None, 200, 26, 1496289951000), ("IBM", 100.0, None, 200, 96, 1496289951000),
         ("IBM", 400.0, None, 200, 9, 1496289953000), ("WSO2", 140.0, None, 200, 11, 1496289953000),
         ("WSO2", 50.0, 60.0, 90, 6, 1496289950000), ("WSO2", 70.0, None, 40, 10, 1496289950000),
         ("IBM", 600.0, None, 200, 6, 1496289954000), ("IBM", 1000.0, None, 200, 9, 1496290016000)],
        [(1496289950000, 240.0, 60.0, 700.0, "WSO2", 70.0, 50.0),
         (1496289951000, 200.0, 100.0, 9600.0, "IBM", 100.0, 100.0),
         (1496289952000, 1400.0, 700.0, 3500.0, "IBM", 900.0, 500.0),
         (1496289953000, 400.0, 400.0, 3600.0, "IBM", 400.0, 400.0),
         (1496289953000, 300.0, 100.0, 1540.0, "WSO2", 140.0, 60.0),
         (1496289954000, 600.0, 600.0, 3600.0, "IBM", 600.0, 600.0),
         (1496290016000, 1000.0, 1000.0, 9000.0, "IBM", 1000.0, 1000.0)],
        request=("IBM", 1, "2017-06-01 09:35:51 +05:30", "2017-06-01 09:35:52 +05:30", "seconds"),
        order="first column",
        columns=("AGG_TIMESTAMP", "totalPrice", "avgPrice", "lastTradeValue", "symbol", "maxPrice", "minPrice"),
        notes=["two rows in the 04:05:53 bucket: Siddhi's expected lists give both orders"],
    ),
    Case(
        "join without group by, per days",
        "Aggregation1TestCase.incrementalStreamProcessorTest9",
        STOCK + "define aggregation stockAggregation from stockStream "
        "select avg(price) as avgPrice, sum(price) as totalPrice, (price * quantity) as lastTradeValue, "
        "count() as count aggregate by timestamp every min, day, year ;" + INPUT + "@info(name = 'query1') "
        "from inputStream as i join stockAggregation as s within 1496200000000L, 1596434876000L per \"days\" "
        "select AGG_TIMESTAMP, s.avgPrice, totalPrice, lastTradeValue, count "
        "order by AGG_TIMESTAMP insert all events into outputStream; ",
        [("WSO2", 50.0, 60.0, 90, 6, 1496289950000), ("WSO2", 70.0, None, 40, 10, 1496289950000),
         ("WSO2", 60.0, 44.0, 200, 56, 1496289952000), ("WSO2", 100.0, None, 200, 16, 1496289952000),
         ("IBM", 100.0, None, 200, 26, 1496289954000), ("IBM", 100.0, None, 200, 96, 1496289954000),
         ("IBM", 900.0, None, 200, 60, 1496289956000), ("IBM", 500.0, None, 200, 7, 1496289956000),
         ("IBM", 400.0, None, 200, 9, 1496290016000), ("IBM", 600.0, None, 200, 6, 1496290076000),
         ("CISCO", 700.0, None, 200, 20, 1496293676000), ("WSO2", 60.0, 44.0, 200, 56, 1496297276000),
         ("CISCO", 800.0, None, 100, 10, 1496383676000), ("CISCO", 900.0, None, 100, 15, 1496470076000),
         ("IBM", 100.0, None, 200, 96, 1499062076000), ("IBM", 400.0, None, 200, 9, 1501740476000),
         ("WSO2", 60.0, 44.0, 200, 6, 1533276476000), ("WSO2", 260.0, 44.0, 200, 16, 1564812476000),
         ("CISCO", 260.0, 44.0, 200, 16, 1596434876000)],
        [(1496275200000, 303.3333333333333, 3640.0, 3360.0, 12), (1496361600000, 800.0, 800.0, 8000.0, 1),
         (1496448000000, 900.0, 900.0, 13500.0, 1), (1499040000000, 100.0, 100.0, 9600.0, 1),
         (1501718400000, 400.0, 400.0, 3600.0, 1), (1533254400000, 60.0, 60.0, 360.0, 1),
         (1564790400000, 260.0, 260.0, 4160.0, 1), (1596412800000, 260.0, 260.0, 4160.0, 1)],
        request=("IBM", 1, "2017-06-01 09:35:51 +05:30", "2017-06-01 09:35:52 +05:30", "seconds"),
        order="exact",
    ),
    Case(
        "join without aliases, per from an unqualified request attribute",
        "Aggregation1TestCase.incrementalStreamProcessorTest38",
        STOCK_TEXT_TIME + TEXT_AGGREGATION + INPUT + "@info(name = 'query1') "
        "from inputStream join stockAggregation "
        "within \"2017-06-01 09:35:00 +05:30\", \"2017-06-01 10:37:57 +05:30\" per perValue "
        "select AGG_TIMESTAMP, avgPrice, totalPrice as sumPrice, lastTradeValue "
        "insert all events into outputStream; ",
        TEXT_TIMES,
        [(1496289900000, 198.0, 1980.0, 3500.0), (1496289960000, 400.0, 400.0, 3600.0),
         (1496293620000, 700.0, 700.0, 14000.0), (1496290020000, 600.0, 600.0, 3600.0)],
        request=("IBM", 1, "2017-06-01 09:35:51 +05:30", "2017-06-01 09:35:52 +05:30", "minutes"),
    ),
    Case(
        "join without aliases, within and per from unqualified request attributes",
        "Aggregation1TestCase.incrementalStreamProcessorTest46",
        STOCK_TEXT_TIME + TEXT_AGGREGATION + INPUT + "@info(name = 'query1') "
        "from inputStream join stockAggregation within startTime, endTime per perValue "
        "select AGG_TIMESTAMP, avgPrice, totalPrice as sumPrice insert all events into outputStream; ",
        [("WSO2", 50.0, 60.0, 90, 6, "2017-06-01 04:35:49 +05:30"), ("WSO2", 50.0, 60.0, 90, 6, "2017-06-01 04:05:50"),
         ("IBM", 50.0, 60.0, 90, 6, "2017-06-01 04:05:51"), ("WSO2", 60.0, 44.0, 200, 56, "2017-06-01 04:05:52"),
         ("WSO2", 100.0, None, 200, 16, "2017-06-01 04:05:52"), ("IBM", 100.0, None, 200, 26, "2017-06-01 04:05:54"),
         ("IBM", 100.0, None, 200, 96, "2017-06-01 04:05:54"), ("IBM", 900.0, None, 200, 60, "2017-06-01 04:05:56"),
         ("IBM", 500.0, None, 200, 7, "2017-06-01 04:05:56"), ("IBM", 400.0, None, 200, 9, "2017-06-01 04:06:56"),
         ("IBM", 600.0, None, 200, 6, "2017-06-01 09:36:58 +05:30"),
         ("IBM", 600.0, None, 200, 6, "2017-06-01 04:07:56 +05:30"),
         ("IBM", 700.0, None, 200, 20, "2017-06-01 11:07:56 +05:30")],
        [(1493596800000, 325.0, 650.0), (1496275200000, 323.6363636363636, 3560.0)],
        request=("IBM", 1, "2016-05-30 08:35:51 +05:30", "2018-06-02 10:35:52 +05:30", "months"),
    ),
    Case(
        "an aggregate attribute alone, ordered by an attribute not selected",
        "SelectOptimisationAggregationTestCase.aggregationFunctionTestcase1",
        STOCK + "define aggregation stockAggregation from stockStream select count() as count "
        "aggregate by timestamp every sec, min ;" + INPUT + "@info(name = 'query1') "
        "from inputStream as i join stockAggregation as s within 1496200000000L, 1596434876000L "
        "per \"seconds\" select count order by AGG_TIMESTAMP insert all events into outputStream; ",
        COUNTED,
        [(2,), (2,), (2,), (2,), (1,), (1,), (1,)],
        request=REQUEST_SECONDS,
        order="exact",
    ),
    Case(
        "join selecting qualified attributes",
        "SelectOptimisationAggregationTestCase.aggregationFunctionTestcase3",
        STOCK + "define aggregation stockAggregation from stockStream select symbol, count() as count "
        "group by symbol aggregate by timestamp every sec, min ;" + INPUT + "@info(name = 'query1') "
        "from inputStream as i join stockAggregation as s within 1496200000000L, 1596434876000L "
        "per \"seconds\" select AGG_TIMESTAMP, s.symbol, s.count insert all events into outputStream; ",
        COUNTED,
        [(1496289950000, "WSO2", 2), (1496289952000, "WSO2", 2), (1496289954000, "IBM", 2),
         (1496289956000, "IBM", 2), (1496290016000, "IBM", 1), (1496290076000, "IBM", 1),
         (1496293676000, "CISCO", 1)],
        request=REQUEST_SECONDS,
    ),
    Case(
        "join grouping the retrieved rows again",
        "SelectOptimisationAggregationTestCase.aggregationFunctionTestcase4",
        STOCK + "define aggregation stockAggregation from stockStream select symbol, count() as count "
        "group by symbol aggregate by timestamp every sec, min ;" + INPUT + "@info(name = 'query1') "
        "from inputStream as i join stockAggregation as s within 1496200000000L, 1596434876000L "
        "per \"seconds\" select s.symbol, sum(count) as count group by s.symbol "
        "insert all events into outputStream; ",
        COUNTED,
        [("WSO2", 4), ("IBM", 6), ("CISCO", 1)],
        request=REQUEST_SECONDS,
    ),
    Case(
        "on-demand query ordered by AGG_TIMESTAMP",
        "SelectOptimisationAggregationTestCase.aggregationFunctionTestcase8",
        STOCK + "define aggregation stockAggregation from stockStream select count() as count "
        "aggregate by timestamp every sec, min ;",
        COUNTED,
        [(1496289950000, 2), (1496289952000, 2), (1496289954000, 2), (1496289956000, 2),
         (1496290016000, 1), (1496290076000, 1), (1496293676000, 1)],
        query="from stockAggregation within 1496200000000L, 1596434876000L per \"seconds\" "
        "select AGG_TIMESTAMP, count order by AGG_TIMESTAMP;",
        order="exact",
    ),
    Case(
        "on-demand query grouping by symbol",
        "SelectOptimisationAggregationTestCase.aggregationFunctionTestcase9",
        STOCK + "define aggregation stockAggregation from stockStream select symbol, count() as count "
        "group by symbol aggregate by timestamp every sec, min ;",
        COUNTED,
        [("WSO2", 4), ("IBM", 6), ("CISCO", 1)],
        query="from stockAggregation within 1496200000000L, 1596434876000L per \"seconds\" "
        "select symbol, sum(count) as count group by symbol;",
    ),
    Case(
        "join without on, grouped by an aggregation attribute",
        "SelectOptimisationAggregationTestCase.aggregationFunctionTestcase10",
        STOCK + SUMMED_AGGREGATION + "define stream inputStream (symbol string); @info(name = 'query1') "
        "from inputStream as i join stockAggregation as s within 1496200000000L, 1596535449000L "
        "per \"seconds\" select i.symbol, sum(s.sumPrice) as sumPrice group by s.symbol "
        "insert all events into outputStream; ",
        SUMMED,
        [("IBM", 75.0), ("IBM", 50.0), ("IBM", 130.0), ("IBM", 100.0), ("IBM", 602.0), ("IBM", 1001.0)],
        request=("IBM",),
    ),
    Case(
        "grouped by a request attribute, ordered by AGG_TIMESTAMP",
        "SelectOptimisationAggregationTestCase.aggregationFunctionTestcase12",
        STOCK + SUMMED_AGGREGATION + "define stream inputStream (symbol string); @info(name = 'query1') "
        "from inputStream as i join stockAggregation as s within 1496200000000L, 1596535449000L "
        "per \"seconds\" select i.symbol, sum(sumPrice) as totalPrice group by i.symbol "
        "order by AGG_TIMESTAMP insert all events into outputStream; ",
        SUMMED,
        [("IBM", 1958.0)],
        request=("IBM",),
        order="exact",
    ),
    Case(
        "join without aliases, stream and aggregation names as qualifiers",
        "SelectOptimisationAggregationTestCase.aggregationFunctionTestcase13",
        STOCK + "define aggregation stockAggregation from stockStream "
        "select symbol, avg(price) as avgPrice, sum(price) as totalPrice, (price * quantity) as lastTradeValue, "
        "count() as count group by symbol aggregate by timestamp every sec...year ;" + INPUT
        + "@info(name = 'query1') from inputStream join stockAggregation "
        "on inputStream.symbol == stockAggregation.symbol within \"2017-06-01 04:05:**\" per \"seconds\" "
        "select stockAggregation.symbol, sum(totalPrice) as totalPrice group by stockAggregation.symbol "
        "order by AGG_TIMESTAMP insert all events into outputStream; ",
        [("WSO2", 50.0, 60.0, 90, 6, 1496289950000), ("WSO2", 70.0, None, 40, 10, 1496289950000),
         ("WSO2", 60.0, 44.0, 200, 56, 1496289949000), ("WSO2", 100.0, None, 200, 16, 1496289949000),
         ("IBM", 100.0, None, 200, 26, 1496289948000), ("IBM", 100.0, None, 200, 96, 1496289948000),
         ("IBM", 900.0, None, 200, 60, 1496289947000), ("IBM", 500.0, None, 200, 7, 1496289947000),
         ("IBM", 400.0, None, 200, 9, 1496289946000)],
        [("IBM", 2000.0)],
        request=REQUEST_SECONDS,
        order="exact",
    ),
    Case(
        "on-demand query grouping by AGG_TIMESTAMP",
        "SelectOptimisationAggregationTestCase.aggregationFunctionTestcase15",
        STOCK + "@purge(enable='false') define aggregation stockAggregation from stockStream "
        "select symbol, sum(price) as totalPrice group by symbol aggregate by timestamp every sec...hour ;",
        [("WSO2", 50.0, 60.0, 90, 6, 1496289950000), ("IBM", 70.0, None, 40, 10, 1496289950000),
         ("WSO2", 60.0, 44.0, 200, 56, 1496289952000), ("IBM", 100.0, None, 200, 16, 1496289952500),
         ("IBM", 100.0, None, 200, 26, 1496289954000), ("WSO2", 100.0, None, 200, 96, 1496289954500)],
        [(1496289950000, 120.0), (1496289952000, 160.0), (1496289954000, 200.0)],
        query="from stockAggregation within \"2017-06-** **:**:**\" per \"seconds\" "
        "select AGG_TIMESTAMP, sum(totalPrice) as totalPrice group by AGG_TIMESTAMP;",
    ),
]


def _write_jsonl(folder: Path, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    folder.mkdir(parents=True)
    path = folder / "part-000.jsonl"
    path.write_text("".join(json.dumps(dict(zip(columns, row, strict=True))) + "\n" for row in rows))
    past = time.time() - 100
    os.utime(path, (past, past))


def _answer(spark, tmp: Path, case: Case) -> pd.DataFrame:
    """The rows tiltframe gives for ``case``: the join's output stream, or the on-demand query's answer."""
    app = tf.load_app(case.app)
    _write_jsonl(tmp / "stock", STOCK_COLUMNS, case.events)
    inputs = {"stockStream": tmp / "stock"}
    outputs = {}
    if case.request is not None:
        names = [a.name for a in app.stream("inputStream").attributes]
        _write_jsonl(tmp / "requests", tuple(names), [case.request])
        inputs["inputStream"] = tmp / "requests"
        outputs["outputStream"] = JsonLinesSink(tmp / "out")
    tf.run(app, inputs, data_dir=tmp / "data", spark=spark, outputs=outputs)
    if case.query is not None:
        return tf.query(app, case.query, data_dir=tmp / "data")
    lines = [json.loads(line) for f in sorted((tmp / "out").glob("*.jsonl")) for line in f.read_text().splitlines()]
    return pd.DataFrame(lines)


def _same(a: Any, b: Any) -> bool:
    if isinstance(b, float):
        return a is not None and math.isclose(float(a), b, rel_tol=1e-6)
    return bool(a == b)


def _matches(got: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]) -> bool:
    return len(got) == len(expected) and all(
        len(g) == len(e) and all(_same(x, y) for x, y in zip(g, e, strict=True)) for g, e in zip(got, expected,
                                                                                              strict=True)
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.origin.split(".")[-1] for c in CASES])
def test_siddhi_case(spark, tmp_path: Path, case: Case) -> None:
    frame = _answer(spark, tmp_path, case)
    if case.columns is not None:
        assert list(frame.columns) == list(case.columns)
    compared = frame.drop(columns=[AGG_TIME], errors="ignore")
    got = [tuple(None if pd.isna(v) else v for v in row) for row in compared.itertuples(index=False)]
    if case.order == "first column":
        firsts = [row[0] for row in got]
        assert firsts == sorted(firsts), case.notes
    if case.order == "exact":
        assert _matches(got, case.expected), got
    else:
        key = repr
        assert _matches(sorted(got, key=key), sorted(case.expected, key=key)), got


@pytest.mark.slow
def test_cli_answers_an_on_demand_query_with_group_by(spark, tmp_path: Path) -> None:
    """SelectOptimisationAggregationTestCase.aggregationFunctionTestcase9 through ``tiltframe query``; a
    stream query given to it is refused (it runs in an app), at its position, with exit code 2."""
    case = next(c for c in CASES if c.origin.endswith("aggregationFunctionTestcase9"))
    _answer(spark, tmp_path, case)
    (tmp_path / "app.siddhi").write_text(case.app)
    args = ["query", str(tmp_path / "app.siddhi"), "--data-dir", str(tmp_path / "data")]
    done = CliRunner().invoke(cli, [*args[:2], str(case.query), *args[2:], "--format", "json"])
    assert done.exit_code == 0, done.output
    assert sorted((r["symbol"], r["count"]) for r in json.loads(done.stdout)) == sorted(case.expected)
    refused = CliRunner().invoke(cli, [*args[:2], "from stockStream[price > 10] select symbol", *args[2:]])
    assert refused.exit_code == 2
    assert "a stream query (from stockStream ...) runs as part of an app" in refused.output
    assert "line 1, column 1" in refused.output


# --- queries Siddhi runs and tiltframe refuses on purpose ------------------------------------------------


def test_a_selected_attribute_neither_grouped_nor_aggregated_is_refused() -> None:
    """SelectOptimisationAggregationTestCase.aggregationFunctionTestcase11 selects s.symbol while grouping by
    i.symbol; Siddhi answers the symbol of whichever row it met last (WSO22 there).  tiltframe refuses the
    query at the attribute, as SQL does, rather than answer a value that depends on row order."""
    text = (
        STOCK + SUMMED_AGGREGATION + "define stream inputStream (symbol string);\n@info(name = 'query1') "
        "from inputStream as i join stockAggregation as s within 1496200000000L, 1596535449000L "
        "per \"seconds\" select s.symbol, sum(s.sumPrice) as sumPrice group by i.symbol "
        "order by AGG_TIMESTAMP insert all events into outputStream; "
    )
    with pytest.raises(DefinitionError, match=r"'s.symbol' is neither in group by nor inside an aggregate") as caught:
        tf.load_app(text)
    assert (caught.value.line, caught.value.column) == (4, 132)


def test_a_retrieval_without_within_and_per_is_refused() -> None:
    """Aggregation2TestCase.incrementalStreamProcessorTest50: ``from stockAggregation select *`` fails to
    compile in Siddhi, which needs within and per for an aggregation; so does tiltframe, saying so."""
    app = tf.load_app(STOCK + "define aggregation stockAggregation from stockStream select symbol, "
                      "avg(price) as avgPrice group by symbol aggregate by timestamp every sec...hour ;")
    with pytest.raises(DefinitionError, match=r"needs 'within <time range> \[per <duration>\]'") as caught:
        tf.query(app, "from stockAggregation  select * ")
    assert (caught.value.line, caught.value.column) == (1, 1)


def test_a_duration_the_aggregation_does_not_keep_is_refused() -> None:
    """AggregationFindQueryValidationTestCase.onDemandQueryValidationTestCase2: a join asking per 'test'
    fails to compile in Siddhi; so does it in tiltframe, at the duration.  (The test's ``@info`` on the
    aggregation is left out: tiltframe takes ``@info`` on queries only.)"""
    text = (
        "define stream stockStream (arrival long, symbol string, price float, volume int);\n"
        "define stream triggerStream (arrival int);\n"
        "define aggregation stockAggregation from stockStream select sum(price) as sumPrice "
        "group by price aggregate every sec, min, hour, day;\n"
        "from triggerStream join stockAggregation within '2018-**-** **:**:**' per 'test' select * "
        "insert into ignore;"
    )
    with pytest.raises(DefinitionError, match="unknown duration 'test'"):
        tf.load_app(text)
