"""Table maintenance: compact bronze and silver (OPTIMIZE), then delete unreferenced files (VACUUM).

Small batches (a scheduled ingest, every follow cycle) each add a file or two, and silver's
MERGEs add deletion vectors; over days a table becomes thousands of small files that every MERGE
and every read must list and open. Compaction rewrites them into few large files and purges the
deletion vectors; VACUUM then deletes the files no version younger than the retention reads.

Safety:

* Maintenance commits carry no checkpoint: bronze's checkpoint and silver's applied batch are
  read from the newest commit that has one (``bronze.latest_checkpoint``,
  ``silver.applied_batch``), so an OPTIMIZE commit between two ingests changes nothing for them.
* A MERGE reading files that a concurrent compaction removes fails, so maintenance holds the
  table's ingest lock: it waits for no run and stops that table if one holds the lock.
* VACUUM keeps at least ``MIN_RETENTION_HOURS``: a reader that started before the compaction (a
  ``dq`` reading silver at a version, time travel) still finds its files.

Speed: each Delta OPTIMIZE or VACUUM is several Spark jobs (seconds each on a small table, more
on a loaded host), and a daily ``maintain`` mostly finds tables with nothing to do. On a local
lake each layer is first read from its log and folder in Python (:func:`plan_local`), and a
step is skipped only where Delta would find nothing to do: no compaction for one file without a
deletion vector, no VACUUM when no file in the table's folder is both older than the retention
and outside the live table. Spark starts only for a step that runs.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from ..config.defaults import DEFAULTS
from ..config.project import Layer
from ..errors import ConfigError
from ..identifiers import quote_ident
from . import dvcodec
from .log import localfiles, logstate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

MIN_RETENTION_HOURS = 168  # Delta's own safety floor (7 days)
LAYERS = tuple(Layer)


@dataclass(frozen=True)
class MaintenanceOptions:
    vacuum: bool = True
    retain_hours: int = DEFAULTS.retain_hours

    def __post_init__(self) -> None:
        if self.retain_hours < MIN_RETENTION_HOURS:
            raise ConfigError(
                f"--retain-hours {self.retain_hours} is below {MIN_RETENTION_HOURS} (7 days): VACUUM "
                "would delete files that a running dq check or time travel still reads; use "
                f"{MIN_RETENTION_HOURS} or more")


@dataclass(frozen=True)
class LayerReport:
    layer: Layer
    files_before: int
    files_after: int
    seconds: float
    compacted: bool = True  # OPTIMIZE ran (False: nothing to compact)
    vacuumed: bool = True  # VACUUM ran (False: disabled, or no file it could delete)


@dataclass(frozen=True)
class LayerPlan:
    """A local layer's maintenance, read from its log and folder: its live files, and whether
    OPTIMIZE and VACUUM have anything to do."""

    files: int
    compact: bool
    vacuum: bool


def local_table_absent(path: str) -> bool:
    """Whether ``path`` is a local path that holds no Delta table (no commit in its log)."""
    return localfiles.is_local(path) and localfiles.newest_version(localfiles.log_dir(path)) is None


def plan_local(path: str, options: MaintenanceOptions, now: float | None = None) -> LayerPlan | None:
    """What maintenance has to do to the local table at ``path``; None when that is not known
    without Spark (not a local table, or a log this reader does not replay).

    Compaction: Delta's OPTIMIZE leaves a lone file without a deletion vector as it is, so it
    has work only for two or more files or a deletion vector (a bigger table whose files are all
    large enough is planned as work too: Delta then finds none, which costs seconds, not rows).
    VACUUM deletes only a file older than the retention that no live file uses (the recently
    removed ones are kept too): when the folder holds no such file, it deletes nothing. A
    clustered table is always compacted: its OPTIMIZE clusters files not yet clustered."""
    state = _local_state(path)
    if state is None:
        return None
    root, live = state.root, state.live()
    clustered = "clustering" in state.protocol.get("writerFeatures", [])  # OPTIMIZE clusters even one file
    compact = clustered or len(live) > 1 or any(add.get("deletionVector") for add in live)
    cutoff = (time.time() if now is None else now) - options.retain_hours * 3600
    vacuum = False
    if options.vacuum:
        used = _live_paths(root, live)
        partitions = tuple(f"{c}=" for c in state.metadata.get("partitionColumns") or ())
        vacuum = any(path not in used for path in _files_older_than(root, cutoff, partitions))
    return LayerPlan(len(live), compact, vacuum)


def _local_state(path: str) -> logstate.TableState | None:
    """A local table's newest version; None when that is not known without Spark (not local,
    no table, a log this reader does not replay)."""
    if not localfiles.is_local(path):
        return None
    root = Path(localfiles.local_path(path))
    newest = localfiles.newest_version(root / "_delta_log")
    if newest is None:
        return None
    try:
        return logstate.load(root, newest)
    except (logstate.Unreadable, OSError, ValueError, KeyError):
        return None


def _live_paths(root: Path, live: list[dict[str, Any]]) -> set[Path]:
    """The files the live table reads: its data files and their deletion vector files."""
    paths = set()
    for add in live:
        name = unquote(add["path"])  # the log holds a URI-encoded path, relative to the table
        paths.add(Path(localfiles.local_path(name)) if localfiles.is_local(name) else root / name)
        descriptor: Mapping[str, Any] | None = add.get("deletionVector")
        if descriptor and (stored := dvcodec.stored_file(root, descriptor)) is not None:
            paths.add(stored)
    return paths


def _files_older_than(root: Path, cutoff: float, partitions: tuple[str, ...]) -> Iterator[Path]:
    """The files in a table's folder last modified before ``cutoff``, outside the folders and
    files Delta's VACUUM treats as hidden (a name starting with ``_`` or ``.``, except the change
    data and index folders and a partition folder, ``<column>=``): those it never deletes. A
    folder linked in is followed, as Hadoop's file system lists it."""
    for folder, dirs, files in os.walk(root, followlinks=True):
        dirs[:] = [d for d in dirs if not _hidden(d, partitions)]
        for name in files:
            path = Path(folder) / name
            try:
                old = path.stat().st_mtime < cutoff
            except FileNotFoundError:  # deleted since the listing (a VACUUM elsewhere)
                continue
            if old and not _hidden(name, partitions):
                yield path


