"""A store whose buckets have no value for its sketches, both ways they are stored: NULL states, as runs
store them now, and *empty* sketch binaries, as earlier runs wrote them (Spark's ``hll_sketch_agg`` and
``kll_sketch_agg_double`` over nothing but NULLs); the readers' tests (retrieval, verify, HTTP, the page)
share it.

Key ``b`` has only missing values (empty binaries written over its states); key ``c`` had none in the first
run (empty binaries too) and gets values in the second, which the store merges into those; key ``a``'s
second day has none (NULL states, from the second run).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import datasketches as ds
import sqlalchemy as sa
from ddsketch import DDSketch
from ddsketch.pb.proto import DDSketchProto
from hdrh.histogram import HdrHistogram

import tiltframe as tf
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.store.open_stores import StoreRegistry

APP = """
define stream S (k string, x double, n long, ts string);
define aggregation A from S
select k, count() as c, kll(x, [0.5]) as q, dds(x, [0.5]) as d, hdr(n, [0.5]) as h, distinctCount(x) as u,
       avg(x) as m
group by k aggregate by ts every hour, day;
"""
FIRST = """k,x,n,ts
a,1.5,3,2024-01-01T10:00:00Z
a,2.5,,2024-01-01T10:30:00Z
b,,,2024-01-01T11:00:00Z
b,NaN,,2024-01-01T11:10:00Z
c,,,2024-01-01T12:00:00Z
"""
SECOND = """k,x,n,ts
c,4.0,7,2024-01-01T12:30:00Z
c,6.0,9,2024-01-01T13:00:00Z
a,,,2024-01-02T09:00:00Z
"""
DAY1, DAY2 = 1_704_067_200_000, 1_704_153_600_000
HOUR = 3_600_000
#: The sketch state columns and an empty sketch of each kind, as each library writes one.
EMPTY = {
    "q_KLL": ds.kll_doubles_sketch(200).serialize(),
    "u_HLL": ds.hll_sketch(12, ds.tgt_hll_type.HLL_8).serialize_updatable(),
    "d_DDS": DDSketchProto.to_proto(DDSketch(0.01)).SerializeToString(),
    "h_HDR": base64.b64decode(HdrHistogram(1, 2**63 - 1, 2).encode()),
}
#: Per day and key: count, q_p50, d_p50, h_p50, u, m.  The values are few: HDR is exact, DDS within 1%, and
#: KLL's median of two values either of them (each has rank 1/2).
DAYS = {
    (DAY1, "a"): (2, (1.5, 2.5), 1.5, 3.0, 2, 2.0),
    (DAY1, "b"): (2, None, None, None, 0, None),
    (DAY1, "c"): (3, (4.0, 6.0), 4.0, 7.0, 2, 5.0),
    (DAY2, "a"): (1, None, None, None, 0, None),
}


def sketch_states(data: Path, app: tf.AppSpec) -> dict[tuple[str, int, str], dict[str, Any]]:
    """Every stored sketch state by (table, bucket, key)."""
    layout = AggregationLayout.of(app, "A")
    stores = StoreRegistry(data)
    try:
        store = stores.for_aggregation(layout.spec)
        out = {}
        for g in layout.spec.granularities:
            name = layout.table_name(g)
            t = sa.table(name, *(sa.column(c) for c in ("AGG_TIMESTAMP", "k", *EMPTY)))
            with store.write_transaction("read the states") as conn:
                for row in conn.execute(sa.select(t)).mappings():
                    out[(name, row["AGG_TIMESTAMP"], row["k"])] = {c: row[c] for c in EMPTY}
        return out
    finally:
        stores.close()


def _write_empty_sketches(app: tf.AppSpec, data: Path, keys: tuple[str, ...]) -> None:
    """Over the states of ``keys``' rows at every level, the empty sketches earlier runs stored there."""
    layout = AggregationLayout.of(app, "A")
    stores = StoreRegistry(data)
    try:
        store = stores.for_aggregation(layout.spec)
        with store.write_transaction("store empty sketches") as conn:
            for g in layout.spec.granularities:
                t = sa.table(layout.table_name(g), sa.column("k"), *(sa.column(c) for c in EMPTY))
                conn.execute(sa.update(t).where(t.c.k.in_(keys)).values(EMPTY))
    finally:
        stores.close()


def build(spark: Any, tmp: Path) -> tuple[tf.AppSpec, Path, Path]:
    """The app, its data directory and its input folder, after both runs."""
    app_file, inbox, data = tmp / "app.siddhi", tmp / "in", tmp / "data"
    app_file.write_text(APP, encoding="utf-8")
    inbox.mkdir()
    app = tf.load_app(APP)
    (inbox / "1.csv").write_text(FIRST, encoding="utf-8")
    tf.run(app, {"S": inbox}, data_dir=data, spark=spark)
    _write_empty_sketches(app, data, ("b", "c"))
    (inbox / "2.csv").write_text(SECOND, encoding="utf-8")
    tf.run(app, {"S": inbox}, data_dir=data, spark=spark)
    return app, data, inbox
