"""The bad-input catalogue's harness: run an app over real files on a real store, then check the one
invariant every kind of bad input must keep.

Each ``test_<area>.py`` of this package lists kinds of bad input (events, files, file names, definitions,
CLI usage, stores) with the outcome each gets: the right answer, or a recorded and explained refusal.
Nothing may vanish: after every run ``events read = aggregated + moved + rejected``, in the run's totals
and in what the store says it holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

import tiltframe as tf
from tests.servers import app_with_store, fresh_database
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.engine.rollup.reports import PipelineTotals
from tiltframe.model.app import AppSpec
from tiltframe.model.durations import Granularity, Unit
from tiltframe.store.base import AggregationInfo
from tiltframe.store.open_stores import StoreRegistry

#: The stores every store-sensitive kind runs on: the embedded one and the two servers.
#: The app the tests of input files feed: per key, the sum of ``v`` and the count of events, every sec ... day.
TOTALS_APP = """
define stream S (k string, v double, ts long);
define aggregation A from S
select k, sum(v) as total, count() as events
group by k
aggregate by ts every sec ... day;
"""
#: 2024-01-05 00:00:00 GMT: where those tests' event times start.
T0 = 1_704_412_800_000


@contextmanager
def store_url(kind: str) -> Iterator[str | None]:
    """A fresh database of ``kind`` (None for the embedded SQLite store)."""
    with nullcontext(None) if kind == "sqlite" else fresh_database(kind) as url:
        yield url


@dataclass
class Outcome:
    """What one run left: the run's totals per aggregation, and the store to look into."""

    app: AppSpec
    data_dir: Path
    totals: Mapping[str, PipelineTotals]

    def _layout(self, aggregation: str) -> AggregationLayout:
        return AggregationLayout.of(self.app, aggregation)

    def rows(self, aggregation: str, unit: Unit = Unit.SECONDS) -> pd.DataFrame:
        """The stored partial rows of one level."""
        layout = self._layout(aggregation)
        stores = StoreRegistry(self.data_dir, read_only=True)
        try:
            return stores.for_aggregation(layout.spec).read(layout, Granularity(unit))
        finally:
            stores.close()

    def recorded(self, aggregation: str, limit: int = 10_000) -> pd.DataFrame:
        """The rejected and moved events with their reasons."""
        layout = self._layout(aggregation)
        stores = StoreRegistry(self.data_dir, read_only=True)
        try:
            return stores.for_aggregation(layout.spec).rejected(layout, limit)
        finally:
            stores.close()

    def info(self, aggregation: str) -> AggregationInfo:
        layout = self._layout(aggregation)
        stores = StoreRegistry(self.data_dir, read_only=True)
        try:
            return stores.for_aggregation(layout.spec).info(layout)
        finally:
            stores.close()

    def query(self, text: str) -> pd.DataFrame:
        return tf.query(self.app, text, data_dir=self.data_dir)


def check_invariant(outcome: Outcome) -> None:
    """``events read = aggregated + moved + rejected`` in every run total and in the store's records."""
    for name, totals in outcome.totals.items():
        assert totals.events_read == totals.events_aggregated + totals.events_moved + totals.events_rejected, name
        info = outcome.info(name)
        assert info.events_read == info.events_aggregated + info.events_moved + info.events_rejected, name
        assert info.events_read >= totals.events_read, name


def run(
    spark: object,
    app_text: str,
    inputs: Mapping[str, Path | object],
    data_dir: Path,
    *,
    store: str | None = None,
    **options: object,
) -> Outcome:
    """Run ``app_text`` (with ``store``'s ``@store`` when given: a JDBC URL) over ``inputs`` until they
    are read, check the invariant and return what it left."""
    text, env = app_with_store(app_text, store)
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        app = tf.load_app(text)
        result = tf.run(app, dict(inputs), data_dir=data_dir, spark=spark, **options)
        outcome = Outcome(app, data_dir, result.aggregations)
        check_invariant(outcome)
    return outcome
