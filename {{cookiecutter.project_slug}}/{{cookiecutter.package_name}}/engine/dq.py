"""Quality checks: silver compared with the source at one exact binlog position.

The source is counted inside one consistent snapshot (an exact position on MariaDB); silver is
brought to exactly that position with a bounded catch-up; then Great Expectations checks key
uniqueness, non-null keys, the row count and the table's own expectations.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

from . import bronze
from .config import ProjectConfig
from .errors import SourceUnavailableError
from .introspect import describe_table
from .pipeline import Pipeline, TablesFailed
from .positions import BinlogPosition
from .source import connection, qualified, query, start_consistent_snapshot
from .tables import TableSpec

log = logging.getLogger(__name__)
ATTEMPTS = 3


@dataclass(frozen=True)
class SourceCounts:
    position: BinlogPosition
    rows: dict[str, int]


def count_source(config: ProjectConfig, specs: Sequence[TableSpec]) -> SourceCounts:
    """Count every table inside one read view, at one exact binlog position."""
    database = config.source.database
    with connection(config.source) as conn:
        position = start_consistent_snapshot(conn)
        rows = {
            s.name: int(query(conn, f"SELECT COUNT(*) FROM {qualified(database, s.source_table)}")[0][0])
            for s in specs
        }
        conn.commit()
    return SourceCounts(position, rows)


def run_checks(config: ProjectConfig, spark: SparkSession, pipeline: Pipeline,
               specs: Sequence[TableSpec]) -> list:
    """Check every table; a table that cannot be brought to the counted position fails its
    check (with the reason) and the others are still checked."""
    from .quality import CheckOutcome, QualityResult, run_quality_checks  # GX is slow to import

    counts, broken = _aligned_counts(config, spark, pipeline, specs)
    results = [QualityResult(name, False, (CheckOutcome("silver at the counted source position", False,
                                                        message),), None)
               for name, message in broken.items()]
    healthy = [s for s in specs if s.name not in broken]
    with connection(config.source) as conn:
        keys = {s.name: describe_table(conn, config.source.database, s.source_table, s.key).key
                for s in healthy}
    for spec in healthy:
        silver = spark.read.format("delta").load(config.table_path("silver", spec.name))
        extra = list(spec.expectations()) if spec.expectations else []
        result = run_quality_checks(
            silver, table=spec.name, key_columns=keys[spec.name],
            expected_row_count=counts.rows[spec.name], extra_expectations=extra,
            gx_root=config.gx_dir,
        )
        log.info("%s: quality %s at %s (source rows %d)", spec.name,
                 "passed" if result.success else "FAILED", counts.position, counts.rows[spec.name])
        results.append(result)
    return results


def _aligned_counts(config: ProjectConfig, spark: SparkSession, pipeline: Pipeline,
                    specs: Sequence[TableSpec]) -> tuple[SourceCounts, dict[str, str]]:
    """Count the source, then bring silver to exactly that position. If another run moved a
    table past the counted position meanwhile, count again. Returns the counts and the tables
    that could not be brought there, with the reason."""
    broken: dict[str, str] = {}
    for _ in range(ATTEMPTS):
        counts = count_source(config, [s for s in specs if s.name not in broken])
        try:
            pipeline.ingest([s for s in specs if s.name not in broken], stop=counts.position,
                            require_snapshot=True)
        except TablesFailed as failed:
            broken.update({r.table: r.message for r in failed.failed})
            continue  # count the healthy tables again, at one position
        ahead = [
            s.name for s in specs
            if s.name not in broken
            and (cp := bronze.latest_checkpoint(spark, config.table_path("bronze", s.name)))
            and cp.position is not None and cp.position > counts.position
        ]
        if not ahead:
            return counts, broken
        log.info("tables %s moved past %s while counting; counting again", ahead, counts.position)
    raise SourceUnavailableError(
        "silver kept moving past the counted source position (is another ingest running?): "
        "run the checks again when ingestion is idle"
    )
