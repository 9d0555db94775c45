"""The Spark settings someone other than tiltframe has made, so that tiltframe fills only the rest.

Spark takes settings from many places; tiltframe's own choices (``DEFAULT_CONF``, shuffle partitions,
driver memory) must never win over any of them (docs/configuration.md):

- a JVM that is already up: under ``spark-submit`` its system properties hold ``--conf``, ``--driver-memory``
  and ``spark-defaults.conf``; a running SparkContext holds what it was made with;
- ``$PYSPARK_SUBMIT_ARGS`` (``--conf k=v``, ``--master``, ``--driver-memory``, ...), which PySpark hands to
  the JVM it starts;
- ``spark-defaults.conf`` in ``$SPARK_CONF_DIR`` or ``$SPARK_HOME/conf``, which that JVM reads.

A session that is already active (one the caller built, with ``SparkSession.builder.config(...)``) is used
as it is and never reaches these questions.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from pyspark import SparkConf, SparkContext

#: spark-submit options that are settings under another name.
_SUBMIT_OPTIONS = {
    "--master": "spark.master",
    "--driver-memory": "spark.driver.memory",
    "--executor-memory": "spark.executor.memory",
    "--driver-cores": "spark.driver.cores",
    "--executor-cores": "spark.executor.cores",
    "--num-executors": "spark.executor.instances",
    "--packages": "spark.jars.packages",
    "--jars": "spark.jars",
    "--name": "spark.app.name",
    "--deploy-mode": "spark.submit.deployMode",
}

#: A line of a Java properties file: key, then '=', ':' or blanks, then the value.
_PROPERTY = re.compile(r"^\s*([^\s=:#!]+)\s*[=:\s]\s*(.*?)\s*$")


def defaults_file() -> Path | None:
    """The ``spark-defaults.conf`` a JVM started from here would read, if there is one."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        home = os.environ.get("SPARK_HOME")
        if not home:
            from pyspark.find_spark_home import _find_spark_home

            home = _find_spark_home()
        conf_dir = str(Path(home) / "conf")
    path = Path(conf_dir) / "spark-defaults.conf"
    return path if path.is_file() else None


def read_properties(text: str) -> dict[str, str]:
    """The ``spark.*`` entries of a properties file (``spark-defaults.conf``)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.lstrip().startswith(("#", "!")):
            continue
        m = _PROPERTY.match(line)
        if m and m.group(1).startswith("spark."):
            found[m.group(1)] = m.group(2)
    return found


def submit_args(args: str) -> dict[str, str]:
    """The settings named in spark-submit arguments (``--conf k=v``, ``--master m``, ...)."""
    words = shlex.split(args)
    found: dict[str, str] = {}
    for i, word in enumerate(words):
        option, eq, inline = word.partition("=")
        value = inline if eq else (words[i + 1] if i + 1 < len(words) else "")
        if option in ("--conf", "-c"):
            key, sep, setting = value.partition("=")
            if sep:
                found[key] = setting
        elif option in _SUBMIT_OPTIONS and value:
            found[_SUBMIT_OPTIONS[option]] = value
    return found


def settings_made_elsewhere() -> dict[str, str]:
    """Every Spark setting made outside tiltframe that a session made now would have."""
    found: dict[str, str] = {}
    path = defaults_file()
    if path is not None:
        found.update(read_properties(path.read_text(encoding="utf-8", errors="replace")))
    found.update(submit_args(os.environ.get("PYSPARK_SUBMIT_ARGS", "")))
    if SparkContext._jvm is not None:  # spark-submit's JVM, or one a caller started: its system properties
        found.update(dict(SparkConf().getAll()))
    context = SparkContext._active_spark_context
    if context is not None:
        found.update(dict(context.getConf().getAll()))
    return found


def fill(defaults: dict[str, str], made: dict[str, str]) -> dict[str, str]:
    """tiltframe's ``defaults`` for the settings nobody made."""
    return {key: value for key, value in defaults.items() if key not in made}
