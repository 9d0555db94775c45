"""The one registry of mergeable aggregate functions.

An aggregate is a partial state (one or more columns), a way to build each state column from events, a
merge rule for two partial states, and a finalize step.  Builds and merges are named *primitives*
(``sum``, ``min``, ``max``, earliest/latest event, sketch unions, ...; ``aggregates/states.py``): each target
translates every primitive once, in a table keyed by it (``aggregates/targets/``: Spark, SQL, pandas), so
the math of a function is written here and only here.

Finalize and ``combine`` functions (the pairwise merge of states that merge together, such as Chan's
formula for variance) use only operators and the small ``Ops`` interface, so the same function runs on
pandas Series, Spark Columns and SQLAlchemy expressions.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from tiltframe.aggregates.sketches import hdr, stored
from tiltframe.aggregates.states import Build, Merge
from tiltframe.errors import DefinitionError, unknown
from tiltframe.model.streams import AttrType


class Ops(Protocol):
    """What finalize and combine functions may use beyond arithmetic and comparison operators and
    ``&``/``|``/``~``; each target (pandas, Spark, SQL) provides one."""

    def div(self, a: Any, b: Any) -> Any:
        """Float division; NULL/NaN when ``b`` is 0."""
        ...

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        """``a`` where ``cond`` holds, else ``b`` (a NULL condition counts as false)."""
        ...

    def isnull(self, a: Any) -> Any: ...

    def coalesce(self, a: Any, value: int) -> Any:
        """``a``, with the constant ``value`` where it is NULL."""
        ...

    def sqrt(self, a: Any) -> Any: ...

    def apply(self, fn: Callable[[Any], Any], a: Any) -> Any:
        """``fn`` on each non-null value (sketch binaries); targets that cannot run Python raise
        ``NotImplementedError``, and the value is then left out (the SQL views of final values)."""
        ...


#: The state values of one aggregate by suffix (a row, or columns of a target).
StateValues = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class State:
    """One stored column of a partial state: ``<alias>_<suffix>``."""

    suffix: str
    build: Build
    merge: Merge
    type: Callable[[AttrType | None], AttrType]
    #: Which field of the event a ``Build.EARLIEST``/``LATEST`` state keeps: ts, batch, seq or value.
    field: str | None = None


@dataclass(frozen=True, slots=True)
class AggregateFunction:
    """One aggregate: its states, how they merge, and how they finalize.

    ``finalize(states, ops, settings)`` gives the value (or, for a function with ``outputs``, a tuple in
    their order).  ``combine(a, b, ops)`` merges two partial states of the ``Merge.COMBINE`` kind; the
    merged state of index i may read the states of index <= i of ``a`` only (MySQL applies the
    assignments of an upsert in order, so the store writes them in reverse).  ``settings(params)``
    checks the constant parameters written after the argument and fills in defaults.
    """

    name: str
    states: tuple[State, ...]
    finalize: Callable[[StateValues, Ops, Mapping[str, Any]], Any]
    result_type: Callable[[AttrType | None], AttrType]
    takes_arg: bool = True
    numeric_arg: bool = True
    aliases: tuple[str, ...] = ()
    doc: str = ""
    combine: Callable[[StateValues, StateValues, Ops], dict[str, Any]] | None = None
    settings: Callable[[tuple[Any, ...]], dict[str, Any]] | None = None
    #: Output names besides the alias, from the settings (a quantile sketch has one per quantile).
    outputs: Callable[[str, Mapping[str, Any]], tuple[str, ...]] | None = None
    #: Needs each event's arrival position (first/last break event-time ties by arrival).
    needs_arrival: bool = False
    #: False for a state that grows with every event (``group_array``): continuous queries only, whose
    #: groups end, never rollups, whose year buckets would hold every event of the year.
    bounded: bool = True

    def check_arg(self, arg_type: AttrType | None, *, where: str) -> None:
        """Reject an argument the function cannot aggregate, naming the item."""
        if self.takes_arg and arg_type is None:
            msg = f"{self.name}() needs an argument in {where}"
            raise DefinitionError(msg)
        if self.numeric_arg and arg_type is not None and not arg_type.is_numeric:
            msg = f"{self.name}() needs a numeric argument in {where}, got {arg_type.value}"
            raise DefinitionError(msg)

    def resolve(self, params: tuple[Any, ...], *, where: str = "") -> dict[str, Any]:
        """The function's settings from the constants after its argument (defaults filled in)."""
        if self.settings is None:
            if params:
                msg = f"{self.name}() takes one argument, got {1 + len(params)}"
                raise DefinitionError(f"{msg} in {where}" if where else msg)
            return {}
        try:
            return self.settings(params)
        except DefinitionError as exc:
            raise DefinitionError(f"{exc.message} in {where}" if where else exc.message) from None

    def output_names(self, alias: str, settings: Mapping[str, Any]) -> tuple[str, ...]:
        return (alias,) if self.outputs is None else self.outputs(alias, settings)