def _hidden(name: str, partitions: tuple[str, ...]) -> bool:
    return (name.startswith((".", "_")) and not name.startswith(("_change_data", "_delta_index"))
            and not (partitions and name.startswith(partitions)))


def active_files(spark: SparkSession, path: str) -> int:
    """Data files in the table's newest version."""
    row = spark.sql(f"DESCRIBE DETAIL delta.{quote_ident(path)}").select("numFiles").first()
    return int(row[0]) if row is not None else 0


def maintain_layer(start_spark: Callable[[], SparkSession], path: str, layer: Layer,
                   options: MaintenanceOptions) -> LayerReport | None:
    """OPTIMIZE (bin-packing compaction) and, unless disabled, VACUUM one Delta table; None when
    there is no table at ``path``. ``start_spark`` is called only when a step has work (see
    :func:`plan_local`)."""
    started = time.monotonic()
    if local_table_absent(path):
        return None
    plan = plan_local(path, options)
    if plan is not None and not plan.compact and not plan.vacuum:
        return LayerReport(layer, plan.files, plan.files, round(time.monotonic() - started, 1), False, False)
    spark = start_spark()
    # The layer's own seconds: the one Spark start is the command's, not the first table's.
    return _run_steps(spark, path, layer, options, plan, time.monotonic())


def _run_steps(spark: SparkSession, path: str, layer: Layer, options: MaintenanceOptions,
               plan: LayerPlan | None, started: float) -> LayerReport | None:
    # SQL rather than DeltaTable's Python API: the same commands, and they run on Spark Connect.
    from .log import deltalog  # pyspark: imported only once a step has work

    if plan is None and deltalog.newest_version(spark, path) < 0:
        return None
    compact = plan is None or plan.compact
    vacuum = options.vacuum if plan is None else plan.vacuum
    before = active_files(spark, path) if plan is None else plan.files
    table = f"delta.{quote_ident(path)}"
    if compact:
        spark.sql(f"OPTIMIZE {table}")
    if vacuum:
        spark.sql(f"VACUUM {table} RETAIN {options.retain_hours} HOURS")
    state = _local_state(path) if plan is not None else None
    after = len(state.live()) if state is not None else active_files(spark, path)
    return LayerReport(layer, before, after, round(time.monotonic() - started, 1), compact, vacuum)
