"""Compressed text files (``a.csv.gz``, ``b.jsonl.zst``): the codecs Spark reads by a file's last suffix, the
format told by the suffix under it, and a damaged file told apart before Spark reads it.

Spark decompresses text files by suffix (``org.apache.spark.io.HadoopCodecStreams``: Hadoop's codecs, and
Zstandard through zstd-jni): gzip, bzip2, deflate (a zlib stream), zstd, and Hadoop's own LZ4 and Snappy
block streams.  Most of them fail on a file cut short or not in their format, and the batch's files are
then read one by one (``tiltframe.engine.inputs.file_batches``).  Some read such a file as no rows, or as the rows
before the cut, without a word: a text file named ``.bz2``, ``.lz4`` or ``.snappy``; an LZ4 frame as the
``lz4`` command writes it or a Snappy framed stream (formats Hadoop's codecs do not read); a Hadoop LZ4 or
Snappy stream cut short.  ``damage`` finds these from the file's first bytes and, for the block streams,
from their blocks' length fields (8 bytes per 256 KiB block, nothing decompressed), so that such a file is
recorded with its reason instead of losing its events silently.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession

from tiltframe.engine.inputs.filesystems import local_path

#: Spark's codecs by a file's last suffix (in any case).
CODECS = {".gz": "gzip", ".bz2": "bzip2", ".deflate": "deflate", ".zst": "zstd", ".zstd": "zstd",
          ".lz4": "lz4", ".snappy": "snappy"}
_LZ4_FRAMES = (b"\x04\x22\x4d\x18", b"\x02\x21\x4c\x18")  # the LZ4 frame format's magic, and its legacy one
_SNAPPY_FRAMED = b"\xff\x06\x00\x00sNaPpY"
_ZSTD = b"\x28\xb5\x2f\xfd"
_HOW_ON = "decompress it, or compress it with gzip or zstd"


def codec_of(name: str) -> str | None:
    """The codec a file's name says (``a.csv.gz``: gzip), None for a file that is not compressed."""
    dot = name.rfind(".")
    return CODECS.get(name[dot:].lower()) if dot > 0 else None


def without_codec(name: str) -> str:
    """A file's name without its compression suffix (``a.csv.gz``: ``a.csv``)."""
    return name[: name.rfind(".")] if codec_of(name) else name


def damage(codec: str, size: int, read_at: Callable[[int, int], bytes]) -> str | None:
    """Why a file of ``size`` bytes named for ``codec`` cannot be read as such (None: it looks whole), from
    its first bytes (``read_at(offset, count)``); an empty file is empty whatever its name (no events)."""
    if size == 0:
        return None
    first = read_at(0, 16)
    if codec == "gzip" and not first.startswith(b"\x1f\x8b"):
        return "not a gzip file (it does not start with gzip's bytes 1f 8b)"
    if codec == "bzip2" and not _bzip2_header(first):
        return "not a bzip2 file (it does not start with bzip2's header 'BZh' and a block)"
    if codec == "deflate" and not _zlib_header(first):
        return "not a deflate (zlib) stream (its first two bytes are no zlib header)"
    if codec == "zstd" and not (first.startswith(_ZSTD) or _zstd_skippable(first)):
        return "not a Zstandard file (it does not start with a Zstandard frame)"
    if codec == "lz4" and first[:4] in _LZ4_FRAMES:
        return (f"an LZ4 frame (as the lz4 command writes), which Spark's LZ4 codec does not read (it reads "
                f"Hadoop's LZ4 block stream, as Spark and Hadoop write): {_HOW_ON}")
    if codec == "snappy" and first.startswith(_SNAPPY_FRAMED):
        return (f"a Snappy framed stream (as python-snappy and snzip write), which Spark's Snappy codec does not "
                f"read (it reads Hadoop's Snappy block stream, as Spark and Hadoop write): {_HOW_ON}")
    if codec in ("lz4", "snappy"):
        return _blocks_damage(codec, size, read_at)
    return None


