"""One canonical form for a value, whether SELECT or the binlog produced it.

Each column gets two converters, built once per table (not dispatched per value): one for what
pymysql returns from SELECT, one for what python-mysql-replication decodes from a row event.
Both must land identically in Delta; the pitfalls are noted where they are handled.

Two pitfalls cannot be fixed from the value alone, so this module also owns what surrounds it:

- SELECT prints a plain FLOAT with 6 significant digits, losing the stored float32; the snapshot
  must read columns through :func:`select_list`, which asks the server for the exact value.
- The binlog decodes an empty SET as None, like NULL; the row's null bitmap tells them apart
  and the library reports it as a "none source": the adapter passes each row image through
  :func:`binlog_values`, which restores the empty set.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import struct
import uuid
from collections.abc import Callable, Mapping
from decimal import Context, Decimal
from functools import partial
from typing import Any, Literal, cast

from pymysqlreplication.constants import NONE_SOURCE
from pyspark.sql import types as T

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
MAX_DECIMAL_DIGITS = 65 + 30  # MySQL's DECIMAL(65,30) at most, with room to spare
SRID_BYTES = 4
WKB_HEADER_BYTES = 5  # the byte-order byte and the 4-byte geometry type
EWKB_SRID_FLAG = 0x20000000  # in an EWKB geometry type: an SRID follows the type
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


# --- shared canonical steps -------------------------------------------------------------


def _none_or(fn: Convert, value: Any) -> Any:
    return None if value is None else fn(value)


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def _decimal_text(scale: int, value: Any) -> str:
    """DECIMAL wider than Spark's as positional text with the column's scale, like the server
    prints it: ``str(Decimal)`` would give ``'0E-30'`` or ``'-1E-30'``."""
    exact = Context(prec=MAX_DECIMAL_DIGITS)
    number = Decimal(value).quantize(Decimal(1).scaleb(-scale), context=exact)
    if number.is_zero():
        number = number.copy_abs()  # never '-0.00'
    return format(number, "f")


def _unsigned_bigint(value: Any) -> Decimal:
    return Decimal(int(value))


def _float32(value: Any) -> float:
    """The float32 nearest to ``value``: exact for the binlog's bits and for SELECT's DOUBLE."""
    return cast(float, struct.unpack("<f", struct.pack("<f", value))[0])  # per value: no conversion


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


def _time2_from_binlog(value: dt.timedelta) -> dt.timedelta:
    """Undo python-mysql-replication 1.0.x's decoding of a negative TIME with a fraction.

    TIME2 stores ``-(whole + fraction)`` as one two's-complement number over the 3 integer
    bytes and the 1-3 fraction bytes. The library negates only the integer bytes, which (as the
    fraction is not zero) hold the floor, ``whole + 1`` second, and reads the fraction bytes as
    a signed ``-fraction``: it returns ``-(whole + 1 s - fraction)``, e.g. ``-00:00:01.250``
    as ``-00:00:01.750``. So for a negative value with a fraction, the true magnitude has the
    same whole seconds and the complementary fraction. Values without a fraction, and all
    non-negative ones, are decoded correctly and pass unchanged.
    """
    if value >= dt.timedelta(0):
        return value
    magnitude = -value
    if not magnitude.microseconds:
        return value
    whole = magnitude - dt.timedelta(microseconds=magnitude.microseconds)
    return -(whole + dt.timedelta(microseconds=1_000_000 - magnitude.microseconds))


def _time_from_binlog(value: Any) -> str:
    if isinstance(value, dt.timedelta):
        value = _time2_from_binlog(value)
    return _time_text(value)


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


def pad_binary(width: int, value: Any) -> bytes:
    """The binlog strips BINARY(n)'s trailing zero bytes; SELECT keeps all n."""
    return _as_bytes(value).ljust(width, b"\x00")


def _as_bytes(value: Any) -> bytes:
    """Bytes as stored. The binlog gives binary strings as bytes, except the empty one as ''."""
    return value if isinstance(value, bytes) else _text(value).encode("utf-8", "surrogateescape")


def _wkb(value: Any) -> bytes:
    """Spatial values as WKB that keeps the SRID. Both paths give MySQL's internal form, a 4-byte
    SRID (little-endian) followed by standard WKB. SRID 0 (none) gives that standard WKB as is;
    any other SRID gives EWKB (PostGIS's extended WKB: the geometry type with its SRID flag
    ``0x20000000`` and the SRID after it), which GEOS/Shapely, JTS/Sedona and PostGIS read with
    its SRID, so that SRID 4326 and SRID 0 never look alike in the lake."""
    raw = _as_bytes(value)
    srid, wkb = int.from_bytes(raw[:SRID_BYTES], "little"), raw[SRID_BYTES:]
    return ewkb(wkb, srid)


