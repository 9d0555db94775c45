"""Any sequence of definition changes and batches, as property tests on the store: measures removed and
added back, levels removed and added back, going back to an earlier definition, with batches of random,
out-of-order events in between.  At the end every level of the last definition equals pandas over every
event written: each measure exact from the time it was last added on, NULL before (never partial), and a
level added exact everywhere (built from the finer level, which holds every event)."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import hypothesis.strategies as st
import pandas as pd
import pyarrow as pa
from hypothesis import HealthCheck, given, settings

import tiltframe as tf
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.store import DB_FILE_NAME
from tiltframe.store.base import BatchStats, BatchWrite
from tiltframe.store.sql import SqlStore

MEASURES = {"total": "sum(price) as total", "n": "count() as n", "big": "max(volume) as big",
            "vol": "sum(volume) as vol"}
LEVELS = {"sec ... min": (1_000, 60_000), "sec ... hour": (1_000, 60_000, 3_600_000)}
T0 = 1_700_000_000_000


TEXT = """define stream S (symbol string, price double, volume long, ts long);
define aggregation R from S select symbol, {select} group by symbol aggregate by ts every {levels};"""


def layout_of(measures: tuple[str, ...], levels: str) -> AggregationLayout:
    app = tf.load_app(TEXT.format(select=", ".join(MEASURES[m] for m in measures), levels=levels))
    return AggregationLayout.of(app, "R")


DEFINITIONS = [layout_of(m, lv) for lv in LEVELS for r in (1, 2) for m in itertools.combinations(MEASURES, r)]


def partial_rows(layout: AggregationLayout, events: pd.DataFrame, width: int) -> pa.Table:
    """What the engine writes for ``events`` at a level of ``width`` ms: one row per bucket and symbol."""
    grouped = events.assign(AGG_TIMESTAMP=events["ts"] // width * width).groupby(["AGG_TIMESTAMP", "symbol"])
    out = grouped.agg(AGG_EVENT_TIMESTAMP=("ts", "max"), AGG_COUNT=("ts", "count"), total_SUM=("price", "sum"),
                      n_COUNT=("ts", "count"), big_MAX=("volume", "max"), vol_SUM=("volume", "sum")).reset_index()
    return pa.Table.from_pandas(out[[c for c in layout.column_types]], preserve_index=False)


events_strategy = st.lists(
    st.tuples(st.sampled_from("AB"), st.integers(1, 50), st.integers(1, 1000), st.integers(0, 7_200_000)),
    min_size=1, max_size=30,
).map(lambda rows: pd.DataFrame(rows, columns=["symbol", "price", "volume", "ts"]).assign(
    ts=lambda f: T0 + f["ts"], price=lambda f: f["price"].astype(float)))
steps_strategy = st.lists(st.one_of(events_strategy, st.integers(0, len(DEFINITIONS) - 1)), min_size=1, max_size=8)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], report_multiple_bugs=False)
@given(first=st.integers(0, len(DEFINITIONS) - 1), steps=steps_strategy)
def test_every_sequence_of_changes_ends_equal_to_the_oracle(first: int, steps: list) -> None:
    with tempfile.TemporaryDirectory() as tmp, SqlStore.sqlite(Path(tmp) / DB_FILE_NAME) as store:
        layout = DEFINITIONS[first]
        store.ensure_schema(layout)
        written: list[pd.DataFrame] = []
        batch_id = 0
        for step in steps:
            if isinstance(step, int):
                layout = DEFINITIONS[step]
                store.change_definition(layout)
                continue
            widths = next(w for w in LEVELS.values() if len(w) == len(layout.spec.granularities))
            levels = {g: partial_rows(layout, step, w) for g, w in zip(layout.spec.granularities, widths, strict=True)}
            stats = BatchStats(len(step), len(step), 0, int(step["ts"].min()), int(step["ts"].max()))
            assert store.write_batch(layout, BatchWrite("p", batch_id, stats, levels))
            batch_id += 1
            written.append(step)
        events = pd.concat(written, ignore_index=True) if written else None
        complete = store.complete_from(layout)
        app = tf.load_app(TEXT.format(select=", ".join(MEASURES[i.alias] for i in layout.spec.aggregates),
                                      levels=next(k for k, w in LEVELS.items()
                                                  if len(w) == len(layout.spec.granularities))))
        names = [i.alias for i in layout.spec.aggregates]
        for per, width in zip(("seconds", "minutes", "hours"), LEVELS["sec ... hour"], strict=False):
            if len(layout.spec.granularities) == 2 and per == "hours":
                continue
            got = tf.query(app, f"from R within 0L, 9000000000000L per '{per}' select AGG_TIMESTAMP, symbol, "
                                f"{', '.join(names)}", data_dir=tmp)  # the reader's answer
            if events is None:
                assert got.empty
                continue
            want = partial_rows(layout, events, width).to_pandas()
            assert got[["AGG_TIMESTAMP", "symbol"]].values.tolist() == want[["AGG_TIMESTAMP", "symbol"]].values.tolist()
            for m in names:
                exact = want[{"total": "total_SUM", "n": "n_COUNT", "big": "big_MAX", "vol": "vol_SUM"}[m]]
                early = (want["AGG_TIMESTAMP"] < complete.get(m, -(2**62))).to_numpy()
                values = got[m].to_numpy(dtype=object)
                assert all(pd.isna(v) for v in values[early]), (per, m)
                assert list(values[~early]) == list(exact[~early]), (per, m)
