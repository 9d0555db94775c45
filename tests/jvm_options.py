"""Java options for the JVMs the tests start that live seconds (``tiltframe run`` processes, the kill -9
restarts, a standalone cluster's daemons, drivers and executors).

C1's compiler only: a small ``tiltframe run`` then takes 40% less CPU (47 to 28 s of both cores, most of
the rest C2 compiling Spark's start-up code for a JVM that exits before it pays back) and a fifth less wall
time.  The test process's own session lives the whole run and keeps both compilers (a file of many
micro-batches ran 25% longer without C2).  Results never depend on the compiler.
"""
from __future__ import annotations

from tiltframe.engine.spark import class_archive, jvm_launch

SHORT_LIVED_JVM = jvm_launch.C1_ONLY  # what tiltframe gives a short run's JVM itself
#: The same, in ``$PYSPARK_SUBMIT_ARGS`` (tests/conftest.py gives it to the processes tests start).
SHORT_LIVED_SUBMIT_ARGS = f"--driver-java-options {SHORT_LIVED_JVM}"

#: The JVMs of a standalone cluster (daemons, spark-submit's drivers, executors) are not started by tiltframe,
#: so they are given the class archive here (when setup made one): their classpath is Spark's jars too.
CLUSTER_JVM = f"{SHORT_LIVED_JVM} {class_archive.java_options()}".strip()
