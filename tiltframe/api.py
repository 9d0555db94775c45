"""The small public API: load an app, run it, query it, inspect it (a rollup's later life, migrate, verify
and rebuild, is ``tiltframe.lifecycle``).

Every CLI command is one call into this module or that one, so the library and the CLI behave the same.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiltframe.errors import DefinitionError, QueryError, StoreError, UsageError
from tiltframe.model.app import AppSpec
from tiltframe.model.queries import RetrievalQuery
from tiltframe.model.trickle import TRICKLE_SUFFIX, TrickleQuery
from tiltframe.store.open_stores import StoreRegistry, default_data_dir

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

    from tiltframe.engine.inputs.file_manifest import ChangedFile
    from tiltframe.engine.rollup.reports import BatchReport, PipelineTotals
    from tiltframe.engine.run_options import RunOptions
    from tiltframe.engine.runner import InputLike, Run, RunResult
    from tiltframe.engine.sinks import Sink
    from tiltframe.engine.trickle.spark_run import TrickleRun
    from tiltframe.store.base import AggregationInfo
    from tiltframe.store.lifecycle.purge import PurgeResult


def load_app(source: str | Path) -> AppSpec:
    """Parse and validate an app from a file path or from SiddhiQL text."""
    from tiltframe.lang import parse_app

    text = str(source)
    looks_like_text = "\n" in text or "define " in text.lower() or ";" in text
    if isinstance(source, Path) or not looks_like_text:
        path = Path(source)
        if path.suffix == TRICKLE_SUFFIX:
            msg = (f"'{path}' is a trickle query, not an app: load it with load_trickle and run it with "
                   "start_trickle (docs/trickle.md)")
            raise UsageError(msg)
        app = parse_app(read_app_file(path))
        if not (app.streams or app.aggregations or app.queries or app.continuous or app.tables):
            msg = f"app file '{path}' defines nothing (expected 'define stream ...', 'define aggregation ...', ...)"
            raise UsageError(msg)
        return app
    return parse_app(str(source))


def load_trickle(source: str | Path) -> TrickleQuery:
    """Parse and check a trickle query (Tremor's language) from a ``.trickle`` file or from its text."""
    from tiltframe.lang.trickle.trickle_parser import parse_trickle

    if isinstance(source, Path) or str(source).endswith(TRICKLE_SUFFIX):
        return parse_trickle(read_app_file(Path(source)))
    return parse_trickle(str(source))


def start_trickle(
    query: TrickleQuery,
    source: str | Path,
    *,
    data_dir: str | Path | None = None,
    spark: SparkSession | None = None,
    outputs: Mapping[str, str | Path] | None = None,
    follow: bool = False,
    max_files_per_trigger: int | None = None,
    max_bytes_per_trigger: int | None = None,
    checkpoint_dir: str | Path | None = None,
    trigger_seconds: float = 1.0,
    on_output: Callable[[str, list[str]], None] | None = None,
) -> TrickleRun:
    """Start a trickle query on Spark over ``source``, a folder of JSON-lines files (the stream ``in``), and
    return the handle (``wait()`` ends a bounded run, ``stop()`` a ``follow`` one).

    Each output stream's events go as JSON lines to the folder ``outputs`` gives it, one file per stream and
    micro-batch, else to ``on_output(stream, lines)``; errors (with their reasons) are recorded under
    ``<data_dir>/trickle/``, and to ``outputs["err"]`` if given.  Exactly-once through Spark's checkpoint,
    under ``checkpoint_dir`` as for :func:`start`.  An event's ingest time is its file's modification time.
    """
    from tiltframe.engine.inputs.filesystems import checkpoint_root
    from tiltframe.engine.spark.session import get_session
    from tiltframe.engine.trickle.spark_run import start_trickle_run

    directory = Path(data_dir) if data_dir is not None else default_data_dir()
    root = checkpoint_root(checkpoint_dir, directory)
    return start_trickle_run(query, source, data_dir=directory, spark=spark or get_session(), outputs=outputs,
                             follow=follow, max_files_per_trigger=max_files_per_trigger,
                             max_bytes_per_trigger=max_bytes_per_trigger, checkpoint_root=root,
                             trigger_seconds=trigger_seconds, on_output=on_output)


def read_app_file(path: Path) -> str:
    """The text of an app file (UTF-8, with or without a byte order mark); a usage error naming the file
    when it is missing, a directory, unreadable or not UTF-8 (with the first bad byte and its line)."""
    if path.is_dir():
        msg = f"app file '{path}' is a directory; give the app's file (e.g. {path / 'app.siddhi'})"
        raise UsageError(msg)
    if not path.is_file():
        msg = f"app file '{path}' does not exist"
        raise UsageError(msg)
    try:
        data = path.read_bytes()
    except OSError as exc:
        msg = f"app file '{path}' cannot be read: {exc.strerror or exc}"
        raise UsageError(msg) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        msg = (f"app file '{path}' is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}, "
               f"line {line}); save it as UTF-8")
        raise UsageError(msg) from None


def start(
    app: AppSpec,
    inputs: Mapping[str, InputLike],
    *,
    data_dir: str | Path | None = None,
    spark: SparkSession | None = None,
    follow: bool = False,
    outputs: Mapping[str, Sink] | None = None,
    on_batch: Callable[[BatchReport], None] | None = None,
    max_files_per_trigger: int | None = None,
    max_bytes_per_trigger: int | None = None,
    shard_id: str | None = None,
    partition_by_id: bool = False,
    on_bad_file: str = "skip",
    rebuild: bool = False,
    checkpoint_dir: str | Path | None = None,
    trigger_seconds: float = 1.0,
) -> Run:
    """Start the app's streaming queries and return the handle (``wait()`` / ``stop()``).

    ``shard_id`` names this deployment among the writers of aggregations partitioned by shard
    (``@PartitionById``, or every aggregation that does not say when ``partition_by_id``).
    ``on_bad_file``: an input file that cannot be read is recorded and set aside (``"skip"``), or stops the
    run (``"fail"``).
    A micro-batch of a file input takes at most ``max_files_per_trigger`` new files, else about
    ``max_bytes_per_trigger`` bytes of them (default ``$TILTFRAME_MAX_BYTES_PER_TRIGGER`` or 64 MiB, 0: no
    bound), so a backlog is read in steps whose figures show within seconds.
    ``rebuild`` first drops what the store holds of each aggregation fed here and its checkpoint, so that
    every input is read again (the way on when the store was replaced or emptied; docs/deployment.md).
    ``checkpoint_dir``: where checkpoints live (a local path or ``file:`` URI) instead of
    ``<data_dir>/checkpoints`` (default ``$TILTFRAME_CHECKPOINT_DIR``; docs/configuration.md).
    Inputs may be folders on any file system Spark reaches (``hdfs://``, ``s3a://``, ``file://``, ...).
    ``trigger_seconds``: with ``follow``, a micro-batch starts at most this often (longer batches write each
    coarse row fewer times; docs/scaling.md); a continuous query's at least as often as its EMIT intervals.
    """
    from tiltframe.engine.rollup.shards import Deployment
    from tiltframe.engine.run_options import RunOptions

    options = RunOptions(data_dir=data_dir, follow=follow, outputs=outputs or {}, on_batch=on_batch,
                         max_files_per_trigger=max_files_per_trigger, max_bytes_per_trigger=max_bytes_per_trigger,
                         deployment=Deployment(shard_id, partition_by_id), on_bad_file=on_bad_file, rebuild=rebuild,
                         checkpoint_dir=checkpoint_dir, trigger_seconds=trigger_seconds)
    return start_run(app, inputs, options, spark=spark)


def start_run(app: AppSpec, inputs: Mapping[str, InputLike], options: RunOptions, *,
              spark: SparkSession | None = None) -> Run:
    """:func:`start` with its options made already (``tiltframe run`` makes them from its flags)."""
    from tiltframe.engine.runner import Run

    return Run(app, inputs, options, spark=spark).start()


def run(
    app: AppSpec,
    inputs: Mapping[str, InputLike],
    *,
    data_dir: str | Path | None = None,
    spark: SparkSession | None = None,
    outputs: Mapping[str, Sink] | None = None,
    on_batch: Callable[[BatchReport], None] | None = None,
    max_files_per_trigger: int | None = None,
    max_bytes_per_trigger: int | None = None,
    shard_id: str | None = None,
    partition_by_id: bool = False,
    on_bad_file: str = "skip",
    rebuild: bool = False,
    checkpoint_dir: str | Path | None = None,
) -> RunResult:
    """Process everything available on ``inputs`` (files or DataFrames) and return the totals (``rebuild``,
    ``checkpoint_dir``: as in :func:`start`)."""
    handle = start(app, inputs, data_dir=data_dir, spark=spark, outputs=outputs, on_batch=on_batch,
                   max_files_per_trigger=max_files_per_trigger, max_bytes_per_trigger=max_bytes_per_trigger,
                   shard_id=shard_id, partition_by_id=partition_by_id, on_bad_file=on_bad_file, rebuild=rebuild,
                   checkpoint_dir=checkpoint_dir)
    try:
        return handle.wait()
    finally:
        handle.close()


def insert(
    app: AppSpec,
    table: str,
    rows: DataFrame | pd.DataFrame | str | Path,
    *,
    data_dir: str | Path | None = None,
    spark: SparkSession | None = None,
    preaggregate: bool = True,
) -> PipelineTotals:
    """Insert rows (a Spark or pandas DataFrame, or a CSV / JSON Lines / Parquet file or folder) into a
    pre-aggregated table; ``preaggregate=False`` stores each row as it is (EventQL's INSERT_NOPREAGGR).
    Queries answer the same either way."""
    from tiltframe.engine.lifecycle.inserts import insert_rows
    from tiltframe.engine.spark.session import get_session

    return insert_rows(app, table, rows, data_dir=data_dir or default_data_dir(), spark=spark or get_session(),
                       preaggregate=preaggregate)


def parse_records(app: AppSpec, stream: str, df: DataFrame, **options: Any) -> DataFrame:
    """``df``'s column of JSON or CSV text (Kafka's ``value``, ...) as rows of ``stream``, for ``run`` /
    ``start`` to type and reject like file rows; ``options`` as in
    :func:`tiltframe.engine.inputs.text_sources.parse_records` (docs/kafka.md)."""
    from tiltframe.engine.inputs.text_sources import parse_records as parse

    return parse(df, app.stream(app.input_stream(stream)), **options)


def select(app: AppSpec, text: str, *, data_dir: str | Path | None = None) -> pd.DataFrame:
    """Answer ``SELECT ... FROM <table>``: over a pre-aggregated table, partial rows merged by the query's
    keys (docs/preaggregation.md), or ``FROM partials(T)`` for the stored rows as they are; over a raw
    table, its rows, grouped and aggregated as the query says."""
    from tiltframe.lang.siddhiql.parser import parse_table_query
    from tiltframe.retrieval.select import select as run_select

    q = parse_table_query(text, app)
    stores = StoreRegistry(data_dir or default_data_dir(), read_only=True, share_files=True)
    try:
        return run_select(app, q, stores.for_spec(app.table(q.table).store))
    finally:
        stores.close()


def _as_query(app: AppSpec, query: str | RetrievalQuery) -> RetrievalQuery:
    """The query validated against ``app``, each attribute resolved to its side (request or aggregation)."""
    from tiltframe.lang.checks.retrieval import validate_query

    return _parsed(app, query) if isinstance(query, str) else validate_query(app, query)


@functools.lru_cache(maxsize=256)
def _parsed(app: AppSpec, text: str) -> RetrievalQuery:
    """A query text parsed and validated once per app (a fifth of a small retrieval's time); refused texts
    raise, and are not kept."""
    from tiltframe.lang.siddhiql.parser import parse_retrieval

    return parse_retrieval(text, app)


def query(
    app: AppSpec,
    text: str | RetrievalQuery,
    *,
    data_dir: str | Path | None = None,
    request: Mapping[str, Any] | None = None,
    spark: SparkSession | None = None,
    as_spark: bool = False,
) -> pd.DataFrame | DataFrame:
    """Answer an on-demand retrieval (``from Agg within ... per ... select ...``) from the store.

    Returns a pandas DataFrame, or a Spark DataFrame with ``as_spark=True``.  Never writes.
    """
    from tiltframe.aggregates.layout import AggregationLayout
    from tiltframe.retrieval.retrieve import retrieve
    from tiltframe.retrieval.stored_apps import as_stored, not_stored_yet

    q = _as_query(app, text)
    if q.request_stream is not None and request is None:
        msg = f"this query joins request stream {q.request_stream}; give request=... or use the on-demand form"
        raise QueryError(msg)
    stores = StoreRegistry(data_dir or default_data_dir(), read_only=True, share_files=True)
    try:
        store = stores.for_aggregation(app.aggregation(q.aggregation))
        try:
            result = retrieve(AggregationLayout.of(app, q.aggregation), store, q, request)
        except StoreError:
            stored = as_stored(app, store, q.aggregation)
            if stored is app:
                raise
            # The store holds an earlier definition (a measure or level added since): read what it holds.
            try:
                q = _as_query(stored, text)
            except (QueryError, DefinitionError) as e:
                raise QueryError(f"{not_stored_yet(app, stored, q.aggregation)}. {e}") from None
            result = retrieve(AggregationLayout.of(stored, q.aggregation), store, q, request)
    finally:
        stores.close()
    if as_spark:
        from tiltframe.engine.spark.session import get_session

        return (spark or get_session()).createDataFrame(result)
    return result


def inspect(
    app: AppSpec, aggregation: str | None = None, *, data_dir: str | Path | None = None
) -> list[AggregationInfo]:
    """Tables, row counts per granularity, time range, and event counts of every aggregation (or the one
    named)."""
    from tiltframe.aggregates.layout import AggregationLayout
    from tiltframe.retrieval.stored_apps import as_stored

    stores = StoreRegistry(data_dir or default_data_dir(), read_only=True, share_files=True)
    try:
        infos = []
        for agg in app.aggregations_named(aggregation):
            store = stores.for_aggregation(agg)
            infos.append(store.info(AggregationLayout.of(as_stored(app, store, agg.name), agg.name)))
        return infos
    finally:
        stores.close()


def changed_files(
    app: AppSpec, aggregation: str | None = None, *, data_dir: str | Path | None = None,
    checkpoint_dir: str | Path | None = None,
) -> dict[str, list[ChangedFile]]:
    """Input files that grew, changed or went away after a batch read them, per aggregation (every one, or
    the one named): what was read of each and what is there now (docs/bad-input.md).  Checkpoints on a
    Hadoop file system are read through Spark (a local session starts when none runs)."""
    from tiltframe.aggregates.layout import AggregationLayout
    from tiltframe.engine.inputs.file_manifest import FileManifest
    from tiltframe.engine.inputs.filesystems import check_checkpoint_root, checkpoint_root
    from tiltframe.engine.inputs.hadoop_paths import HadoopPath
    from tiltframe.engine.rollup.markers import checkpoint_dir as folder_of

    root = Path(data_dir or default_data_dir())
    checkpoints = checkpoint_root(checkpoint_dir, root)
    if isinstance(checkpoints, HadoopPath):
        from tiltframe.engine.spark.session import get_session

        get_session()
        check_checkpoint_root(checkpoints)
    return {agg.name: FileManifest(folder_of(root, AggregationLayout.of(app, agg.name), checkpoints)).changed()
            for agg in app.aggregations_named(aggregation)}


def purge(
    app: AppSpec, aggregation: str | None = None, *, data_dir: str | Path | None = None
) -> dict[str, PurgeResult | None]:
    """Purge now, by retention, every aggregation (or the one named) whose purging is on; an aggregation
    with ``@purge(enable='false')`` is left alone (None in the result)."""
    from tiltframe.aggregates.layout import AggregationLayout
    from tiltframe.store.lifecycle.purge import Purger

    names = [a.name for a in app.aggregations_named(aggregation)]
    stores = StoreRegistry(data_dir or default_data_dir())
    try:
        results: dict[str, PurgeResult | None] = {}
        for name in names:
            layout = AggregationLayout.of(app, name)
            purger = Purger(layout, stores.for_aggregation(layout.spec))
            results[name] = purger.purge() if purger.retention.enabled else None
        return results
    finally:
        stores.close()


def compact(app: AppSpec, table: str | None = None, *, data_dir: str | Path | None = None) -> dict[str, int]:
    """Merge the partial rows of the closed intervals of every pre-aggregated table (or the one named);
    returns the rows removed per table.  Safe while pipelines write and readers read."""
    from tiltframe.aggregates.layout import AggregationLayout
    from tiltframe.store.lifecycle.compaction import Compactor

    names = [table] if table is not None else [t.name for t in app.tables if t.preaggregation is not None]
    stores = StoreRegistry(data_dir or default_data_dir())
    try:
        removed: dict[str, int] = {}
        for name in names:
            if app.table(name).preaggregation is None:
                msg = (f"table {name} has no preaggregate clause: its rows are stored as they are, so there are no "
                       f"partial rows to compact")
                raise UsageError(msg)
            layout = AggregationLayout.of(app, name)
            removed[name] = Compactor(layout, stores.for_aggregation(layout.spec)).compact()
        return removed
    finally:
        stores.close()


def rejected(app: AppSpec, aggregation: str, *, data_dir: str | Path | None = None, limit: int = 100) -> pd.DataFrame:
    """The latest recorded events of ``aggregation``, newest first: rejected ones and those moved into
    another bucket (column ``kind``), with their reasons and original event times."""
    from tiltframe.aggregates.layout import AggregationLayout
    from tiltframe.retrieval.stored_apps import as_stored

    stores = StoreRegistry(data_dir or default_data_dir(), read_only=True, share_files=True)
    try:
        store = stores.for_aggregation(app.aggregation(aggregation))
        return store.rejected(AggregationLayout.of(as_stored(app, store, aggregation), aggregation), limit)
    finally:
        stores.close()
