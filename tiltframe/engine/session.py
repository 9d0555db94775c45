"""The SparkSession tiltframe runs on: the caller's, or one made for local use.

Library calls take ``spark: SparkSession | None`` and never stop a session they did not create.  Bucket
math never depends on ``spark.sql.session.timeZone`` (it works on epoch milliseconds and explicit zones),
so a caller's session setting is left alone.
"""

from __future__ import annotations

import os
import sys

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

#: Settings for sessions tiltframe creates; tuned for small clusters and laptops.
DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    # transformWithStateInPandas (continuous queries) needs the RocksDB state store.
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}

#: Paths listed by the driver itself, in local mode, before Spark lists them with a job.
LOCAL_LISTING_THRESHOLD = 4096


def get_session(master: str | None = None, *, app_name: str = "tiltframe") -> SparkSession:
    """The active session if there is one, else a new one (``local[*]`` unless ``master`` says)."""
    # Local sessions stay on loopback instead of whatever the host name resolves to.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers run in this interpreter's environment (stateful processors need its packages).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    cores = os.cpu_count() or 2
    builder = SparkSession.builder.appName(app_name)
    # Under spark-submit the master comes from its command line; only choose one when nobody did.  The
    # submitted conf is on the JVM spark-submit started: connect to it first, or SparkConf() is empty.
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        SparkContext._ensure_initialized()
    submitted = SparkConf()
    if master is not None or not submitted.contains("spark.master"):
        master = master or os.environ.get("TILTFRAME_SPARK_MASTER", "local[*]")
        builder = builder.master(master)
    conf = dict(DEFAULT_CONF)
    if (master or submitted.get("spark.master", "")).startswith("local"):
        # Spark lists more than 32 paths with a job of one task per path: 0.5-1 s in local mode for a
        # micro-batch of 100 files, which its own disk lists one by one in under 0.1 s.
        conf["spark.sql.sources.parallelPartitionDiscovery.threshold"] = str(LOCAL_LISTING_THRESHOLD)
    # Shuffles here are over per-batch partial states; a few partitions per core is plenty.
    conf["spark.sql.shuffle.partitions"] = os.environ.get("TILTFRAME_SHUFFLE_PARTITIONS", str(max(4, 2 * cores)))
    conf["spark.driver.memory"] = os.environ.get("TILTFRAME_DRIVER_MEMORY", "4g")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("TILTFRAME_SPARK_LOG_LEVEL", "ERROR"))
    return spark
