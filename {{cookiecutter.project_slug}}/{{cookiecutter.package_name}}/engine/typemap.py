"""One canonical form for a value, whether SELECT or the binlog produced it.

Each column gets two converters, built once per table (not dispatched per value): one for what
pymysql returns from SELECT, one for what python-mysql-replication decodes from a row event.
Both must land identically in Delta; the pitfalls are noted where they are handled.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from decimal import Decimal
from functools import partial
from typing import Any

from pyspark.sql import types as T

from .introspect import ColumnInfo, TableSchema

Convert = Callable[[Any], Any]

SMALL_INTS = {"tinyint", "smallint", "mediumint"}
BINARY_TYPES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
TEXT_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum"}
SPARK_MAX_PRECISION = 38


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
    if kind in BINARY_TYPES or kind in {"geometry", "point", "linestring", "polygon"}:
        return T.BinaryType()
    return T.StringType()  # text types, enum, set, json, time, uuid, inet...


def spark_schema(table: TableSchema) -> T.StructType:
    return T.StructType([T.StructField(c.name, spark_type(c), True) for c in table.columns])


# --- shared canonical steps -------------------------------------------------------------


def _none_or(fn: Convert, value: Any) -> Any:
    return None if value is None else fn(value)


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def _decimal_text(value: Any) -> str:
    return str(value)


def _unsigned_bigint(value: Any) -> Decimal:
    return Decimal(int(value))


def _float32(value: Any) -> float:
    return float(value)


def _time_text(value: Any) -> str:
    """TIME as ``[-]H:MM:SS[.ffffff]``, from the timedelta both paths give."""
    if isinstance(value, (str, bytes)):
        return _text(value)
    total_us = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if total_us < 0 else ""
    total_us = abs(total_us)
    seconds, micros = divmod(total_us, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{text}.{micros:06d}" if micros else text


def _zero_date_to_none(value: Any) -> Any:
    """SELECT returns zero/invalid dates as strings like '0000-00-00'; the binlog as None."""
    return None if isinstance(value, (str, bytes)) else value


def _timestamp_utc(value: Any) -> Any:
    if isinstance(value, (str, bytes)):
        return None
    return value.replace(tzinfo=dt.UTC)


def _bits_from_bytes(width: int, value: bytes) -> Any:
    return bool(int.from_bytes(value, "big")) if width == 1 else bytes(value)


def _bits_from_string(width: int, value: Any) -> Any:
    """The binlog decodes BIT(n) as a string of '0'/'1'; SELECT gives big-endian bytes."""
    if isinstance(value, bytes):
        return _bits_from_bytes(width, value)
    number = int(value, 2) if value else 0
    if width == 1:
        return bool(number)
    return number.to_bytes((width + 7) // 8, "big")


def _set_from_binlog(members: tuple[str, ...], value: Any) -> str:
    """The binlog gives a Python set; SELECT gives members joined by ',' in definition order."""
    if isinstance(value, str):
        return value
    return ",".join(m for m in members if m in value)


def _json_text(value: Any) -> str:
    """MariaDB stores JSON as text; MySQL's binlog gives dicts with bytes keys."""
    if isinstance(value, (str, bytes)):
        return _text(value)
    return json.dumps(_plain_json(value), ensure_ascii=False)


def _plain_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {_text(k): _plain_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_json(v) for v in value]
    if isinstance(value, bytes):
        return _text(value)
    return value


def _year_from_binlog(value: int) -> int:
    return 0 if value == 1900 else int(value)  # YEAR 0000 decodes as 1900 in the binlog


def _timestamp_from_binlog(value: Any) -> Any:
    if value == dt.datetime(1970, 1, 1):  # zero TIMESTAMP is stored as epoch 0
        return None
    return _timestamp_utc(value)


def _pad_binary(width: int, value: Any) -> bytes:
    raw = value if isinstance(value, bytes) else _text(value).encode("utf-8", "surrogateescape")
    return raw.ljust(width, b"\x00")


def _as_bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else _text(value).encode("utf-8", "surrogateescape")


def _identity(value: Any) -> Any:
    return value


# --- per-column converters --------------------------------------------------------------


def select_converter(col: ColumnInfo) -> Convert:
    return partial(_none_or, _select_step(col))


def binlog_converter(col: ColumnInfo) -> Convert:
    step = _binlog_step(col)
    if col.data_type == "set" and not col.nullable:
        return partial(_empty_set_or, step)  # the binlog decodes an empty SET as None
    return partial(_none_or, step)


def _empty_set_or(fn: Convert, value: Any) -> Any:
    return "" if value is None else fn(value)


def _select_step(col: ColumnInfo) -> Convert:
    kind = col.data_type
    if kind == "bigint" and col.unsigned:
        return _unsigned_bigint
    if kind == "decimal" and (col.precision or 0) > SPARK_MAX_PRECISION:
        return _decimal_text
    if kind == "float":
        return _float32
    if kind == "bit":
        return partial(_bits_from_bytes, col.display_width or 1)
    if kind == "time":
        return _time_text
    if kind in {"date", "datetime"}:
        return _zero_date_to_none
    if kind == "timestamp":
        return _timestamp_utc
    if kind in BINARY_TYPES:
        return _as_bytes
    if isinstance(spark_type(col), T.StringType):
        return _text
    return _identity


def _binlog_step(col: ColumnInfo) -> Convert:
    kind = col.data_type
    if kind == "bit":
        return partial(_bits_from_string, col.display_width or 1)
    if kind == "set":
        return partial(_set_from_binlog, col.members)
    if kind == "json":
        return _json_text
    if kind == "year":
        return _year_from_binlog
    if kind == "timestamp":
        return _timestamp_from_binlog
    if kind == "binary":
        return partial(_pad_binary, col.display_width or 0)
    return _select_step(col)


def row_converter(table: TableSchema, source: str) -> Callable[[Any], tuple]:
    """A function turning one SELECT tuple or one binlog values dict into a canonical tuple."""
    if source == "select":
        converters = tuple(select_converter(c) for c in table.columns)
        return partial(_convert_tuple, converters)
    converters = tuple(binlog_converter(c) for c in table.columns)
    return partial(_convert_dict, table.column_names, converters)


def _convert_tuple(converters: tuple[Convert, ...], row: tuple) -> tuple:
    return tuple(conv(value) for conv, value in zip(converters, row, strict=True))


def _convert_dict(names: tuple[str, ...], converters: tuple[Convert, ...], values: dict) -> tuple:
    return tuple(conv(values[name]) for name, conv in zip(names, converters, strict=True))
