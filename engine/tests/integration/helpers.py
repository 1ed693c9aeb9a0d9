"""Comparisons of silver with the source, in the canonical value form both paths share."""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse_engine.config.project import ProjectConfig
from lakehouse_engine.source import embedded
from lakehouse_engine.source.connection import connection, qualified, query, quote_ident
from lakehouse_engine.source.introspect import TableSchema, describe_table
from lakehouse_engine.source.typemap import row_converter, select_list, spark_schema
from lakehouse_engine.tables import TableSpec

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
    with connection(config.source) as conn:
        rows = query(conn, f"SELECT {select_list(schema)} FROM {qualified(config.source.database, table)}")
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


# --- exact, key-addressed comparisons (full_types) -------------------------------------------
# ``source_rows``/``silver_rows`` above read the source with a plain column list (FLOAT comes back
# with 6 significant digits) and put values in sets (Spark returns BinaryType as unhashable
# bytearray). These read the source the way the snapshot does and key rows by their primary key.


def _canonical(value: Any) -> Any:
    """One comparable form: bytes for binary values, UTC microseconds for instants, so that the
    Python process's TZ (Spark hands TimestampType back in local time) never matters."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return value


def exact_source_rows_by_key(config: ProjectConfig, table: str) -> dict[tuple, dict[str, Any]]:
    """The source's rows in the canonical form, read with the snapshot's column expressions."""
    schema = table_schema(config, table)
    convert = row_converter(schema, "select")
    with connection(config.source) as conn:
        rows = query(conn, f"SELECT {select_list(schema)} FROM {qualified(config.source.database, table)}")
    return _by_key(schema, (convert(r) for r in rows))


def silver_rows_by_key(spark, config: ProjectConfig, table: str) -> dict[tuple, dict[str, Any]]:
    """Silver's rows in the canonical form; TIMESTAMP columns are read as UTC microseconds."""
    schema = table_schema(config, table)
    frame = spark.read.format("delta").load(config.table_path("silver", table))
    columns = [
        F.unix_micros(F.col(quote_ident(f.name))).alias(f.name)
        if isinstance(f.dataType, T.TimestampType) else F.col(quote_ident(f.name))
        for f in spark_schema(schema).fields
    ]
    return _by_key(schema, (tuple(r) for r in frame.select(*columns).collect()))


def _by_key(schema: TableSchema, rows) -> dict[tuple, dict[str, Any]]:
    keyed: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        values = dict(zip(schema.column_names, (_canonical(v) for v in row), strict=True))
        keyed[tuple(values[k] for k in schema.key)] = values
    return keyed


def assert_silver_equals_exact_source(spark, config: ProjectConfig, table: str) -> None:
    """Silver holds exactly the source's keys, and each row value by value (the first
    differences are named column by column)."""
    source, silver = exact_source_rows_by_key(config, table), silver_rows_by_key(spark, config, table)
    only_source, only_silver = sorted(set(source) - set(silver)), sorted(set(silver) - set(source))
    assert not only_source and not only_silver, f"{table}: only in source {only_source[:5]}, silver {only_silver[:5]}"
    differences = [
        (key, name, source[key][name], silver[key][name])
        for key in sorted(source)
        for name in source[key]
        if source[key][name] != silver[key][name]
    ]
    assert not differences, f"{table}: {len(differences)} differ (key, column, source, silver): {differences[:8]}"
