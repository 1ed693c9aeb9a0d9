"""Each source column's Spark type, and its converters to one canonical form for a value,
whether SELECT or the binlog produced it.

Each column gets two converters, built once per table (not dispatched per value): one for what
pymysql returns from SELECT, one for what python-mysql-replication decodes from a row event.
Both must land identically in Delta; the steps they apply to single values are in
:mod:`canonical`, where the pitfalls are noted.

Two pitfalls cannot be fixed from the value alone, so this module also owns what surrounds it:

- SELECT prints a plain FLOAT with 6 significant digits, losing the stored float32; the snapshot
  must read columns through :func:`select_list`, which asks the server for the exact value.
- The binlog decodes an empty SET as None, like NULL; the row's null bitmap tells them apart
  and the library reports it as a "none source": the adapter passes each row image through
  :func:`binlog_values`, which restores the empty set.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from functools import partial
from operator import itemgetter
from typing import Any

from pymysqlreplication.constants import NONE_SOURCE
from pyspark.sql import types as T

from . import canonical
from .connection import quote_ident
from .introspect import ColumnInfo, TableSchema

Convert = Callable[[Any], Any]

SMALL_INTS = {"tinyint", "smallint", "mediumint"}
BINARY_TYPES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
TEXT_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum"}
SPATIAL_TYPES = {
    "geometry", "point", "linestring", "polygon",
    "multipoint", "multilinestring", "multipolygon", "geometrycollection",
}
SPARK_MAX_PRECISION = 38
# MariaDB's fixed-size string-like types: the binlog carries their raw bytes with trailing zero
# bytes stripped, SELECT their text form.
MARIADB_BINARY_TEXT = {"uuid": 16, "inet6": 16, "inet4": 4}


def spark_type(col: ColumnInfo) -> T.DataType:
    kind = col.data_type
    if kind in SMALL_INTS or (kind == "int" and not col.unsigned):
        return T.IntegerType()
    if kind == "int" or (kind == "bigint" and not col.unsigned):
        return T.LongType()
    if kind == "bigint":  # unsigned: > 2^63-1 overflows LongType
        return T.DecimalType(20, 0)
    if kind == "decimal":
        precision, scale = col.precision or 10, col.scale or 0
        if precision > SPARK_MAX_PRECISION:
            return T.StringType()
        return T.DecimalType(precision, scale)
    if kind == "float":
        return T.FloatType()
    if kind == "double":
        return T.DoubleType()
    if kind == "bit":
        return T.BooleanType() if col.display_width == 1 else T.BinaryType()
    if kind == "year":
        return T.IntegerType()
    if kind == "date":
        return T.DateType()
    if kind == "datetime":
        return T.TimestampNTZType()
    if kind == "timestamp":
        return T.TimestampType()
    if kind in BINARY_TYPES or kind in SPATIAL_TYPES:
        return T.BinaryType()
    return T.StringType()  # text types, enum, set, json, time, uuid, inet...


def spark_schema(table: TableSchema) -> T.StructType:
    return T.StructType([T.StructField(c.name, spark_type(c), True) for c in table.columns])


# Bronze keeps each column's source description in its Delta schema (field metadata), so a run
# that starts before a DDL it has yet to read knows the columns as they were at its checkpoint.
SOURCE_METADATA = "source"


def described_schema(table: TableSchema) -> T.StructType:
    """:func:`spark_schema` with each column's source description as field metadata."""
    return T.StructType([
        T.StructField(c.name, spark_type(c), True, {SOURCE_METADATA: {
            "data_type": c.data_type, "column_type": c.column_type, "nullable": c.nullable,
            "precision": c.precision, "scale": c.scale, "collation": c.collation, "charset": c.charset,
        }})
        for c in table.columns
    ])