def ewkb(wkb: bytes, srid: int) -> bytes:
    """``wkb`` (standard WKB) with ``srid`` written into it as EWKB; ``wkb`` itself for SRID 0."""
    if not srid or len(wkb) < WKB_HEADER_BYTES:
        return wkb
    order: Literal["little", "big"] = "little" if wkb[0] == 1 else "big"  # the WKB's own (MySQL: little)
    kind = int.from_bytes(wkb[1:WKB_HEADER_BYTES], order) | EWKB_SRID_FLAG
    return wkb[:1] + kind.to_bytes(4, order) + srid.to_bytes(SRID_BYTES, order) + wkb[WKB_HEADER_BYTES:]


def _uuid_text(raw: bytes) -> str:
    return str(uuid.UUID(bytes=raw))


def _inet4_text(raw: bytes) -> str:
    return str(ipaddress.IPv4Address(raw))


def _inet6_text(raw: bytes) -> str:
    """INET6 text exactly as MariaDB prints it (MySQL's INET6_NTOA rules), which differ from
    Python's: a lone zero group is compressed too, and '::a.b.c.d' / '::ffff:a.b.c.d' keep the
    dotted IPv4 tail."""
    words = struct.unpack(">8H", raw)
    gap_start, gap_length = _longest_zero_run(words)
    parts: list[str] = []
    index = 0
    while index < len(words):
        if index == gap_start:
            parts.append("" if index else ":")
            index += gap_length
            if index == len(words):
                parts.append("")
            continue
        ipv4_tail = gap_start == 0 and (gap_length == 6 or (gap_length == 5 and words[5] == 0xFFFF))
        if index == 6 and ipv4_tail:
            parts.append(str(ipaddress.IPv4Address(raw[12:])))
            break
        parts.append(f"{words[index]:x}")
        index += 1
    return ":".join(parts)


def _longest_zero_run(words: tuple[int, ...]) -> tuple[int, int]:
    """Start and length of the first longest run of zero words; (-1, 0) when there is none."""
    best = (-1, 0)
    start = -1
    for index, word in enumerate((*words, 1)):  # the sentinel closes a trailing run
        if word == 0 and start < 0:
            start = index
        elif word != 0 and start >= 0:
            if index - start > best[1]:
                best = (start, index - start)
            start = -1
    return best


def _mariadb_binary_text(width: int, to_text: Callable[[bytes], str], value: Any) -> str:
    """UUID/INET4/INET6 from the binlog: raw bytes without trailing zero bytes."""
    return to_text(pad_binary(width, value))


def _identity(value: Any) -> Any:
    return value


# --- per-column converters --------------------------------------------------------------


def select_converter(col: ColumnInfo) -> Convert:
    return partial(_none_or, _select_step(col))


def select_step(col: ColumnInfo) -> Convert:
    """What :func:`select_converter` applies to a non-NULL value of ``col``."""
    return _select_step(col)


def binlog_converter(col: ColumnInfo) -> Convert:
    step = _binlog_step(col)
    if col.data_type == "set" and not col.nullable:
        # Without binlog_values (see the module docstring) an empty SET arrives as None; in a
        # NOT NULL column that can only be the empty set.
        return partial(_empty_set_or, step)
    return partial(_none_or, step)


def _empty_set_or(fn: Convert, value: Any) -> Any:
    return "" if value is None else fn(value)


def _select_step(col: ColumnInfo) -> Convert:
    kind = col.data_type
    if kind == "bigint" and col.unsigned:
        return _unsigned_bigint
    if kind == "decimal" and (col.precision or 0) > SPARK_MAX_PRECISION:
        return partial(_decimal_text, col.scale or 0)
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
    if kind in SPATIAL_TYPES:
        return _wkb
    if isinstance(spark_type(col), T.StringType):
        return _text
    return _identity


_MARIADB_TEXT: dict[str, Callable[[bytes], str]] = {
    "uuid": _uuid_text, "inet6": _inet6_text, "inet4": _inet4_text,
}


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
    if kind == "time":
        return _time_from_binlog
    if kind == "timestamp":
        return _timestamp_from_binlog
    if kind == "binary":
        return partial(pad_binary, col.display_width or 0)
    if kind in MARIADB_BINARY_TEXT:
        return partial(_mariadb_binary_text, MARIADB_BINARY_TEXT[kind], _MARIADB_TEXT[kind])
    return _select_step(col)


def row_converter(table: TableSchema, source: str) -> Callable[[Any], tuple[Any, ...]]:
    """A function turning one SELECT tuple (read with :func:`select_list`) or one binlog values
    dict (passed through :func:`binlog_values`) into a canonical tuple."""
    if source == "select":
        converters = tuple(select_converter(c) for c in table.columns)
        return partial(_convert_tuple, converters)
    converters = tuple(binlog_converter(c) for c in table.columns)
    return partial(_convert_dict, table.column_names, converters)


def _convert_tuple(converters: tuple[Convert, ...], row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(conv(value) for conv, value in zip(converters, row, strict=True))


def _convert_dict(names: tuple[str, ...], converters: tuple[Convert, ...], values: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(conv(values[name]) for name, conv in zip(names, converters, strict=True))
