"""``lakehouse maintain``: OPTIMIZE and VACUUM of each table's bronze and silver.

Spark starts at the first step that has work: on a local lake a table with nothing to compact or
delete is told from its log and folder (see :mod:`..sink.maintenance`), so a ``maintain`` that
finds every table tidy returns without starting a JVM."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...config.project import ProjectConfig
from ...sink import paths as lake
from ..context import CommandContext
from ..options import MaintainOptions
from ..printer import table_line
from ..results import MaintenanceResult
from .common import each_table, finish_tables, lake_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ...sink.maintenance import LayerReport, MaintenanceOptions
    from ...tables import TableSpec


def run(ctx: CommandContext, options: MaintainOptions) -> int:
    from ...sink import maintenance

    settings = maintenance.MaintenanceOptions(vacuum=options.vacuum, retain_hours=options.retain_hours)
    specs = ctx.specs(options.selection)
    lake.check_writable(ctx.config.lake_root)
    start_spark = _Once(lambda: lake_spark(ctx.config))
    results = each_table(ctx.config, specs,
                         lambda spec, result: _maintain(start_spark, ctx.config, spec, result, settings))
    if start_spark.error is not None:  # Spark did not start: the run's failure, not a table's
        raise start_spark.error
    return finish_tables(ctx, results)


class _Once:
    """Starts Spark at the first call, and returns the same session at every later one; a
    failed start is raised again at once (no second start for the next table)."""

    def __init__(self, start: Callable[[], SparkSession]):
        self._start = start
        self._session: SparkSession | None = None
        self.error: Exception | None = None

    def __call__(self) -> SparkSession:
        if self.error is not None:
            raise self.error
        if self._session is None:
            try:
                self._session = self._start()
            except Exception as exc:
                self.error = exc
                raise
        return self._session


def _maintain(start_spark: Callable[[], SparkSession], config: ProjectConfig, spec: TableSpec,
              result: MaintenanceResult, settings: MaintenanceOptions) -> None:
    from ...sink import maintenance
    from ..locks import locks_folder, table_locks

    # The ingest lock: a MERGE reading files a compaction removes would fail.
    with table_locks(locks_folder(config), [spec.name], "maintain"):
        for layer in maintenance.LAYERS:
            report = maintenance.maintain_layer(start_spark, config.table_path(layer, spec.name), layer, settings)
            if report is not None:
                result.layers.append(report)
                table_line(spec.name, _line(report))
    if not result.layers:
        table_line(spec.name, "not in the lake yet: nothing to maintain")


def _line(report: LayerReport) -> str:
    done = [step for step, ran in (("compacted", report.compacted), ("vacuumed", report.vacuumed)) if ran]
    return (f"{report.layer:<7} files {report.files_before:>6} -> {report.files_after:<6} "
            f"{report.seconds:6.1f} s  {', '.join(done) if done else 'nothing to do'}")