def described_column(field: T.StructField) -> ColumnInfo | None:
    """The source description :func:`described_schema` recorded for ``field``, if any."""
    meta = field.metadata.get(SOURCE_METADATA)
    if not isinstance(meta, dict):
        return None
    return ColumnInfo(field.name, str(meta["data_type"]), str(meta["column_type"]), bool(meta["nullable"]),
                      meta.get("precision"), meta.get("scale"), meta.get("collation"), meta.get("charset"))


# --- what the snapshot reads and what the adapter hands over --------------------------------


def select_expression(col: ColumnInfo) -> str:
    """The SELECT expression for one column, named like the column.

    A plain FLOAT is printed by the server with 6 significant digits (1234567 reads as 1234570),
    while the binlog carries the stored float32: read it widened to DOUBLE, which is exact.
    """
    name = quote_ident(col.name)
    if col.data_type == "float":
        return f"CAST({name} AS DOUBLE) AS {name}"
    return name


def select_list(table: TableSchema) -> str:
    """The column list of a snapshot SELECT whose rows :func:`row_converter` (``"select"``) reads."""
    return ", ".join(select_expression(c) for c in table.columns)


def binlog_values(values: Mapping[str, Any], none_sources: Mapping[str, str]) -> dict[str, Any]:
    """One row image from python-mysql-replication, with empty SETs restored.

    The library decodes an empty SET as None, exactly like NULL; only its per-row
    ``none_sources`` (``"empty set"`` versus ``"null"``, taken from the null bitmap) tell the
    two apart. ``none_sources`` is ``row["none_sources"]`` for inserts and deletes,
    ``row["before_none_sources"]`` / ``row["after_none_sources"]`` for updates.
    """
    if not any(source == NONE_SOURCE.EMPTY_SET for source in none_sources.values()):
        return values if isinstance(values, dict) else dict(values)  # the common case: no copy
    restored = dict(values)
    for name, source in none_sources.items():
        if source == NONE_SOURCE.EMPTY_SET and restored.get(name) is None:
            restored[name] = frozenset()
    return restored


# --- per-column converters --------------------------------------------------------------


def select_converter(col: ColumnInfo) -> Convert:
    return partial(_none_or, _select_step(col))


def select_step(col: ColumnInfo) -> Convert:
    """What :func:`select_converter` applies to a non-NULL value of ``col``."""
    return _select_step(col)


def binlog_converter(col: ColumnInfo) -> Convert:
    return _binlog_wrapped(col, _binlog_step(col))


def _binlog_wrapped(col: ColumnInfo, step: Convert) -> Convert:
    if col.data_type == "set" and not col.nullable:
        # Without binlog_values (see the module docstring) an empty SET arrives as None; in a
        # NOT NULL column that can only be the empty set.
        return partial(_empty_set_or, step)
    return partial(_none_or, step)


def _none_or(fn: Convert, value: Any) -> Any:
    return None if value is None else fn(value)


def _empty_set_or(fn: Convert, value: Any) -> Any:
    return "" if value is None else fn(value)


def _select_step(col: ColumnInfo) -> Convert:
    kind = col.data_type
    if kind == "bigint" and col.unsigned:
        return canonical.unsigned_bigint
    if kind == "decimal" and (col.precision or 0) > SPARK_MAX_PRECISION:
        return partial(canonical.decimal_text, col.scale or 0)
    if kind == "float":
        return canonical.float32
    if kind == "bit":
        return partial(canonical.bits_from_bytes, col.display_width or 1)
    if kind == "time":
        return canonical.time_text
    if kind in {"date", "datetime"}:
        return canonical.zero_date_to_none
    if kind == "timestamp":
        return canonical.timestamp_utc
    if kind in BINARY_TYPES:
        return canonical.as_bytes
    if kind in SPATIAL_TYPES:
        return canonical.spatial_wkb
    if isinstance(spark_type(col), T.StringType):
        return canonical.as_text
    return canonical.identity


_MARIADB_TEXT: dict[str, Callable[[bytes], str]] = {
    "uuid": canonical.uuid_text, "inet6": canonical.inet6_text, "inet4": canonical.inet4_text,
}


