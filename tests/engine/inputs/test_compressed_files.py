"""Compressed input files: every codec Spark reads by suffix gives the events of the same rows plain, a
folder may mix them, and a file that is damaged (cut short, not in its codec's format) is recorded with its
reason while the rest of the batch is aggregated.

Files are written by independent tools (Python's gzip, bz2 and zlib, pyarrow's Zstandard, LZ4 and Snappy,
the Hadoop block framing laid out by hand, and Spark's own writer for its LZ4 and Snappy); the oracle is
pandas over the rows written.
"""

from __future__ import annotations

import bz2
import gzip
import random
import struct
import zlib
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.bad_input.harness import T0, TOTALS_APP, Outcome, run
from tiltframe.engine.inputs.compressed_files import codec_of, damage, without_codec
from tiltframe.engine.inputs.sources import file_format, list_stream


def events(seed: int, n: int) -> pd.DataFrame:
    rng = random.Random(seed)
    return pd.DataFrame({"k": [rng.choice("abcde") for _ in range(n)],
                         "v": [rng.randrange(-40, 400) / 4 for _ in range(n)],
                         "ts": [T0 + rng.randrange(0, 86_400_000) for _ in range(n)]})


def csv_bytes(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode()


def jsonl_bytes(df: pd.DataFrame) -> bytes:
    return df.to_json(orient="records", lines=True).encode()


def hadoop_blocks(data: bytes, codec: str, block: int = 64 * 1024) -> bytes:
    """Hadoop's block stream (``BlockCompressorStream``) of ``data``: per block its length, then one chunk,
    its compressed length and bytes (pyarrow's raw LZ4 block or raw Snappy)."""
    out = bytearray()
    for i in range(0, len(data), block):
        part = data[i:i + block]
        packed = pa.compress(part, codec="lz4_raw" if codec == "lz4" else "snappy", asbytes=True)
        out += struct.pack(">II", len(part), len(packed)) + packed
    return bytes(out)


COMPRESS = {
    ".gz": gzip.compress,
    ".bz2": bz2.compress,
    ".deflate": zlib.compress,
    ".zst": lambda b: pa.compress(b, codec="zstd", asbytes=True),
    ".zstd": lambda b: pa.compress(b, codec="zstd", asbytes=True),
    ".lz4": lambda b: hadoop_blocks(b, "lz4"),
    ".snappy": lambda b: hadoop_blocks(b, "snappy"),
}


def oracle(frames: list[pd.DataFrame]) -> dict[str, tuple[float, int]]:
    df = pd.concat(frames)
    got = df.groupby("k").agg(total=("v", "sum"), events=("v", "size"))
    return {k: (float(r.total), int(r.events)) for k, r in got.iterrows()}


def totals(outcome: Outcome) -> dict[str, tuple[float, int]]:
    got = outcome.query('from A within "2024-01-05", "2024-01-06" per "days" select k, total, events')
    return {r.k: (float(r.total), int(r.events)) for r in got.itertuples()}


# --- names and damage, without Spark ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "fmt"), [
    ("a.csv", "csv"), ("a.csv.gz", "csv"), ("A.CSV.GZ", "csv"), ("b.jsonl.zst", "json"), ("b.json.zstd", "json"),
    ("c.ndjson.bz2", "json"), ("d.csv.deflate", "csv"), ("e.csv.lz4", "csv"), ("f.jsonl.snappy", "json"),
    ("g.parquet", "parquet"), ("g.parquet.gz", None), ("h.gz", None), ("i.txt.gz", None), ("j.csv.xz", None),
])
def test_the_format_is_told_under_the_compression_suffix(name: str, fmt: str | None) -> None:
    assert file_format(name) == fmt


def test_codec_and_plain_name() -> None:
    assert codec_of("x.csv.GZ") == "gzip" and without_codec("x.csv.GZ") == "x.csv"
    assert codec_of("x.csv") is None and without_codec("x.csv") == "x.csv"
    assert codec_of(".gz") is None


