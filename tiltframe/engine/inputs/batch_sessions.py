"""The session a file source's micro-batch is read in: a small batch skips adaptive execution's re-planning.

Under adaptive execution Spark runs each shuffle stage of a batch as a job of its own and plans the rest
again after it.  For a batch of a few kilobytes (a folder followed as files arrive) that costs about a
sixth of the batch's time on the driver (docs/performance.md, "A small micro-batch"), only to end where
a plan without it starts: a shuffle of less than Spark's smallest coalesced partition (1 MB) is coalesced into one
partition.  A batch whose files are that small is therefore read in a session of the file source's own,
cloned from the shared one (same settings, functions and views) with adaptive execution off and one shuffle
partition; every DataFrame of the batch comes from its files' read, so its jobs run with them.  The clone
is made at the source's first small batch: settings changed on the shared session after that do not reach it.

The clone is the source's own because a setting changed on the shared session would reach whatever uses
it meanwhile: a continuous query starting then would keep the shuffle partitions in its checkpoint for
good.  Nothing changes where adaptive execution is off (the user's choice of plans stands), where a file is
not local (its size would cost a request to learn), or once the files pass ``$TILTFRAME_SMALL_BATCH_BYTES``
(0: never).

A small batch also goes to a server store through the driver, not staged by the executors
(``engine.rollup.staged_writes``): staging's fixed part (a job, a database connection per task, the staging table's
load and merge) costs more than carrying its few partial rows (docs/performance.md, "The server stores").
A batch handed over as DataFrames (a backfill, a stream other than files) is small by Spark's own estimate
of its size (``estimated_small``).

A tiny batch (files of at most a sixteenth of that bound, 64 KiB by default: a couple of thousand events)
also runs without generated code, in a second clone: compiling a batch's generated classes costs its
first run more than half a second (a new process's first batch of a few events: 2.9 s against 2.2 s),
while evaluating a few thousand rows interpreted costs what running their compiled code does
(docs/performance.md, "A small micro-batch").  At twenty thousand events the compiled code is a quarter
faster, so larger small batches keep it.  Spark marks the interpreted mode's switch
(``spark.sql.codegen.factoryMode``) as internal; results never depend on it (Spark's own tests run
both ways, and tiltframe's test suite runs interpreted throughout).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession

from tiltframe.env_values import env_int

#: Files of a batch up to this many bytes in all make a small batch: Spark's smallest coalesced partition
#: (``spark.sql.adaptive.coalescePartitions.minPartitionSize``), below which adaptive execution makes each
#: shuffle one partition too.
DEFAULT_SMALL_BATCH_BYTES = 1024 * 1024
SMALL_BATCH_ENV = "TILTFRAME_SMALL_BATCH_BYTES"
#: What the small batches' session sets.
SMALL_BATCH_CONF = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1"}
#: A batch of at most the small batches' bound divided by this is tiny.
TINY_SHARE = 16
#: What the tiny batches' session sets: the small batches' settings, and no generated code.
TINY_BATCH_CONF = {**SMALL_BATCH_CONF, "spark.sql.codegen.wholeStage": "false",
                   "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def small_batch_bytes() -> int:
    """``$TILTFRAME_SMALL_BATCH_BYTES``, else 1 MiB; 0 makes no batch small."""
    return env_int(SMALL_BATCH_ENV, DEFAULT_SMALL_BATCH_BYTES, expected="a number of bytes (0: no small batches)")


def estimated_small(frames: Sequence[DataFrame]) -> bool:
    """Whether Spark's optimizer estimates ``frames`` at most ``$TILTFRAME_SMALL_BATCH_BYTES`` in all, for a
    batch handed over as DataFrames: close for local data (a pandas frame), the files' sizes for files, and
    unknown (the largest long) for a stream's micro-batch, which is then never small."""
    bound = small_batch_bytes()
    if bound <= 0:
        return False
    total = 0
    for df in frames:
        total += int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
        if total > bound:
            return False
    return True


class BatchSessions:
    """Chooses, batch by batch, the shared session or the small (or tiny) batches' clone of it (made when first
    needed)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.bound = small_batch_bytes()
        self._clones: dict[bool, SparkSession] = {}

    def is_small(self, paths: Sequence[str], sizes: Mapping[str, tuple[int, int]]) -> bool:
        """Whether ``paths`` make a small batch: local files of at most the bound's bytes in all; ``sizes``:
        each local file's (size, modification time), as the batch's file record noted them (a path missing
        from it is not local)."""
        return self._within(paths, sizes, self.bound)

    def is_tiny(self, paths: Sequence[str], sizes: Mapping[str, tuple[int, int]]) -> bool:
        """Whether ``paths`` make a tiny batch: local files of at most the bound's ``1 / TINY_SHARE`` in all."""
        return self._within(paths, sizes, self.bound // TINY_SHARE)

    def for_batch(self, small: bool, *, tiny: bool = False) -> SparkSession:
        """The session to read a batch in: the clone for a small one (``is_small``), the one without generated
        code for a tiny one (``is_tiny``), unless adaptive execution is off, else the shared session."""
        if not small or not _adaptive(self.spark):
            return self.spark
        clone = self._clones.get(tiny)
        if clone is None:
            clone = self._clones[tiny] = SparkSession(self.spark.sparkContext,
                                                      self.spark._jsparkSession.cloneSession())
            for key, value in (TINY_BATCH_CONF if tiny else SMALL_BATCH_CONF).items():
                clone.conf.set(key, value)
        return clone

    def _within(self, paths: Sequence[str], sizes: Mapping[str, tuple[int, int]], most: int) -> bool:
        """Whether ``paths`` are local files (all in ``sizes``) of at most ``most`` bytes in all, where small
        batches are on at all."""
        if self.bound <= 0 or not paths or any(p not in sizes for p in paths):
            return False
        return sum(sizes[p][0] for p in paths) <= most


def _adaptive(spark: SparkSession) -> bool:
    return str(spark.conf.get("spark.sql.adaptive.enabled", "true")).lower() == "true"
