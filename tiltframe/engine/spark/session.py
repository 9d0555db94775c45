"""The SparkSession tiltframe runs on: the caller's, or one made for local use.

Library calls take ``spark: SparkSession | None`` and never stop a session they did not create.  The user's
Spark is the user's: an active session is used as it is, and a new one keeps every setting made elsewhere;
tiltframe only fills the rest (docs/configuration.md).  Bucket math never depends on
``spark.sql.session.timeZone`` (it works on epoch milliseconds and explicit zones).

A session tiltframe creates can keep Spark's own output (log4j lines, stack traces, the JVM's start-up
notices, Python workers' stderr) in a log file instead of the terminal: the JVM is started with its
stderr on that file (``log_file``), which is the only place that catches all of it.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from tiltframe.engine.spark import jvm_launch
from tiltframe.engine.spark.spark_settings import fill, settings_made_elsewhere
from tiltframe.env_values import env_choice, env_int, env_memory
from tiltframe.errors import TiltframeError

logger = logging.getLogger(__name__)

#: Settings tiltframe fills in sessions it creates, where nobody else set them; tuned for small clusters
#: and laptops.
DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    # What the driver keeps of the streaming queries' progress reports (tiltframe reads none) and of the
    # listings of files read (a stream reads each file once): by Spark's defaults (100 reports, 250 MB of
    # listings) a long-running driver's heap grows with every micro-batch until they are full
    # (bench/bench_memory.py; docs/performance.md, "Driver memory over a long stream").
    "spark.sql.streaming.numRecentProgressUpdates": "10",
    "spark.sql.hive.filesourcePartitionFileCacheSize": "0",
    # PySpark's DataFrame debugging notes the Python line of every DataFrame and Column call in the JVM,
    # for the query context of a runtime error: about six more Py4J calls per call (a micro-batch's plan
    # makes hundreds of them), to name lines of tiltframe's own plans to its users (docs/performance.md,
    # "A small micro-batch").
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Executors on other machines compile Spark's huge generated methods too, as the driver's JVM does
    # (``jvm_launch.HUGE_METHODS``): interpreted, the typing of a wide CSV stream ran 2.6 times slower.
    "spark.executor.extraJavaOptions": jvm_launch.HUGE_METHODS,
}

#: What the driver keeps of finished SQL executions, jobs, stages and tasks for its UI, filled (beside
#: ``DEFAULT_CONF``) only while the UI is off: by Spark's defaults (1000 executions, 100,000 tasks) a
#: long-running driver's heap grows with every micro-batch until they are full.  A UI someone turned on
#: keeps Spark's (or their) retention.
UI_RETENTION = {
    "spark.sql.ui.retainedExecutions": "5",
    "spark.ui.retainedJobs": "10",
    "spark.ui.retainedStages": "10",
    "spark.ui.retainedTasks": "100",
    "spark.ui.dagGraph.retainedRootRDDs": "10",
}

#: Paths listed by the driver itself, in local mode, before Spark lists them with a job.
LOCAL_LISTING_THRESHOLD = 4096

#: The environment variable that sets Spark's log level.
LOG_LEVEL_ENV = "TILTFRAME_SPARK_LOG_LEVEL"
#: The levels ``SparkContext.setLogLevel`` takes (any case).
SPARK_LOG_LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
#: Environment variables for the values tiltframe fills when no Spark setting names them.
SHUFFLE_PARTITIONS_ENV = "TILTFRAME_SHUFFLE_PARTITIONS"
DRIVER_MEMORY_ENV = "TILTFRAME_DRIVER_MEMORY"

#: A log file is moved aside to ``<name>.1`` when a session starts and finds it larger than this.
LOG_ROTATE_BYTES = 10 * 1024 * 1024


class SparkStartError(TiltframeError):
    """Spark did not start (no Java, a bad setting, not enough memory, ...)."""


def get_session(
    master: str | None = None,
    *,
    app_name: str = "tiltframe",
    log_file: Path | None = None,
    log_level: str | None = None,
    short_lived: bool = False,
) -> SparkSession:
    """The active session as it is if there is one, else a new one.

    A new session keeps every Spark setting made elsewhere (spark-submit ``--conf``, ``spark-defaults.conf``,
    ``$PYSPARK_SUBMIT_ARGS``, a running SparkContext; ``tiltframe.engine.spark.spark_settings``); tiltframe fills
    only the settings nobody made.  Its master: ``master``, else the one made elsewhere, else
    ``$TILTFRAME_SPARK_MASTER``, else ``local[*]``.

    ``log_file``: where a new session's Spark output goes instead of stderr (ignored when a session or
    a JVM already exists, as under spark-submit).  Spark's log level: ``$TILTFRAME_SPARK_LOG_LEVEL``, else
    ``log_level``, else WARN into a log file and ERROR on the terminal.  ``short_lived``: a JVM started here
    compiles with C1 alone (a run that reads a few megabytes and exits; ``tiltframe.engine.spark.jvm_launch``).
    """
    # Local sessions stay on loopback instead of whatever the host name resolves to.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers run in this interpreter's environment (stateful processors need its packages).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:  # the caller's: its settings are theirs, and a running master cannot change
        if master is not None and master != active.sparkContext.master:
            logger.warning("Spark master %s ignored: the active session runs on %s", master,
                           active.sparkContext.master)
        return active
    builder = SparkSession.builder
    # Under spark-submit the conf is on the JVM spark-submit started: connect to it first, or SparkConf()
    # is empty.
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        SparkContext._ensure_initialized()
    made = settings_made_elsewhere()
    if "spark.app.name" not in made:
        builder = builder.appName(app_name)
    if master is None and "spark.master" not in made:
        master = os.environ.get("TILTFRAME_SPARK_MASTER", "local[*]")
    if master is not None:
        builder = builder.master(master)
    ui_on = made.get("spark.ui.enabled", "").strip().lower() == "true"
    conf = fill(tiltframe_defaults(master or made.get("spark.master", ""), ui_on=ui_on), made)
    for key, value in conf.items():
        builder = builder.config(key, value)
    new_jvm = SparkContext._gateway is None
    to_file = log_file is not None and master is not None and new_jvm
    # Checked before a JVM starts: Spark would refuse a misspelt level only once it is up.
    level = env_choice(LOG_LEVEL_ENV, None, SPARK_LOG_LEVELS) or log_level or ("WARN" if to_file else "ERROR")
    # A JVM started here maps the classes of Spark's start-up (class_archive.py), a short run's compiles
    # with C1 alone (jvm_launch.py), and a local one's Python processes import PySpark compiled (spark_home.py).
    with jvm_launch.launching(short_lived, (master or made.get("spark.master", "")) if new_jvm else "") as added:
        if log_file is not None and master is not None and to_file:
            settings = SparkConf(loadDefaults=False).setMaster(master).setAppName(app_name).setAll(list(conf.items()))
            _launch_jvm(log_file, settings, "; C1 compiler alone (a short run)" if jvm_launch.C1_ONLY in added else "")
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(level)
    return spark


def tiltframe_defaults(master: str, *, ui_on: bool = False) -> dict[str, str]:
    """The settings tiltframe would choose for a session on ``master`` (each one only fills a setting
    nobody made): ``DEFAULT_CONF``, the UI's retention unless ``ui_on``, shuffle partitions, driver
    memory, local listing."""
    conf = dict(DEFAULT_CONF) if ui_on else {**UI_RETENTION, **DEFAULT_CONF}
    if master.startswith("local"):
        # Spark lists more than 32 paths with a job of one task per path: 0.5-1 s in local mode for a
        # micro-batch of 100 files, which its own disk lists one by one in under 0.1 s.
        conf["spark.sql.sources.parallelPartitionDiscovery.threshold"] = str(LOCAL_LISTING_THRESHOLD)
    # Shuffles here are over per-batch partial states; a few partitions per core is plenty.
    cores = os.cpu_count() or 2
    partitions = env_int(SHUFFLE_PARTITIONS_ENV, max(4, 2 * cores), least=1,
                         expected="a number of partitions (1 or more)")
    conf["spark.sql.shuffle.partitions"] = str(partitions)
    conf["spark.driver.memory"] = env_memory(DRIVER_MEMORY_ENV, "4g")
    return conf


def _launch_jvm(log_file: Path, conf: SparkConf, said: str = "") -> None:
    """Start Spark's JVM (as ``getOrCreate`` would, with the same settings) with its stdout and stderr on
    ``log_file``, after a header line (ending with ``said``); a JVM that does not start is a
    :class:`SparkStartError` quoting the log's last line."""
    from pyspark.errors import PySparkRuntimeError
    from pyspark.java_gateway import launch_gateway

    log_file.parent.mkdir(parents=True, exist_ok=True)
    if log_file.exists() and log_file.stat().st_size > LOG_ROTATE_BYTES:
        log_file.replace(log_file.with_name(log_file.name + ".1"))
    with log_file.open("ab") as sink:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        header = f"\n=== tiltframe: Spark starts ({conf.get('spark.master')}) at {stamp}, pid {os.getpid()}{said}\n"
        sink.write(header.encode())
        sink.flush()
        size = sink.tell()
        try:
            # stdout too: the JVM has nothing to say there, and a caller reading this process's output
            # through a pipe would otherwise wait for the JVM's own shutdown after this process has ended.
            gateway = launch_gateway(conf, popen_kwargs={"stdout": sink, "stderr": sink})
        except PySparkRuntimeError as exc:
            last = _last_line(log_file, size) or str(exc)
            msg = f"Spark did not start: {last} (Spark's log: {log_file})"
            raise SparkStartError(msg) from exc
    SparkContext._ensure_initialized(gateway=gateway)


def _last_line(path: Path, start: int) -> str:
    """The last line written to ``path`` after byte ``start`` that is no stack frame, in short: the JVM's
    reason for exiting (``SparkException: Master must either be yarn or ...``)."""
    with path.open("rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines()]
    said = [line for line in lines if line and not line.startswith(("at ", "..."))]
    if not said:
        return ""
    last = re.sub(r'^Exception in thread "[^"]*" ', "", said[-1])
    return re.sub(r"^(?:[a-z_][\w$]*\.)+([A-Z][\w$]*: )", r"\1", last)
