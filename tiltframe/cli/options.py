"""The options commands share, and the checks that turn a wrong one into a usage error (exit 2) before
any work starts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tiltframe import api
from tiltframe.errors import UsageError, unknown
from tiltframe.model.trickle import TRICKLE_SUFFIX

if TYPE_CHECKING:
    from tiltframe.model.aggregations import AggregationSpec
    from tiltframe.model.app import AppSpec

FORMATS = ("csv", "json", "parquet")

AppArg = Annotated[
    Path,
    typer.Argument(
        metavar="APP", help="The app file (SiddhiQL: define stream / define aggregation / queries; or a trickle "
        "query, .trickle)."
    ),
]
DataDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        "-d",
        help="Where the store, checkpoints and Spark's log (logs/spark.log) live "
        "\\[default: $TILTFRAME_DATA_DIR or ./tiltframe-data].",
        show_default=False,
    ),
]
ShardOpt = Annotated[
    str | None,
    typer.Option(
        "--shard-id",
        help="This deployment's shard, for aggregations partitioned by shard (@PartitionById) "
        "\\[default: $TILTFRAME_SHARD_ID, or shard_id in the config file].",
        show_default=False,
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="A TOML file with shard_id and partition_by_id (partition every aggregation that does not say) "
        "\\[default: $TILTFRAME_CONFIG].",
        show_default=False,
    ),
]


#: The languages an app file may be written in (``--lang``).
LANGS = ("siddhiql", "trickle")
LangOpt = Annotated[
    str | None,
    typer.Option(
        "--lang",
        metavar="siddhiql|trickle",
        help="The app file's language \\[default: trickle (Tremor's) for a .trickle file, else SiddhiQL].",
        show_default=False,
    ),
]


def is_trickle(path: Path, lang: str | None) -> bool:
    """Whether the app file ``path`` is a trickle query: ``--lang`` when given, else its name."""
    if lang is None:
        return path.suffix == TRICKLE_SUFFIX
    if lang.lower() not in LANGS:
        raise UsageError(f"--lang: {unknown('language', lang, LANGS)}")
    return lang.lower() == "trickle"


CheckpointDirOpt = Annotated[
    str | None,
    typer.Option(
        "--checkpoint-dir",
        help="Where the checkpoints live, apart from the data directory (a local path or file:// URI) "
        "\\[default: $TILTFRAME_CHECKPOINT_DIR or DATA_DIR/checkpoints].",
        show_default=False,
    ),
]


def resolve_data_dir(value: Path | None) -> Path:
    """The data directory (``--data-dir``, else the default); a usage error when it is not a directory."""
    path = value if value is not None else api.default_data_dir()
    given = "--data-dir" if value is not None else "the data directory ($TILTFRAME_DATA_DIR or ./tiltframe-data)"
    if path.exists() and not path.is_dir():
        msg = f"{given} '{path}' is a file, not a directory (it holds the store, checkpoints and logs)"
        raise UsageError(msg)
    existing = next((parent for parent in path.absolute().parents if parent.exists()), None)
    if not path.exists() and existing is not None and not existing.is_dir():
        msg = f"{given} '{path}' cannot be made: '{existing}' is a file, not a directory"
        raise UsageError(msg)
    return path


def check_format(fmt: str, choices: tuple[str, ...]) -> None:
    if fmt not in choices:
        msg = f"--format: {unknown('format', fmt, choices)}"
        raise UsageError(msg)


def check_name(option: str, kind: str, name: str | None, choices: list[str]) -> None:
    """A name given to ``option`` that the app does not define is a usage error, with a "did you mean"."""
    if name is not None and name not in choices:
        msg = f"{option}: {unknown(kind, name, choices)}"
        raise UsageError(msg)


def check_config_file(config: Path | None) -> None:
    """A config file that is a directory or not UTF-8 is a usage error (the rest is checked on reading)."""
    from tiltframe.engine.rollup.shards import CONFIG_ENV

    raw = config if config is not None else os.environ.get(CONFIG_ENV) or None
    if raw is None:
        return
    path = Path(raw)
    if path.is_dir():
        msg = f"config file {path} is a directory; give a TOML file"
        raise UsageError(msg)
    if path.is_file():
        data = path.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            msg = f"config file {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
            raise UsageError(msg) from None


def pairs(values: list[str] | None, option: str) -> dict[str, str]:
    """``STREAM=VALUE`` options as a dict; a usage error for anything else or a repeated stream."""
    result: dict[str, str] = {}
    for raw in values or []:
        name, sep, value = raw.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            msg = f"{option} '{raw}': expected STREAM=VALUE, for example {option} TradeStream=data/trades"
            raise UsageError(msg)
        if name in result:
            msg = f"{option} names stream {name} twice"
            raise UsageError(msg)
        result[name] = value
    return result


def is_local(path: str) -> bool:
    return "://" not in path and not path.startswith(("hdfs:", "s3a:", "s3:", "gs:", "abfs:", "file:"))


def output_streams(spec: AppSpec) -> list[str]:
    """What ``--output`` may name: the output streams of retrieval joins, stream queries and the continuous
    queries."""
    joins = [q.insert_into or q.name or f"query{i}" for i, q in enumerate(spec.queries) if q.request_stream is not None]
    streams = [q.target for q in spec.stream_queries]
    return [*joins, *streams, *(spec.continuous_name(i) for i in range(len(spec.continuous)))]


def store_location(spec: AppSpec, agg: AggregationSpec, data_dir: Path) -> Path | str:
    """Where an aggregation's rollups are kept: its SQLite file, or its server URL without the password."""
    from tiltframe import store

    return store.store_location(agg.store, data_dir)


