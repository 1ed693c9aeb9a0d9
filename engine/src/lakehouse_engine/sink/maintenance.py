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
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from pyspark.sql import SparkSession

from ..config.defaults import DEFAULTS
from ..config.project import Layer
from ..errors import ConfigError

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


def active_files(spark: SparkSession, path: str) -> int:
    """Data files in the table's newest version."""
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, path).detail().select("numFiles").first()
    return int(row[0]) if row is not None else 0


def maintain_layer(spark: SparkSession, path: str, layer: Layer, options: MaintenanceOptions) -> LayerReport:
    """OPTIMIZE (bin-packing compaction) and, unless disabled, VACUUM one Delta table."""
    from delta.tables import DeltaTable

    started = time.monotonic()
    before = active_files(spark, path)
    table = DeltaTable.forPath(spark, path)
    table.optimize().executeCompaction()
    if options.vacuum:
        table.vacuum(float(options.retain_hours))
    after = active_files(spark, path)
    return LayerReport(layer, before, after, round(time.monotonic() - started, 1))
