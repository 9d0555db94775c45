"""What a pre-aggregated table's measures give a query: its columns and their types, from the registry.

A :class:`~tiltframe.model.tables.Measure` names its function; the model holds no functions, so the
columns and types a function gives are asked here.
"""

from __future__ import annotations

from tiltframe.aggregates import registry
from tiltframe.model.streams import AttrType
from tiltframe.model.tables import Measure, TableSpec


def aggregate_of(measure: Measure) -> registry.AggregateFunction:
    return registry.get(measure.function)


def output_names(measure: Measure) -> tuple[str, ...]:
    """The columns a query sees: the alias, or one per quantile (``costQ_p50``, ...)."""
    fn = aggregate_of(measure)
    return fn.output_names(measure.alias, fn.resolve(measure.params))


def measure_types(table: TableSpec) -> dict[str, AttrType]:
    """Every measure output a query of ``table`` sees, with the type of its merged value."""
    out: dict[str, AttrType] = {}
    for m in table.preaggregation.measures if table.preaggregation else ():
        arg_type = table.column(m.column).type if m.column is not None else None
        out.update(dict.fromkeys(output_names(m), aggregate_of(m).result_type(arg_type)))
    return out