def _sum_type(t: AttrType | None) -> AttrType:
    return AttrType.LONG if t is not None and t.is_integral else AttrType.DOUBLE


def _same_type(t: AttrType | None) -> AttrType:
    return t if t is not None else AttrType.DOUBLE


def _long(_: AttrType | None) -> AttrType:
    return AttrType.LONG


def _double(_: AttrType | None) -> AttrType:
    return AttrType.DOUBLE


def _binary(_: AttrType | None) -> AttrType:
    return AttrType.BINARY


def _array(_: AttrType | None) -> AttrType:
    return AttrType.ARRAY


def _only(suffix: str) -> Callable[[StateValues, Ops, Mapping[str, Any]], Any]:
    return lambda s, _ops, _settings: s[suffix]


_FUNCTIONS: dict[str, AggregateFunction] = {}
_ALIASES: dict[str, str] = {}


def register(fn: AggregateFunction) -> AggregateFunction:
    """Add a function (and its aliases) to the registry; names are case-insensitive."""
    for name in (fn.name, *fn.aliases):
        if name.lower() in _ALIASES:
            msg = f"aggregate function {name!r} is already registered"
            raise ValueError(msg)
        _ALIASES[name.lower()] = fn.name
    _FUNCTIONS[fn.name] = fn
    return fn


def get(name: str) -> AggregateFunction:
    """The function called ``name`` (or an alias of it); unknown names get a 'did you mean' error."""
    canonical = _ALIASES.get(name.lower())
    if canonical is None:
        raise DefinitionError(unknown("aggregate function", name, _ALIASES))
    return _FUNCTIONS[canonical]


def is_aggregate(name: str) -> bool:
    return name.lower() in _ALIASES


def names() -> tuple[str, ...]:
    return tuple(sorted(_FUNCTIONS))


register(
    AggregateFunction(
        "sum",
        (State("SUM", Build.SUM, Merge.SUM, _sum_type),),
        _only("SUM"),
        _sum_type,
        doc="Sum of the argument; long for int/long arguments, double otherwise.",
    )
)
register(
    AggregateFunction(
        "count",
        (State("COUNT", Build.COUNT, Merge.SUM, _long),),
        _only("COUNT"),
        _long,
        takes_arg=False,
        numeric_arg=False,
        doc="Number of events in the bucket.",
    )
)
register(
    AggregateFunction(
        "avg",
        (
            State("SUM", Build.SUM, Merge.SUM, _double),
            State("COUNT", Build.COUNT, Merge.SUM, _long),
        ),
        lambda s, ops, _: ops.div(s["SUM"], s["COUNT"]),
        _double,
        aliases=("mean",),
        doc="Arithmetic mean, stored as a sum and a count (Siddhi stores avg the same way).",
    )
)
register(
    AggregateFunction(
        "min",
        (State("MIN", Build.MIN, Merge.MIN, _same_type),),
        _only("MIN"),
        _same_type,
        doc="Smallest value of the argument.",
    )
)
register(
    AggregateFunction(
        "max",
        (State("MAX", Build.MAX, Merge.MAX, _same_type),),
        _only("MAX"),
        _same_type,
        doc="Largest value of the argument.",
    )
)


# --- variance and standard deviation: count, mean and M2, merged with Chan's formula ------------------------


def _chan(a: StateValues, b: StateValues, ops: Ops) -> dict[str, Any]:
    """Chan, Golub and LeVeque's pairwise update: stable for large values, unlike sums of squares."""
    na, nb = a["COUNT"], b["COUNT"]
    delta = b["MEAN"] - a["MEAN"]
    share = ops.div(nb, na + nb)
    mean = a["MEAN"] + delta * share
    m2 = a["M2"] + b["M2"] + delta * delta * na * share

    def pick(merged: Any, suffix: str) -> Any:  # an empty side (no non-null value) has NULL mean and M2
        return ops.where(ops.isnull(a["MEAN"]), b[suffix], ops.where(ops.isnull(b["MEAN"]), a[suffix], merged))

    return {"COUNT": na + nb, "MEAN": pick(mean, "MEAN"), "M2": pick(m2, "M2")}


_MOMENTS = (
    State("COUNT", Build.COUNT, Merge.COMBINE, _long),
    State("MEAN", Build.MEAN, Merge.COMBINE, _double),
    State("M2", Build.M2, Merge.COMBINE, _double),
)