@settings(max_examples=60, deadline=None)
@given(text=st.binary(max_size=300_000), suffix=st.sampled_from(sorted(COMPRESS)))
def test_a_whole_compressed_file_looks_whole(text: bytes, suffix: str) -> None:
    data = COMPRESS[suffix](text)
    assert damage(CODEC[suffix], len(data), lambda o, n: data[o:o + n]) is None


CODEC = {s: codec_of("x" + s) for s in COMPRESS}


TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FFF), min_size=1, max_size=2000).map(str.encode)


@settings(max_examples=60, deadline=None)
@given(text=TEXT, suffix=st.sampled_from(sorted(COMPRESS)))
def test_text_named_for_a_codec_is_damaged(text: bytes, suffix: str) -> None:
    """Plain text under a codec's suffix is never taken for that codec (it would read as no rows or as
    noise): gzip, bzip2, zlib and Zstandard by their first bytes, Hadoop's blocks by their lengths.  A text
    starting ``x^`` has a zlib header: Spark's reader then fails on it, with its reason."""
    assume(not (suffix == ".deflate" and text.startswith(b"x^")))
    assert damage(CODEC[suffix], len(text), lambda o, n: text[o:o + n]) is not None


@settings(max_examples=40, deadline=None)
@given(text=st.binary(min_size=1, max_size=300_000), suffix=st.sampled_from([".lz4", ".snappy"]),
       cut=st.floats(min_value=0.0, max_value=0.999))
def test_a_hadoop_block_stream_cut_short_is_damaged(text: bytes, suffix: str, cut: float) -> None:
    """Hadoop's reader takes a cut block stream for its end (the rows before the cut, silently): the cut
    is found from the blocks' lengths."""
    data = COMPRESS[suffix](text)
    part = data[: int(len(data) * cut)] if int(len(data) * cut) > 0 else data[:1]
    assert damage(CODEC[suffix], len(part), lambda o, n: part[o:o + n]) is not None


def test_frames_hadoop_does_not_read_are_named() -> None:
    frame = pa.compress(b"k,v,ts\n", codec="lz4_frame", asbytes=True)
    assert "LZ4 frame" in (damage("lz4", len(frame), lambda o, n: frame[o:o + n]) or "")
    framed = b"\xff\x06\x00\x00sNaPpY" + b"\x00" * 20
    assert "Snappy framed" in (damage("snappy", len(framed), lambda o, n: framed[o:o + n]) or "")
    assert damage("gzip", 0, lambda o, n: b"") is None  # an empty file: no events, whatever its name


# --- real runs ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_compressed_files_give_the_events_of_the_same_rows_plain(spark, tmp_path: Path) -> None:
    """A folder of CSV files (pandas' to_csv, with a header) in every codec, plain ones beside them; the
    same for JSON Lines; each run's totals equal pandas' over the rows written, every event read once."""
    for fmt, write, names in (("csv", csv_bytes, ("a.csv", "b.csv")), ("json", jsonl_bytes, ("a.jsonl", "b.json"))):
        inbox = tmp_path / f"in-{fmt}"
        inbox.mkdir()
        frames = []
        for i, suffix in enumerate(["", *COMPRESS, ".GZ"]):
            df = events(i * 7 + len(fmt), 40 + i)
            frames.append(df)
            data = write(df)
            data = COMPRESS.get(suffix.lower(), lambda b: b)(data)
            (inbox / f"part{i}-{names[i % 2]}{suffix}").write_bytes(data)
        out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / f"data-{fmt}")
        t = out.totals["A"]
        assert (t.events_read, t.events_rejected, t.files_rejected) == (sum(len(f) for f in frames), 0, 0)
        assert totals(out) == oracle(frames)


