"""``lakehouse maintain``: OPTIMIZE and VACUUM of each table's bronze and silver."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...config.project import ProjectConfig
from ..context import CommandContext
from ..options import MaintainOptions
from ..printer import table_line
from ..results import MaintenanceResult
from .common import each_table, finish_tables, lake_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ...sink.maintenance import MaintenanceOptions
    from ...tables import TableSpec


def run(ctx: CommandContext, options: MaintainOptions) -> int:
    from ...sink import maintenance

    settings = maintenance.MaintenanceOptions(vacuum=options.vacuum, retain_hours=options.retain_hours)
    specs = ctx.specs(options.selection)
    spark = lake_spark(ctx.config)
    return finish_tables(ctx, each_table(ctx.config, specs,
                                         lambda spec, result: _maintain(spark, ctx.config, spec, result, settings)))


def _maintain(spark: SparkSession, config: ProjectConfig, spec: TableSpec, result: MaintenanceResult,
              settings: MaintenanceOptions) -> None:
    from ...sink import bronze, maintenance
    from ..locks import locks_folder, table_locks

    # The ingest lock: a MERGE reading files a compaction removes would fail.
    with table_locks(locks_folder(config), [spec.name], "maintain"):
        for layer in maintenance.LAYERS:
            path = config.table_path(layer, spec.name)
            if bronze.exists(spark, path):
                report = maintenance.maintain_layer(spark, path, layer, settings)
                result.layers.append(report)
                table_line(spec.name, f"{layer:<7} files {report.files_before:>6} -> {report.files_after:<6} "
                                      f"{report.seconds:6.1f} s")
    if not result.layers:
        table_line(spec.name, "not in the lake yet: nothing to maintain")
