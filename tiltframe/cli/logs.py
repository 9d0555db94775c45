"""Where the CLI's logs go: the terminal gets tiltframe's messages, Spark's own log goes to a file.

Without ``--verbose`` a command that starts Spark keeps Spark's output (log4j lines, stack traces, the
JVM's notices, Python workers' stderr) and py4j's Python-side tracebacks in ``<data-dir>/logs/spark.log``,
so that a failure is said once, in one line, on the terminal.  ``--verbose`` logs tiltframe at INFO and
leaves Spark's log (at WARN) on stderr; ``--debug`` adds tiltframe's DEBUG lines and tracebacks.
``--log-format json`` writes one JSON object per line (for log collectors), tiltframe's INFO lines
included: one per micro-batch of each aggregation, its figures as fields.  Every record's credentials are
masked (``store.credentials``), whatever logged it.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tiltframe.store.credentials import MaskCredentials

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The values of ``--log-format``.
FORMATS = ("text", "json")
#: Python loggers whose records belong with Spark's log (py4j logs a callback's traceback at ERROR).
SPARK_PY_LOGGERS = ("py4j", "pyspark")


@dataclass
class LogSettings:
    """The global options of this invocation, and the Spark log file once a session was started."""

    debug: bool = False
    verbose: bool = False
    json: bool = False
    spark_log: Path | None = None


settings = LogSettings()


def spark_log_file(data_dir: Path) -> Path:
    """``<data-dir>/logs/spark.log``."""
    return data_dir / "logs" / "spark.log"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the record's ``batch`` fields, and the
    exception's text if any."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage(),
        }
        out.update(getattr(record, "batch", {}))
        if record.exc_info:
            out["exception"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure(*, debug: bool, verbose: bool, log_format: str = "text") -> None:
    """Python logging for this invocation: tiltframe's own records on stderr (WARNING, INFO with
    ``--verbose`` or JSON, DEBUG with ``--debug``); py4j's and PySpark's only with ``--verbose`` or
    ``--debug``."""
    settings.debug, settings.verbose, settings.spark_log = debug, verbose, None
    settings.json = log_format == "json"
    level = logging.DEBUG if debug else logging.INFO if verbose or settings.json else logging.WARNING
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s",
                        force=True)
    for handler in logging.getLogger().handlers:
        handler.addFilter(MaskCredentials())  # a store URL's password never reaches a log line
        if settings.json:
            handler.setFormatter(JsonFormatter())
    logging.getLogger("tiltframe").setLevel(level)
    loud = debug or verbose
    for name in SPARK_PY_LOGGERS:
        logger = logging.getLogger(name)
        for handler in [h for h in logger.handlers if getattr(h, "tiltframe_spark_log", False)]:
            logger.removeHandler(handler)
            handler.close()
        logger.setLevel(logging.WARNING)
        logger.propagate = loud
        if not loud:  # nowhere until a Spark log file is known (not Python's last-resort stderr)
            quiet = logging.NullHandler()
            quiet.tiltframe_spark_log = True  # type: ignore[attr-defined]
            logger.addHandler(quiet)


def _to_spark_log(path: Path) -> None:
    """Send the py4j / PySpark Python loggers' records to Spark's log file."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s (python): %(message)s"))
    handler.tiltframe_spark_log = True  # type: ignore[attr-defined]
    handler.addFilter(MaskCredentials())
    for name in SPARK_PY_LOGGERS:
        logging.getLogger(name).addHandler(handler)


def start_spark(master: str | None, data_dir: Path, *, short_lived: bool = False) -> SparkSession:
    """The Spark session of a command: a new one keeps its log in the data directory unless
    ``--verbose`` (an active session, as under spark-submit, is used as it is); ``short_lived``: its JVM
    compiles with C1 alone (``tiltframe.engine.spark.jvm_launch``)."""
    from tiltframe.engine.spark.session import get_session

    if settings.verbose or settings.debug:
        return get_session(master, log_level="WARN", short_lived=short_lived)
    log = spark_log_file(data_dir)
    before = log.stat().st_size if log.exists() else -1
    spark = get_session(master, log_file=log, short_lived=short_lived)
    if log.exists() and log.stat().st_size != before:  # this session writes there
        settings.spark_log = log
        _to_spark_log(log)
    return spark