def _binlog_step(col: ColumnInfo) -> Convert:
    kind = col.data_type
    if kind == "bit":
        return partial(canonical.bits_from_string, col.display_width or 1)
    if kind == "set":
        return partial(canonical.set_from_binlog, col.members)
    if kind == "json":
        return canonical.json_text
    if kind == "year":
        return canonical.year_from_binlog
    if kind == "time":
        return canonical.time_from_binlog
    if kind == "timestamp":
        return canonical.timestamp_from_binlog
    if kind == "binary":
        return partial(canonical.pad_binary, col.display_width or 0)
    if kind in MARIADB_BINARY_TEXT:
        return partial(canonical.mariadb_binary_text, MARIADB_BINARY_TEXT[kind], _MARIADB_TEXT[kind])
    return _select_step(col)


def row_converter(table: TableSchema, source: str) -> Callable[[Any], tuple[Any, ...]]:
    """A function turning one SELECT tuple (``source="select"``, read with :func:`select_list`)
    or one binlog values dict (``"binlog"``, passed through :func:`binlog_values`) into a
    canonical tuple (a binlog row image, the values as a tuple: :func:`image_converter`)."""
    if source == "select":
        converters = tuple(select_converter(c) for c in table.columns)
        return partial(_convert_tuple, converters)
    names = table.column_names
    get = itemgetter(*names) if len(names) > 1 else (lambda values: (values[names[0]],))
    return partial(_convert_dict, get, _image_steps(table))


def image_converter(table: TableSchema, texts: Collection[str] = ()) -> Callable[[Any], tuple[Any, ...]] | None:
    """A function turning one binlog row image (the values as a tuple in the table's column
    order) into a canonical tuple, or None when every value is canonical as it is. The columns
    named in ``texts`` hold only ``str`` or None (the fast decoder's text, ``RowImages.texts``):
    a text column's step leaves such a value as it is, so theirs are left out (an image of text
    and integers then needs none)."""
    steps = tuple((i, step) for i, step in _image_steps(table)
                  if not (step is _text_or_none and table.columns[i].name in texts))
    return partial(_convert_image, steps) if steps else None


def _image_steps(table: TableSchema) -> tuple[tuple[int, Convert], ...]:
    """(column index, binlog step) of each column whose binlog value is not canonical as it is."""
    return tuple((i, step) for i, step in ((i, _binlog_value(c)) for i, c in enumerate(table.columns))
                 if step is not None)


def _convert_tuple(converters: tuple[Convert, ...], row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(conv(value) for conv, value in zip(converters, row, strict=True))


def _binlog_value(col: ColumnInfo) -> Convert | None:
    """:func:`binlog_converter` for a row of a catch-up, made cheap where it can be: None for a
    column whose values pass as they are, a single call for text (converting values took 2.4 s
    of a 500k-change catch-up's consuming thread, mostly ``identity`` behind two wrappers)."""
    step = _binlog_step(col)
    if step is canonical.identity:  # (a SET, which a NOT NULL column wraps, has a step of its own)
        return None
    if step is canonical.as_text:
        return _text_or_none
    return _binlog_wrapped(col, step)


def _text_or_none(value: Any) -> Any:
    return value if value.__class__ is str or value is None else canonical.as_text(value)


def _convert_dict(get: Callable[[dict[str, Any]], tuple[Any, ...]], steps: tuple[tuple[int, Convert], ...],
                  values: dict[str, Any]) -> tuple[Any, ...]:
    """``values`` in column order (``get``), each column of ``steps`` converted."""
    return _convert_image(steps, get(values))


def _convert_image(steps: tuple[tuple[int, Convert], ...], row: tuple[Any, ...]) -> tuple[Any, ...]:
    """``row`` with each column of ``steps`` converted."""
    if not steps:
        return row
    converted = list(row)
    for i, step in steps:
        converted[i] = step(converted[i])
    return tuple(converted)
