"""Fixtures of the engine's tests: a directory on a Hadoop file system that is not the local one."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class MountedDir:
    """``uri`` on viewfs (Hadoop's client-side mount table, part of every Hadoop client) whose files are in
    ``local``: every call goes through Hadoop's FileSystem API as on hdfs or s3a, and the test can look."""

    uri: str
    local: Path


@pytest.fixture
def mounted(spark, tmp_path: Path) -> MountedDir:
    name = f"tf{uuid.uuid4().hex[:12]}"  # a mount table of its own: Hadoop caches file systems by authority
    local = tmp_path / "mounted"
    local.mkdir()
    spark._jsc.hadoopConfiguration().set(f"fs.viewfs.mounttable.{name}.link./d", local.as_uri())
    return MountedDir(f"viewfs://{name}/d", local)