def _variance(*, sample: bool, root: bool) -> Callable[[StateValues, Ops, Mapping[str, Any]], Any]:
    def finalize(s: StateValues, ops: Ops, _: Mapping[str, Any]) -> Any:
        var = ops.div(s["M2"], s["COUNT"] - 1 if sample else s["COUNT"])
        return ops.sqrt(var) if root else var

    return finalize


for _name, _sample, _root, _aliases, _what in (
    ("stdDev", False, True, ("stdev", "std", "stddev_pop", "stdDevPop"), "Population standard deviation"),
    ("stdDevSample", True, True, ("stdev_samp", "stddev_samp"), "Sample standard deviation (n - 1)"),
    ("var", False, False, ("variance", "var_pop", "varPop"), "Population variance"),
    ("varSample", True, False, ("var_samp", "variance_samp"), "Sample variance (n - 1)"),
):
    register(
        AggregateFunction(
            _name, _MOMENTS, _variance(sample=_sample, root=_root), _double, aliases=_aliases, combine=_chan,
            doc=f"{_what} of the non-null values; stored as count, mean and M2 (sum of squared deviations), "
                "merged with Chan's formula. NULL without values" + (" or with one value." if _sample else "."),
        )
    )


# --- first, last, delta: the value of the earliest or latest event ------------------------------------------

_EVENT_FIELDS = (("TS", "ts", _long), ("BATCH", "batch", _long), ("SEQ", "seq", _long))
#: The fields of an event state in the order that ranks events.
EVENT_ORDER = ("ts", "batch", "seq")


def _event_states(prefix: str, *, latest: bool) -> tuple[State, ...]:
    """Event time, arrival (batch, position) and value of one chosen event: ties of event time go to the
    earlier arrival for the first event and the later one for the last, as for latest-event values."""
    build, merge = (Build.LATEST, Merge.LATEST) if latest else (Build.EARLIEST, Merge.EARLIEST)
    order = tuple(State(f"{prefix}_{suffix}", build, merge, t, field) for suffix, field, t in _EVENT_FIELDS)
    return (*order, State(prefix, build, merge, _same_type, "value"))


register(
    AggregateFunction(
        "first", _event_states("FIRST", latest=False), _only("FIRST"), _same_type, numeric_arg=False,
        needs_arrival=True,
        doc="Value of the earliest event with a non-null argument (by event time; on a tie, the earlier arrival).",
    )
)
register(
    AggregateFunction(
        "last", _event_states("LAST", latest=True), _only("LAST"), _same_type, numeric_arg=False,
        needs_arrival=True,
        doc="Value of the latest event with a non-null argument (by event time; on a tie, the later arrival).",
    )
)
register(
    AggregateFunction(
        "delta", (*_event_states("FIRST", latest=False), *_event_states("LAST", latest=True)),
        lambda s, _ops, _: s["LAST"] - s["FIRST"], _same_type, needs_arrival=True,
        doc="last(x) - first(x) within the bucket (EventQL's DELTA).",
    )
)


# --- sketches: approximate distinct counts and quantiles ----------------------------------------------------

DEFAULT_QUANTILES = (0.5, 0.9, 0.99, 0.999)


def _number(value: Any, what: str, low: float, high: float, *, integer: bool = False) -> Any:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and (not integer or isinstance(value, int))
    if not ok or not low <= value <= high:
        kind = "an integer" if integer else "a number"
        msg = f"{what} must be {kind} from {low:g} to {high:g}, got {value!r}"
        raise DefinitionError(msg)
    return value


def _quantile_list(value: Any) -> tuple[float, ...]:
    if not isinstance(value, tuple) or not value:
        msg = f"the quantiles must be a list of numbers from 0 to 1 such as [0.5, 0.99], got {value!r}"
        raise DefinitionError(msg)
    qs = tuple(float(_number(q, "a quantile", 0, 1)) for q in value)
    if len(set(qs)) != len(qs):
        msg = f"the quantiles {list(qs)} repeat a value"
        raise DefinitionError(msg)
    return qs


def _settings(name: str, *params: tuple[str, Callable[[Any], Any], Any]) -> Callable[[tuple[Any, ...]], dict[str, Any]]:
    """Positional constants ``(name, check, default)`` after the argument."""

    def resolve(values: tuple[Any, ...]) -> dict[str, Any]:
        if len(values) > len(params):
            written = ", ".join(p for p, _, _ in params)
            msg = f"{name}() takes the argument and at most {len(params)} more ({written}), got {len(values)}"
            raise DefinitionError(msg)
        out = {p: default for p, _, default in params}
        for (p, check, _), value in zip(params, values, strict=False):
            out[p] = check(value)
        return out

    return resolve


