"""Checks that the lake root is usable, before any table work.

Spark would report both problems deep inside a Delta commit, after the snapshot work, as a JVM
stack trace: here they are one line naming ``lake_root`` and the fix.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .shipping import is_local_master
from .spark import jvm_view

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def local_folder(lake_root: str) -> Path | None:
    """The folder of a local lake root (a plain path or ``file:``), ``None`` for other schemes."""
    if lake_root.startswith("file:"):
        return Path("/" + lake_root.removeprefix("file:").lstrip("/"))
    return None if "://" in lake_root else Path(lake_root)


STAGING = "_staging"  # hidden from Delta (a leading underscore), as _delta_log is


def staging_folder(lake_root: str, target_dir: Path, master: str) -> Path:
    """Where snapshot tasks write a chunk's files before the driver commits them: inside a local
    lake (``<lake_root>/_staging``), which executors on other hosts see where the lake is shared
    (NFS...) and which the driver then moves them from by a rename on the same file system. Other
    lakes stage in the project's ``target/staging``, which only executors in the driver's process
    see: on any other ``master`` that is refused with one line rather than failing in the tasks
    (``snapshot.staging`` has an object-store lake's tasks write into the bucket itself)."""
    folder = local_folder(lake_root)
    if folder is not None:
        return folder / STAGING
    if not is_local_master(master):
        raise ConfigError(f"a snapshot into {lake_root} on the Spark master {master} is not supported yet: its "
                          "tasks write their files through pyarrow, which serves s3a://, gs:// and abfss:// "
                          "lakes only; take the snapshot with spark.master local[*] (catch-up, dq and "
                          "maintain run on the cluster)")
    return target_dir / "staging"


def check_writable(lake_root: str) -> None:
    """A local lake root must be a folder this user can write, or be creatable in one.

    Nothing is created: the probe file goes into the lake root, or into its nearest existing
    ancestor when the lake does not exist yet (a failed run leaves no empty lake behind).
    """
    folder = local_folder(lake_root)
    if folder is None:
        return  # object stores and HDFS: writing is checked by the first commit
    existing = next((p for p in (folder, *folder.parents) if p.exists()), folder)
    try:
        if not existing.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(existing))
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise ConfigError(
            f"lake_root {lake_root} is not a writable folder ({exc.strerror}); "
            "fix its permissions or lake_root in lakehouse_project.yml"
        ) from exc


def check_filesystem(spark: SparkSession, lake_root: str) -> None:
    """Load the Hadoop filesystem of the lake root (no I/O): a scheme whose jars are missing,
    such as ``s3a://`` without hadoop-aws, fails here; the CLI turns that into the fix."""
    jvm = jvm_view(spark)
    path = jvm.org.apache.hadoop.fs.Path(lake_root)
    path.getFileSystem(spark._jsc.hadoopConfiguration())
