"""The settings of sessions tiltframe creates."""

from __future__ import annotations

from tiltframe.engine.spark.session import LOCAL_LISTING_THRESHOLD


def test_local_sessions_list_the_files_of_a_micro_batch_on_the_driver(spark) -> None:
    # A listing job per micro-batch of more than 32 files cost more than the batch's aggregation.
    key = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    assert spark.conf.get(key) == str(LOCAL_LISTING_THRESHOLD)


def test_sessions_tiltframe_creates_skip_pyspark_dataframe_debugging(spark) -> None:
    """PySpark's note of the Python line of every DataFrame call (about six Py4J calls each) is off: it
    would name lines of tiltframe's own plans."""
    from pyspark.errors.utils import is_debugging_enabled

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not is_debugging_enabled()