def quantile_name(alias: str, q: float) -> str:
    """``lat_p50``, ``lat_p99``, ``lat_p99_9`` for 0.5, 0.99, 0.999."""
    text = format(Decimal(str(q)) * 100, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{alias}_p{text.replace('.', '_')}"


def _quantile_outputs(alias: str, settings: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(quantile_name(alias, q) for q in settings["quantiles"])


def _sketch_quantiles(suffix: str, reader: str) -> Callable[[StateValues, Ops, Mapping[str, Any]], Any]:
    """One output per quantile, from a single read of each row's sketch."""

    def finalize(s: StateValues, ops: Ops, settings: Mapping[str, Any]) -> tuple[Any, ...]:
        read, qs = getattr(stored, reader), settings["quantiles"]
        estimates = ops.apply(lambda b: read(b, qs), s[suffix])
        return tuple(ops.apply(operator.itemgetter(i), estimates) for i in range(len(qs)))

    return finalize


def _quantile_sketch(
    name: str, build: Build, merge: Merge, accuracy: tuple[str, Callable[[Any], Any], Any], **kwargs: Any
) -> AggregateFunction:
    """A quantile sketch taking ``(quantiles, <accuracy>)`` with one double output per quantile."""
    suffix = build.name
    return AggregateFunction(
        name, (State(suffix, build, merge, _binary),), _sketch_quantiles(suffix, f"{build.value}_quantiles"),
        _double, settings=_settings(name, ("quantiles", _quantile_list, DEFAULT_QUANTILES), accuracy),
        outputs=_quantile_outputs, **kwargs,
    )


def _hll_estimate(s: StateValues, ops: Ops, _: Mapping[str, Any]) -> Any:
    """The estimate, 0 where the bucket has no value (a count, as SQL's COUNT(DISTINCT) and count())."""
    return ops.coalesce(ops.apply(stored.hll_estimate, s["HLL"]), 0)


register(
    AggregateFunction(
        "distinctCount", (State("HLL", Build.HLL, Merge.HLL, _binary),), _hll_estimate, _long, numeric_arg=False,
        aliases=("cardinality_approx", "approx_count_distinct", "distinctCountApprox"),
        settings=_settings("distinctCount", ("lg_k", lambda v: _number(v, "lg_k", 4, 21, integer=True), 12)),
        doc="Approximate number of distinct non-null values (EventQL CARDINALITY_APPROX), 0 without values: an "
            "Apache DataSketches HLL sketch with 2^lg_k buckets (default 12: relative standard error 1.6%); "
            "the state stays a few KiB however many values arrive.",
    )
)
register(
    _quantile_sketch(
        "kll", Build.KLL, Merge.KLL, ("k", lambda v: _number(v, "k", 8, 65535, integer=True), 200),
        aliases=("quantiles", "quantiles_approx", "approx_percentile"),
        doc="Approximate quantiles (EventQL QUANTILES_APPROX) from an Apache DataSketches KLL doubles sketch: "
            "one output per quantile, `<name>_p50` and so on. Rank error: about 1.3% at k = 200 (default), "
            "kept under merges.",
    )
)
register(
    _quantile_sketch(
        "dds", Build.DDS, Merge.DDS,
        ("relative_accuracy", lambda v: float(_number(v, "relative_accuracy", 1e-6, 0.5)), 0.01),
        aliases=("ddsketch",),
        doc="Approximate quantiles with a relative value error (Tremor's dds): a DDSketch, each estimate within "
            "relative_accuracy (default 1%) of the exact quantile; one output per quantile, kept under merges.",
    )
)
register(
    _quantile_sketch(
        "hdr", Build.HDR, Merge.HDR,
        ("digits", lambda v: _number(v, "digits", 1, hdr.MAX_DIGITS, integer=True), hdr.DEFAULT_DIGITS),
        aliases=("hdr_histogram",),
        doc="Percentiles of whole non-negative values (latencies, sizes) from an HDR histogram (Tremor's hdr), "
            "each estimate at or above the exact one and within 1/128 of it at 2 significant digits (default; "
            "1/16 at 1, 1/1024 at 3); values truncated to whole numbers, negative ones not counted. One output "
            "per quantile, kept under merges.",
    )
)


# --- lists: every value, for continuous queries --------------------------------------------------------------

register(
    AggregateFunction(
        "group_array", (State("ARRAY", Build.COLLECT, Merge.CONCAT, _array),), _only("ARRAY"), _array,
        numeric_arg=False, aliases=("groupArray", "collect_list"), bounded=False,
        doc="The non-null values of the argument as a list, in no guaranteed order (Timeplus group_array). Its "
            "state grows with every event, so it is for continuous queries, whose groups close, not rollups.",
    )
)
