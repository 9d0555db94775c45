"""Queries over streams and aggregations: Siddhi's retrieval (``from Agg within ... per ...``) and plain
stream queries (``from S[filter] select ... insert into T``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tiltframe.model.expressions import Expr, Pos
from tiltframe.model.streams import Annotation

# --- retrieval ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutputItem:
    """One ``select`` item of a retrieval query."""

    expr: Expr
    alias: str | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class OrderItem:
    expr: Expr
    ascending: bool = True


@dataclass(frozen=True, slots=True)
class RetrievalQuery:
    """``from [Req as b join] Agg as a [on ...] within ... per ... [select ...] [group by ...] [having ...]
    [order by ...] [limit n] [offset n] [insert into]``, Siddhi's on-demand query and aggregation join.

    ``within`` holds one expression (a pattern such as ``"2018-01-** **:**:**"``) or two (start, end).
    Without ``per`` (None) the answer is one row per group with the totals of the whole range
    (``tiltframe.retrieval.range_totals``).
    ``select`` is ``None`` for ``select *`` or no select clause: every attribute, as Siddhi returns them.
    ``group_by``, ``having`` and the aggregate calls of ``select`` (``sum(total)``) aggregate the retrieved
    rows again, per request (``tiltframe.retrieval.grouping``).  After validation
    (``lang.checks.retrieval``) every attribute names its side: request attributes carry the request
    stream's alias (or name), aggregation attributes the aggregation's; an unqualified name in ``having`` or
    ``order by`` is a selected column.
    """

    aggregation: str
    within: tuple[Expr, ...]
    per: Expr | None
    aggregation_alias: str | None = None
    request_stream: str | None = None
    request_alias: str | None = None
    on: Expr | None = None
    select: tuple[OutputItem, ...] | None = None
    order_by: tuple[OrderItem, ...] = ()
    limit: int | None = None
    group_by: tuple[Expr, ...] = ()
    having: Expr | None = None
    offset: int | None = None
    insert_into: str | None = None
    output_events: str | None = None
    name: str | None = None
    annotations: tuple[Annotation, ...] = field(default=(), compare=False)
    pos: Pos | None = field(default=None, compare=False, repr=False)

    @property
    def request_ref(self) -> str | None:
        """How a request attribute is qualified once resolved: the request's alias, else its stream's name."""
        return self.request_alias or self.request_stream

    @property
    def aggregation_ref(self) -> str:
        """How an aggregation attribute is qualified once resolved: the alias, else the aggregation's name."""
        return self.aggregation_alias or self.aggregation


@dataclass(frozen=True, slots=True)
class StreamQuery:
    """``from S[filter] select ... insert into T``, Siddhi's plain stream query: each event of ``source`` the
    filter passes becomes one event of ``target``, its attributes computed by ``select`` (no window, no
    state).  ``select`` is None for ``select *`` or no select clause.  Validation
    (``lang.checks.plain_queries``) fills ``outputs``: each attribute of ``target`` with its expression over
    ``source``, and adds ``target`` to the app's streams unless it is defined."""

    source: str
    target: str
    where: Expr | None = None
    select: tuple[OutputItem, ...] | None = None
    name: str | None = None
    outputs: tuple[tuple[str, Expr], ...] = ()
    annotations: tuple[Annotation, ...] = field(default=(), compare=False)
    pos: Pos | None = field(default=None, compare=False, repr=False)
    target_pos: Pos | None = field(default=None, compare=False, repr=False)


