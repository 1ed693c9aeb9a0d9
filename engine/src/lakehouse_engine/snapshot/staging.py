"""Where a snapshot's tasks stage a batch's files before the driver commits them.

- A local lake stages in ``<lake_root>/_staging`` (executors on other hosts see it where the lake
  is shared, and the driver moves the files into the table by a rename).
- An object-store lake (``s3a://``, ``gs://``, ``abfss://``) is reached through pyarrow
  (:mod:`..sink.objectstore`) on any master. Its tasks write straight into bronze's folder in
  the bucket, and the driver commits the files from what the tasks report
  (:mod:`..snapshot.reader`). In portable mode, which has no API to commit files, they stage
  under ``<lake_root>/_staging/`` and the driver appends them with Spark. Nothing on the
  driver's disk is read by a task, nor the reverse. On a local master with Hadoop settings
  pyarrow does not read (:func:`..sink.objectstore.unread_settings`), the tasks stage in the
  project's ``target/staging`` and the driver appends the files with Spark; on a cluster such
  a snapshot stops with one line (its tasks would reach the store as someone else).

Folders are ``<staging>/<lake table>/<run>-<batch>``. A finished or failed batch removes its own;
a killed one (kill -9, a lost host) leaves them, never committed, until the table's next snapshot
removes folders untouched for :data:`STALE_STAGING_S`.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..sink import paths
from ..sink.objectstore import ObjectStore, is_object_store, object_path, store_for, unread_settings
from ..sink.shipping import is_local_master

# Another checkout sharing the lake (its own locks) may be staging the same table right now, so
# only folders untouched for this long are a dead run's.
STALE_STAGING_S = 24 * 3600.0


@dataclass(frozen=True)
class Staging:
    """A staging root: a local folder, or an object-store URI with ``store`` set."""

    root: str
    store: ObjectStore | None = None

    def table_folder(self, lake_table: str) -> str:
        return f"{self.root.rstrip('/')}/{lake_table}"

    def batch_folder(self, lake_table: str, run_id: str, batch: int) -> str:
        return f"{self.table_folder(lake_table)}/{run_id}-{batch}"

    def reset(self, folder: str) -> None:
        """``folder`` empty and ready for the tasks' files."""
        self.remove(folder)
        if self.store is None:
            Path(folder).mkdir(parents=True)

    def remove(self, folder: str) -> None:
        if self.store is None:
            shutil.rmtree(folder, ignore_errors=True)
            return
        from pyarrow import fs

        filesystem = self.store.filesystem()
        if filesystem.get_file_info(object_path(folder)).type != fs.FileType.NotFound:
            filesystem.delete_dir(object_path(folder))

    def remove_stale(self, table_folder: str, now: float | None = None) -> None:
        """Remove what killed runs left staged for one table (folders older than STALE_STAGING_S)."""
        now = time.time() if now is None else now
        if self.store is None:
            remove_stale_staging(Path(table_folder), now)
            return
        from pyarrow import fs

        filesystem, base = self.store.filesystem(), object_path(table_folder)
        newest: dict[str, float] = {}  # a run's folder -> its newest file's time (an object store has no folders)
        for info in filesystem.get_file_info(fs.FileSelector(base, allow_not_found=True, recursive=True)):
            if info.type == fs.FileType.File and info.mtime is not None:
                run = info.path[len(base):].strip("/").split("/", 1)[0]
                newest[run] = max(newest.get(run, 0.0), info.mtime.timestamp())
        for run, touched in newest.items():
            if now - touched > STALE_STAGING_S:
                filesystem.delete_dir(f"{base}/{run}")


def remove_stale_staging(staged_for: Path, now: float | None = None) -> None:
    """Remove what killed runs left staged for one table in a local folder."""
    now = time.time() if now is None else now
    try:
        folders = list(staged_for.iterdir())
    except OSError:  # none yet
        return
    for folder in folders:
        try:
            stale = now - folder.stat().st_mtime > STALE_STAGING_S
        except OSError:  # removed meanwhile by its own run
            continue
        if stale:
            shutil.rmtree(folder, ignore_errors=True)


def staging_area(lake_root: str, target_dir: Path, master: str, spark_conf: Mapping[str, str]) -> Staging:
    """Where the snapshot of a table in ``lake_root`` stages, on ``master`` with ``spark_conf``
    (the session's settings: the endpoint and keys of an object-store lake)."""
    if paths.local_folder(lake_root) is None and is_object_store(lake_root):
        unread = unread_settings(lake_root, spark_conf)
        if unread and is_local_master(master):
            # Settings only Hadoop reads (a per-bucket endpoint, an assumed role): on one machine
            # the tasks stage on its disk and Spark appends the files, as Hadoop reaches the store.
            return Staging(str(paths.staging_folder(lake_root, target_dir, master)))
        if unread:  # the tasks would reach the store as someone else, or not at all: never guess
            raise ConfigError(
                f"a snapshot into {lake_root} on the Spark master {master} cannot use {', '.join(unread)}: its "
                "tasks write through pyarrow, which does not read those settings; give the store's plain "
                "settings instead (the README's lake sections list them), or take the snapshot with "
                "spark.master local[*]")
        return Staging(f"{lake_root.rstrip('/')}/{paths.STAGING}", store_for(lake_root, spark_conf))
    return Staging(str(paths.staging_folder(lake_root, target_dir, master)))
