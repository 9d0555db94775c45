"""Shared fixtures: one local SparkSession for the whole test session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.jvm_options import SHORT_LIVED_SUBMIT_ARGS as SHORT_LIVED

# Test data is small: Spark's fixed costs per query dominate, not its throughput.  For the suite's sessions
# (this process's and every CLI it starts) two shuffle partitions; no code generation (its compile time
# exceeds the rows' run time); no adaptive re-planning.  Results do not depend on any of them; together
# they take a quarter off the suite's CPU time, and without adaptive execution's coalescing more tasks get
# empty partitions, a case worth running.  tiltframe's own defaults (adaptive, code generation) are run by
# the standalone-cluster tests (spark-submit reads no PYSPARK_SUBMIT_ARGS), the tests about settings and
# every benchmark.  The processes tests start get the options of a short-lived JVM (tests/jvm_options.py);
# this process's session does not.
os.environ.setdefault("TILTFRAME_SHUFFLE_PARTITIONS", "2")
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--conf spark.sql.codegen.wholeStage=false "
                      "--conf spark.sql.codegen.factoryMode=NO_CODEGEN --conf spark.sql.adaptive.enabled=false "
                      f"{SHORT_LIVED} pyspark-shell")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from tiltframe.engine.spark.session import get_session

    submit_args = os.environ["PYSPARK_SUBMIT_ARGS"]
    os.environ["PYSPARK_SUBMIT_ARGS"] = submit_args.replace(SHORT_LIVED, "")
    try:
        session = get_session("local[2]")
    finally:
        os.environ["PYSPARK_SUBMIT_ARGS"] = submit_args
    yield session
    session.stop()


#: The test files that take longest (``pytest --durations``: from 2 to 11 minutes of a worker each on two
#: cores), longest first.  Under ``--dist loadfile`` they are handed out first, so that no worker is left
#: alone with one of them at the end while the other has nothing to do; xdist's own order (most tests
#: first) put them last.  The rest follow, most tests first.  Only the order changes: every test runs.
LONGEST = (
    "tests/integration/test_crash.py",
    "tests/bad_input/test_properties.py",
    "tests/aggregates/test_statistics_oracle.py",
    "tests/aggregates/test_empty_buckets.py",
    "tests/aggregates/sketches/test_sketch_accuracy.py",
    "tests/engine/test_continuous.py",
    "tests/engine/test_continuous_late.py",
    "tests/integration/test_cluster.py",
    "tests/cli/test_logs.py",
    "tests/http/test_cli_serve.py",
    "tests/integration/test_cluster_shards.py",
    "tests/compatibility/test_timeplus.py",
    "tests/cli/test_failures_said_once.py",
    "tests/engine/test_lateness.py",
    "tests/cli/test_continuous_run.py",
    "tests/engine/trickle/test_spark_run.py",
)
#: Files whose tests are each a work unit of their own (the kill -9 test of each store: minutes apiece).
ONE_UNIT_PER_TEST = ("tests/integration/test_crash.py",)


#: Markers given by the fixtures a test uses (directly or through others), for the fast tier:
#: ``-m "not slow and not spark and not browser"`` runs what needs no JVM, browser or extra process
#: (docs/performance.md, "The test suite").
FIXTURE_MARKERS = {"spark": pytest.mark.spark, "browser": pytest.mark.browser}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    files: dict[str, int] = {}
    for item in items:
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)
        path = item.nodeid.split("::", 1)[0]
        files[path] = files.get(path, 0) + 1
    rank = {path: i for i, path in enumerate(LONGEST)}
    items.sort(key=lambda item: (rank.get(f := item.nodeid.split("::", 1)[0], len(rank)), -files[f], f))


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadfile`` in the collection's order (above), the kill -9 tests one unit each."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongestFirst(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return nodeid if path in ONE_UNIT_PER_TEST else path

    config.option.loadscopereorder = False
    return LongestFirst(config, log)
