"""``lakehouse rebuild``: silver written anew from the whole of bronze, table by table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...config.project import Layer, ProjectConfig
from ..context import CommandContext
from ..options import Selection
from ..printer import table_line
from .common import each_table, finish_tables, lake_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ...tables import TableSpec


def run(ctx: CommandContext, selection: Selection) -> int:
    specs = ctx.specs(selection)
    spark = lake_spark(ctx.config)
    return finish_tables(ctx, each_table(ctx.config, specs, lambda spec, _: _rebuild(spark, ctx.config, spec)))


def _rebuild(spark: SparkSession, config: ProjectConfig, spec: TableSpec) -> None:
    from ...sink import silver
    from ..locks import locks_folder, table_locks

    with table_locks(locks_folder(config), [spec.name], "rebuild"):
        key = _lake_key(spark, config, spec)
        batch = silver.rebuild(spark, bronze_path=config.table_path(Layer.BRONZE, spec.name),
                               silver_path=config.table_path(Layer.SILVER, spec.name), key=key,
                               transform=spec.transform, table=spec.name, scd_type=spec.scd_type)
    rows = spark.read.format("delta").load(config.table_path(Layer.SILVER, spec.name)).count()
    table_line(spec.name, f"ok     silver rebuilt from bronze batches 0..{batch}: {rows} rows")


def _lake_key(spark: SparkSession, config: ProjectConfig, spec: TableSpec) -> tuple[str, ...]:
    """The key bronze was written with: its checkpoint's, else the table module's (no source needed)."""
    from ...sink import bronze

    checkpoint = bronze.latest_checkpoint(spark, config.table_path(Layer.BRONZE, spec.name))
    if checkpoint is not None and checkpoint.snapshot is not None:
        return checkpoint.snapshot.key
    if spec.key:
        return tuple(spec.key)
    from ...source.connection import connection
    from ...source.introspect import describe_table

    with connection(config.source) as conn:
        return describe_table(conn, config.source.database, spec.source_table).key