def checkpoint_location(spec: AppSpec, agg: AggregationSpec, data_dir: Path, checkpoints: str | None = None) -> Path:
    """The checkpoint directory of an aggregation's streaming query (as the runner names it; ``checkpoints``:
    ``--checkpoint-dir``)."""
    from tiltframe.aggregates.layout import AggregationLayout
    from tiltframe.engine.inputs.filesystems import checkpoint_root
    from tiltframe.engine.rollup.markers import checkpoint_dir

    return checkpoint_dir(data_dir, AggregationLayout.of(spec, agg.name), checkpoint_root(checkpoints, data_dir))


def check_run_options(
    spec: AppSpec,
    inputs: dict[str, str],
    formats: dict[str, str],
    outputs: dict[str, str],
) -> None:
    """Fail fast (before Spark starts) on names and paths that cannot work."""
    streams = [s.name for s in spec.streams] + [t.name for t in spec.tables]
    for name in inputs:
        if name not in streams:
            msg = f"--input: {unknown('stream', name, streams)}"
            raise UsageError(msg)
    for name, fmt in formats.items():
        if name not in inputs:
            msg = f"--input-format {name}={fmt}: stream {name} has no --input"
            raise UsageError(msg)
        if fmt.lower() not in FORMATS:
            msg = f"--input-format {name}: {unknown('format', fmt, FORMATS)}"
            raise UsageError(msg)
    out_names = output_streams(spec)
    for name in outputs:
        if name not in out_names:
            if not out_names:
                msg = (f"--output {name}: the app has no retrieval join, stream query or continuous query, so "
                       "nothing to output")
                raise UsageError(msg)
            msg = f"--output: {unknown('output stream', name, out_names)}"
            raise UsageError(msg)
    from tiltframe.engine.inputs.filesystems import local_path

    for name, path in inputs.items():
        local = local_path(path)  # other schemes are checked through Spark's file systems once it runs
        if local is not None and not local.is_dir():
            what = "does not exist" if not local.exists() else "is not a directory"
            msg = f"--input {name}={path}: '{path}' {what} (give a directory of csv, json or parquet files)"
            raise UsageError(msg)
