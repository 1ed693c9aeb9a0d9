"""Comparisons of silver with the source, in the canonical value form both paths share."""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any

from {{ cookiecutter.package_name }}.engine import embedded
from {{ cookiecutter.package_name }}.engine.config import ProjectConfig
from {{ cookiecutter.package_name }}.engine.introspect import TableSchema, describe_table
from {{ cookiecutter.package_name }}.engine.source import connection, qualified, query, quote_ident
from {{ cookiecutter.package_name }}.engine.tables import TableSpec
from {{ cookiecutter.package_name }}.engine.typemap import row_converter

DEMO_TABLES = ("customers", "products", "orders", "order_items")


def demo_specs() -> list[TableSpec]:
    return [TableSpec(name, name) for name in DEMO_TABLES]


def table_schema(config: ProjectConfig, table: str) -> TableSchema:
    with connection(config.source) as conn:
        return describe_table(conn, config.source.database, table)


def _normal(value: Any, data_type: str) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if data_type == "float" and value is not None:
        return struct.unpack("f", struct.pack("f", value))[0]
    return value


def _normal_row(row: tuple, schema: TableSchema) -> tuple:
    return tuple(_normal(v, c.data_type) for v, c in zip(row, schema.columns, strict=True))


def source_rows(config: ProjectConfig, table: str) -> set[tuple]:
    schema = table_schema(config, table)
    convert = row_converter(schema, "select")
    columns = ", ".join(quote_ident(c) for c in schema.column_names)
    with connection(config.source) as conn:
        rows = query(conn, f"SELECT {columns} FROM {qualified(config.source.database, table)}")
    return {_normal_row(convert(r), schema) for r in rows}


def silver_rows(spark, config: ProjectConfig, table: str) -> set[tuple]:
    schema = table_schema(config, table)
    frame = spark.read.format("delta").load(config.table_path("silver", table))
    rows = frame.select(*[quote_ident(c) for c in schema.column_names]).collect()
    return {_normal_row(tuple(r), schema) for r in rows}


def assert_silver_equals_source(spark, config: ProjectConfig, table: str) -> None:
    source, silver = source_rows(config, table), silver_rows(spark, config, table)
    missing, extra = sorted(source - silver, key=repr)[:3], sorted(silver - source, key=repr)[:3]
    assert source == silver, f"{table}: {len(source - silver)} missing {missing}, {len(silver - source)} extra {extra}"


def bronze_duplicate_changes(spark, config: ProjectConfig, table: str) -> int:
    """Changes bronze holds twice: the same key at the same sequence, or a binlog change that
    the key's snapshot row already contains (older than the snapshot read of that key)."""
    key = [quote_ident(k) for k in table_schema(config, table).key]
    frame = spark.read.format("delta").load(config.table_path("bronze", table))
    repeated = frame.groupBy(*key, "_seq").count().where("count > 1").count()
    snapshot = frame.where("_op = 'r'").select(*key, frame["_seq"].alias("_read_seq"))
    stale = frame.where("_op != 'r'").join(snapshot, on=list(table_schema(config, table).key))
    return repeated + stale.where("_seq <= _read_seq").count()


def run_source_sql(server: embedded.EmbeddedServer, database: str, sql: str) -> None:
    embedded.run_sql(server, embedded.split_sql(sql), database)
