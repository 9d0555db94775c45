"""Every target (Spark, SQL, pandas, Python) translates every primitive of a partial state or names the part that
does it instead, and gives every operation finalize and combine functions may use: a primitive added to
``aggregates/states.py`` without its translations fails here, not in a user's run."""

from __future__ import annotations

import inspect

import pytest

from tiltframe.aggregates import registry
from tiltframe.aggregates.registry import Ops
from tiltframe.aggregates.states import Build, Merge
from tiltframe.aggregates.targets import in_pandas, in_python, in_spark, in_sql

#: Per target: its table of builds, of merges, what it leaves to another part, and its Ops.
TARGETS = {
    "spark": (in_spark.BUILD, in_spark.NOT_BUILT, in_spark.MERGE, in_spark.NOT_MERGED, in_spark.SparkOps),
    "sql": ({}, in_sql.NOT_BUILT, in_sql.PAIR_MERGE, in_sql.NOT_MERGED, in_sql.SqlOps),
    "pandas": (in_pandas.BUILD, in_pandas.NOT_BUILT, in_pandas.GROUP_MERGE, in_pandas.NOT_MERGED,
               in_pandas.PandasOps),
    "python": (in_python.BUILD, in_python.NOT_BUILT, {**in_python.MERGE, **in_python.MERGE_TOGETHER},
               in_python.NOT_MERGED, in_python.PythonOps),
}


@pytest.mark.parametrize("target", TARGETS)
def test_every_primitive_is_translated_or_left_to_a_named_part(target: str) -> None:
    builds, not_built, merges, not_merged, _ = TARGETS[target]
    assert set(builds) | set(not_built) == set(Build), set(Build) - set(builds) - set(not_built)
    assert not set(builds) & set(not_built)
    assert set(merges) | set(not_merged) == set(Merge), set(Merge) - set(merges) - set(not_merged)
    assert not set(merges) & set(not_merged)
    assert all(reason.strip() for reason in (*not_built.values(), *not_merged.values()))


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_gives_every_operation(target: str) -> None:
    ops = TARGETS[target][-1]
    wanted = {name for name, _ in inspect.getmembers(Ops, inspect.isfunction) if not name.startswith("_")}
    assert wanted == {"div", "where", "isnull", "coalesce", "sqrt", "apply"}
    for name in wanted:
        assert callable(getattr(ops, name)), f"{ops.__name__} lacks {name}"


def test_sql_merges_a_group_by_the_primitives_it_merges_a_pair_by() -> None:
    assert set(in_sql.GROUP_MERGE) <= set(in_sql.PAIR_MERGE)
    assert not any(kind.is_sketch for kind in in_sql.GROUP_MERGE)  # binaries: merged by their library


def test_python_merges_each_primitive_one_way() -> None:
    """A state column merges alone or together with the function's other columns of its kind, never both."""
    assert not set(in_python.MERGE) & set(in_python.MERGE_TOGETHER)


def test_python_adds_a_value_to_every_primitive_or_names_how_it_is_taken() -> None:
    """Python folds take values one at a time: every build primitive has its add (or says how its column takes
    a value instead), and every primitive whose columns merge together adds together."""
    assert set(in_python.ADD) | set(in_python.NOT_ADDED) == set(Build), set(Build) - set(in_python.ADD)
    assert not set(in_python.ADD) & set(in_python.NOT_ADDED)
    assert all(reason.strip() for reason in in_python.NOT_ADDED.values())
    assert set(in_python.ADD_TOGETHER) == set(in_python.MERGE_TOGETHER)


def test_every_registered_function_is_built_and_merged_where_it_runs() -> None:
    """A rollup's states are built and merged in Spark and merged on read in pandas; a state that only
    continuous queries keep (``bounded=False``) is built and merged in pandas."""
    for name in registry.names():
        fn = registry.get(name)
        for state in fn.states:
            assert state.build in in_pandas.BUILD, (name, state)
            if fn.combine is None and state.merge not in (Merge.EARLIEST, Merge.LATEST):
                assert state.merge in in_pandas.GROUP_MERGE, (name, state)
            if fn.bounded:
                assert state.build in in_spark.BUILD, (name, state)
                if fn.combine is None and state.merge not in (Merge.EARLIEST, Merge.LATEST):
                    assert state.merge in in_spark.MERGE, (name, state)
                    assert state.merge in in_sql.PAIR_MERGE, (name, state)
