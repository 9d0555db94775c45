"""Sketch states stored in an older format, rewritten in the current one (``tiltframe migrate``).

Readers take both formats, so a store keeps answering before it is migrated; the rewrite makes every
state readable by other tools (DDSketch: tiltframe's JSON before, the DDSketch libraries' protobuf now).
It keeps each state's content, so readers may run beside it, and it goes chunk by chunk, each chunk one
write transaction that excludes the aggregation's pipelines.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiltframe.aggregates.layout import AGG_TIMESTAMP, AggregationLayout
from tiltframe.aggregates.sketches.stored import TO_STORED
from tiltframe.aggregates.states import Merge

#: Rows rewritten per transaction.
CHUNK_ROWS = 5000

#: The sketch kinds once stored in another format (DDSketch as JSON); the others were always stored as now.
OLDER_FORMATS = (Merge.DDS,)

#: The first byte of an older (JSON) state; the current formats never start with it.
_JSON_START = b"{"


def rewritable(layout: AggregationLayout) -> list[str]:
    """The state columns of ``layout`` whose stored format has changed."""
    return [s.name for s in layout.states if s.merge in OLDER_FORMATS]


def rewrite_chunk(conn: Connection, layout: AggregationLayout, table: sa.Table, after: int | None) -> tuple[int, int]:
    """Rewrite up to :data:`CHUNK_ROWS` rows of ``table`` holding a state in an older format, in bucket
    order from bucket ``after`` on (None: the first); returns how many and the last bucket seen, from
    which the next chunk goes on (each chunk reads the primary key's range, not the whole table)."""
    kinds = {s.name: s.merge for s in layout.states if s.merge in OLDER_FORMATS}
    older = sa.literal(_JSON_START, sa.LargeBinary())
    start = table.c[AGG_TIMESTAMP]
    where = [sa.or_(*(sa.func.substr(table.c[name], 1, 1) == older for name in kinds))]
    if after is not None:  # rows of that bucket already rewritten no longer match
        where.append(start >= after)
    keys = list(layout.stored_key_names)
    query = (sa.select(*(table.c[k] for k in keys), *(table.c[name] for name in kinds)).where(*where)
             .order_by(start).limit(CHUNK_ROWS))
    rows = conn.execute(query).all()
    if not rows:
        return 0, after or 0
    params: list[dict[str, Any]] = []
    for row in rows:
        values = row._mapping
        params.append({**{f"k_{k}": values[k] for k in keys},
                       **{f"s_{name}": TO_STORED[kind](values[name]) for name, kind in kinds.items()}})
    update = (sa.update(table).where(*(table.c[k] == sa.bindparam(f"k_{k}") for k in keys))
              .values({name: sa.bindparam(f"s_{name}") for name in kinds}))
    conn.execute(update, params)
    return len(rows), int(rows[-1]._mapping[AGG_TIMESTAMP])