@pytest.mark.slow
def test_spark_written_lz4_and_snappy_are_read(spark, tmp_path: Path) -> None:
    """The LZ4 and Snappy files Spark's own writer makes (Hadoop's block streams) read as their rows."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    frames = []
    for i, codec in enumerate(("lz4", "snappy")):
        df = events(100 + i, 3000)
        frames.append(df)
        written = tmp_path / f"w-{codec}"
        spark.createDataFrame(df).coalesce(1).write.option("header", "true").option("compression", codec).csv(
            str(written))
        part = next(written.glob(f"part-*.csv.{codec}"))
        part.rename(inbox / f"spark-{codec}.csv.{codec}")
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    assert (out.totals["A"].events_read, out.totals["A"].files_rejected) == (6000, 0)
    assert totals(out) == oracle(frames)


@pytest.mark.slow
def test_damaged_compressed_files_are_recorded_and_the_rest_aggregated(spark, tmp_path: Path) -> None:
    """A .csv.gz cut in half, a text file named .gz and .bz2, an LZ4 frame, Hadoop LZ4 and Snappy streams
    cut short, a Zstandard file cut short: each recorded (kind file) with its reason, counted in the run's
    totals and in the store; the whole files beside them aggregated."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    good = [events(1, 50), events(2, 60)]
    (inbox / "good.csv.gz").write_bytes(gzip.compress(csv_bytes(good[0])))
    (inbox / "good.csv").write_bytes(csv_bytes(good[1]))
    big = csv_bytes(events(3, 20_000))
    bad = {
        "cut.csv.gz": gzip.compress(big)[: len(gzip.compress(big)) // 2],
        "text.csv.gz": csv_bytes(events(4, 5)),
        "text.csv.bz2": csv_bytes(events(5, 5)),
        "frame.csv.lz4": pa.compress(big, codec="lz4_frame", asbytes=True),
        "cut.csv.lz4": hadoop_blocks(big, "lz4")[:-100],
        "cut.csv.snappy": hadoop_blocks(big, "snappy")[:-100],
        "cut.csv.zst": pa.compress(big, codec="zstd", asbytes=True)[:-100],
    }
    for name, data in bad.items():
        (inbox / name).write_bytes(data)
    out = run(spark, TOTALS_APP, {"S": inbox}, tmp_path / "data")
    t = out.totals["A"]
    assert (t.events_read, t.events_rejected, t.files_rejected) == (110, 0, len(bad))
    assert totals(out) == oracle(good)
    rows = out.recorded("A")
    files = rows[rows["kind"] == "file"]
    reasons = {v.rsplit("/", 1)[-1]: r for v, r in zip(files["value"], files["reason"], strict=True)}
    assert set(reasons) == set(bad)
    assert "not a gzip file" in reasons["text.csv.gz"]
    assert "not a bzip2 file" in reasons["text.csv.bz2"]
    assert "LZ4 frame" in reasons["frame.csv.lz4"]
    assert "Hadoop LZ4 block stream" in reasons["cut.csv.lz4"]
    assert "Hadoop Snappy block stream" in reasons["cut.csv.snappy"]
    assert "Unexpected end of input stream" in reasons["cut.csv.gz"]
    assert "Truncated" in reasons["cut.csv.zst"] or "zstd" in reasons["cut.csv.zst"].lower()
    assert dict(out.info("A").recorded_by_kind)["file"] == len(bad)


@pytest.mark.slow
def test_a_folder_of_compressed_files_tells_its_format(spark, tmp_path: Path) -> None:
    """A folder holding only .csv.gz files is a CSV folder; only .jsonl.zst files, a JSON one."""
    from tiltframe.engine.inputs.sources import FileInput
    from tiltframe.lang.siddhiql.parser import parse_app

    stream = parse_app(TOTALS_APP).stream("S")
    for name, fmt in (("a.csv.gz", "csv"), ("b.jsonl.zst", "json")):
        folder = tmp_path / fmt
        folder.mkdir()
        (folder / name).write_bytes(b"")
        assert list_stream(spark, FileInput(str(folder)), stream)[1] == fmt
