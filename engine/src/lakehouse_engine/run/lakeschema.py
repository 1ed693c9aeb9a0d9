"""The lake's columns against the source's, before a run writes: bronze's columns and types as the
source describes them now (``check_lake_schema``, ``lake_matches``), and the columns the binlog's
rows have at a table's checkpoint (``capture_schema``), which may still be bronze's when a DDL
has yet to arrive through the binlog.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from ..cdc.tablecapture import schema_changed
from ..config.project import SchemaPolicy
from ..sink import bronze
from ..source.introspect import TableSchema
from ..source.typemap import described_column, spark_schema, spark_type
from ..tables import TableSpec

log = logging.getLogger(__name__)


def lake_fields(spark: SparkSession, path: str) -> list[T.StructField]:
    """Bronze's source columns (its metadata columns left out)."""
    return [f for f in spark.read.format("delta").load(path).schema.fields
            if f.name not in bronze.META_COLUMNS]


def lake_matches(spark: SparkSession, schema: TableSchema, path: str) -> bool:
    """Whether bronze has the source's columns with the source's Spark types."""
    lake = {f.name: f.dataType for f in lake_fields(spark, path)}
    return lake == {f.name: f.dataType for f in spark_schema(schema).fields}


def check_lake_schema(spark: SparkSession, name: str, schema: TableSchema, path: str) -> None:
    """Stop before writing when the source table no longer has bronze's columns and types: a
    changed type would otherwise surface as a Delta merge error deep inside a write."""
    lake = lake_fields(spark, path)
    source = spark_schema(schema).fields
    if {f.name: f.dataType for f in lake} == {f.name: f.dataType for f in source}:
        return
    if [f.name for f in lake] != [f.name for f in source]:
        raise schema_changed(name, f"source columns {[f.name for f in source]} differ from bronze "
                             f"columns {[f.name for f in lake]}")
    for was, now in zip(lake, source, strict=True):
        if was.dataType != now.dataType:
            column = schema.column(now.name)
            raise schema_changed(name, f"column {now.name} is now {column.column_type} "
                                 f"({now.dataType.simpleString()}), bronze has {was.dataType.simpleString()}")


def capture_schema(spark: SparkSession, spec: TableSpec, source: TableSchema, path: str) -> TableSchema:
    """The columns the binlog's rows have at the table's checkpoint: the source's, unless a DDL
    the binlog has yet to deliver changed them since. Then they are bronze's, as recorded in its
    schema (see ``typemap.described_schema``), and the catch-up evolves them at that DDL."""
    lake = lake_fields(spark, path)
    same = {f.name: f.dataType for f in lake} == {f.name: f.dataType for f in spark_schema(source).fields}
    if not same and spec.on_schema_change is SchemaPolicy.STOP:
        check_lake_schema(spark, spec.name, source, path)
    by_name = {c.name: c for c in source.columns}
    columns = []
    for f in lake:
        # Bronze's record is the truth at the checkpoint: the source's description may already
        # show a DDL the binlog has yet to deliver, even one that keeps the Spark type.
        info = described_column(f)
        if info is None and f.name in by_name and spark_type(by_name[f.name]) == f.dataType:
            info = by_name[f.name]  # a lake written before bronze recorded descriptions
        if info is None:
            check_lake_schema(spark, spec.name, source, path)  # raises, naming the difference
            raise schema_changed(spec.name, f"bronze column {f.name} is not on the source")
        columns.append(info)
    if not set(source.key) <= {c.name for c in columns}:
        raise schema_changed(spec.name, f"key {source.key} is not among bronze's columns")
    if same and all(by_name[c.name] == c for c in columns):
        return replace(source, columns=tuple(columns))  # in bronze's order (added columns last)
    log.info("%s: bronze has columns %s, the source %s: the binlog's DDL since the checkpoint changes them",
             spec.name, [c.name for c in columns], list(source.column_names))
    return replace(source, columns=tuple(columns))