def _zlib_header(first: bytes) -> bool:
    return len(first) >= 2 and first[0] & 0x0F == 8 and first[0] >> 4 <= 7 and (first[0] << 8 | first[1]) % 31 == 0


def _bzip2_header(first: bytes) -> bool:
    """'BZh', the block size (1-9), then a block's magic or the end of the stream's (an empty stream)."""
    return (first[:3] == b"BZh" and first[3:4] in [b"%d" % i for i in range(1, 10)]
            and first[4:10] in (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90"))


def _zstd_skippable(first: bytes) -> bool:
    return len(first) >= 4 and first[0] & 0xF0 == 0x50 and first[1:4] == b"\x2a\x4d\x18"


def _blocks_damage(codec: str, size: int, read_at: Callable[[int, int], bytes]) -> str | None:
    """Hadoop's block stream (``BlockCompressorStream``): blocks of [uncompressed length][compressed chunks],
    each chunk [length][bytes], which must end exactly at the file's end.  Hadoop's reader takes a stream
    that ends early for its end, so a file cut short would lose its later rows silently.  A Snappy chunk
    starts with its uncompressed length (a varint), so its blocks are walked exactly; an LZ4 block is one
    chunk (Hadoop's compressor sizes its output for a whole block)."""
    pos = 0
    while pos < size:
        if pos + 4 > size:
            return _cut(codec, pos, size)
        (block,) = struct.unpack(">I", read_at(pos, 4))
        got, pos = 0, pos + 4
        while got < block:
            if pos + 4 > size:
                return _cut(codec, pos, size)
            (chunk,) = struct.unpack(">I", read_at(pos, 4))
            if chunk == 0 or pos + 4 + chunk > size:
                return _cut(codec, pos, size)
            length = _snappy_length(read_at(pos + 4, 5)) if codec == "snappy" else block
            if length <= 0 or got + length > block:
                return _cut(codec, pos, size)
            got, pos = got + length, pos + 4 + chunk
    return None


def _snappy_length(first: bytes) -> int:
    """The uncompressed length a raw Snappy chunk starts with (a little-endian base-128 varint)."""
    value = 0
    for i, byte in enumerate(first):
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return value
    return -1


def _cut(codec: str, pos: int, size: int) -> str:
    name = {"lz4": "LZ4", "snappy": "Snappy"}[codec]
    return (f"not a whole Hadoop {name} block stream: the part at byte {pos} does not fit in its {size} bytes "
            f"(a file cut short, or another format)")


def file_damage(spark: SparkSession, path: str) -> str | None:
    """``damage`` of the compressed file ``path`` (a Hadoop path), read locally or through Spark's file
    system; None for a file that is not compressed."""
    codec = codec_of(path.rsplit("/", 1)[-1])
    if codec is None:
        return None
    local = local_path(path)
    if local is not None:
        with open(local, "rb") as fh:
            size = fh.seek(0, 2)

            def read_local(offset: int, count: int) -> bytes:
                fh.seek(offset)
                return fh.read(count)

            return damage(codec, size, read_local)
    jvm, conf = _jvm(spark)
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(conf)
    stream = fs.open(hpath)
    try:
        def read_remote(offset: int, count: int) -> bytes:
            stream.seek(offset)
            return bytes(stream.readNBytes(count))

        return damage(codec, int(fs.getFileStatus(hpath).getLen()), read_remote)
    finally:
        stream.close()


def decompressed_head(spark: SparkSession, path: str, size: int) -> bytes:
    """The first ``size`` bytes of the text of the compressed file ``path``, decompressed as Spark's readers
    decompress it (``HadoopCodecStreams``)."""
    jvm, conf = _jvm(spark)
    stream = jvm.org.apache.spark.io.HadoopCodecStreams.createInputStream(conf, jvm.org.apache.hadoop.fs.Path(path))
    try:
        return bytes(stream.readNBytes(size))
    finally:
        stream.close()


def _jvm(spark: SparkSession) -> tuple[Any, Any]:
    return spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
