"""One fingerprint of a row's values, computed alike by the source (SQL) and by Spark (silver).

Reconciliation compares silver with the source value by value without moving the rows: each side
reduces every row to a 60-bit number and groups the numbers by key bucket. Both sides must
therefore spell every value the same way before hashing it, which is what this module owns:

- each column becomes one *field*: the upper-case hex of the value's canonical bytes, or ``N``
  for NULL (hex cannot contain ``N``, and hex keeps ``|`` out of the values). A column of a
  variable-length kind (text, binary, JSON, spatial...) gives the hex MD5 of its canonical bytes
  instead: MariaDB's string functions return NULL for a result over ``max_allowed_packet``, so
  the hex of a 10 MB value would read as NULL; when even the MD5's input is refused, the field is
  ``E``, which no silver value gives (a difference is reported, never a false equality);
- the fields are joined by ``|``; the first 15 hex digits of the MD5 of that text, read as a
  number, are the row's fingerprint. 60 bits fit Spark's signed BIGINT and MySQL's unsigned one.

The canonical bytes are those silver stores (see ``source.typemap``): the SQL side re-spells the
source's value in silver's form, e.g. a TIMESTAMP as UTC microseconds, a zero DATE as NULL, a
spatial value as WKB, EWKB when it has an SRID, a TIME with its fraction only when there is one,
a ZEROFILL number without its padding.

FLOAT and DOUBLE are not printed: MariaDB and Java print doubles differently (``1e20`` against
``1.0E20``), and no SQL function exposes their bits. Both sides instead compute the value's exact
binary form ``[-]M p E`` (``|x| = M * 2**E``, ``M`` the 53-bit integer significand) with the same
IEEE arithmetic: a division by a power of two is exact, so only the exponent is estimated (with
a logarithm) and then corrected by one where the estimate was off. A FLOAT (a float32 in silver)
is widened to DOUBLE first, which is exact on both sides.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from ..source.canonical import SRID_BYTES
from ..source.connection import quote_ident
from ..source.introspect import ColumnInfo
from ..source.typemap import (
    BINARY_TYPES,
    MARIADB_BINARY_TEXT,
    SPARK_MAX_PRECISION,
    SPATIAL_TYPES,
    TEXT_TYPES,
)

NULL_FIELD = "N"
REFUSED_FIELD = "E"  # the server refused to build the value's text (over max_allowed_packet)
SEPARATOR = "|"
HASH_HEX_DIGITS = 15  # 60 bits: a non-negative BIGINT in Spark, BIGINT UNSIGNED in MySQL
INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})
FLOAT_TYPES = frozenset({"float", "double"})
SIGNIFICAND_BITS = 52  # a double's significand holds 53 bits, the leading one implicit
MIN_EXPONENT = -1022  # of a normal double; below it the significand is a subnormal's (no leading 1)
LONG_TEXT_TYPES = TEXT_TYPES | {"set", "json"}


def is_long(col: ColumnInfo) -> bool:
    """Whether the column's field is the MD5 of its value (values of any length) instead of its hex."""
    return col.data_type in LONG_TEXT_TYPES or col.data_type in BINARY_TYPES or col.data_type in SPATIAL_TYPES


# --- SQL (the source) ---------------------------------------------------------------------


def _zero_date_guard(name: str, expression: str) -> str:
    """NULL where silver holds NULL: the zero date and dates with a zero part, which SELECT
    returns as text and the binlog as None (``canonical.zero_date_to_none``)."""
    return f"IF(YEAR({name}) = 0 OR MONTH({name}) = 0 OR DAYOFMONTH({name}) = 0, NULL, {expression})"


def sql_field(col: ColumnInfo) -> str:
    """The SQL expression of one column's field (never NULL)."""
    name = quote_ident(col.name)
    kind = col.data_type
    if kind in BINARY_TYPES:
        return _sql_digest(name, name)
    if kind in SPATIAL_TYPES:
        return _sql_digest(name, _sql_wkb(name))
    if is_long(col):
        return _sql_digest(name, f"CONVERT({_sql_text(col, name)} USING utf8mb4)")
    if kind == "bit":
        width = col.display_width or 1
        if width == 1:
            hexed = f"HEX(CAST({name} + 0 AS CHAR))"
        else:  # silver holds big-endian bytes, (width + 7) // 8 of them
            hexed = f"LPAD(HEX({name} + 0), {2 * ((width + 7) // 8)}, '0')"
    else:
        hexed = f"HEX(CONVERT({_sql_text(col, name)} USING utf8mb4))"
    return f"COALESCE({hexed}, '{NULL_FIELD}')"


def _sql_wkb(name: str) -> str:
    """A spatial value as silver holds it (``canonical.spatial_wkb``): the server's value is its SRID (4
    bytes, little-endian) then WKB in little-endian order; SRID 0 gives the WKB, any other the
    EWKB: the type's high byte gets the SRID flag (0x20) and the SRID follows the type."""
    srid, body = f"SUBSTRING({name}, 1, {SRID_BYTES})", f"SUBSTRING({name}, {SRID_BYTES + 1})"
    flagged_type = (f"SUBSTRING({name}, {SRID_BYTES + 1}, 4), "  # byte order, the type's low bytes
                    f"CHAR(ASCII(SUBSTRING({name}, {SRID_BYTES + 5}, 1)) | 0x20)")
    return (f"IF({srid} = x'00000000', {body}, "
            f"CONCAT({flagged_type}, {srid}, SUBSTRING({name}, {SRID_BYTES + 6})))")


def _sql_digest(name: str, canonical: str) -> str:
    """The field of a variable-length column: the MD5 of its ``canonical`` bytes, ``N`` for NULL,
    ``E`` where the server refuses to build them."""
    return f"IF({name} IS NULL, '{NULL_FIELD}', COALESCE(UPPER(MD5({canonical})), '{REFUSED_FIELD}'))"


def _sql_text(col: ColumnInfo, name: str) -> str:
    """The column as the text silver's value casts to (see :func:`_spark_text`)."""
    kind = col.data_type
    # Cast to the column's own type first: a ZEROFILL column's CAST AS CHAR keeps the padding
    # ('005', '0012.5000'), which silver's number never has.
    if kind in INTEGER_TYPES:
        return f"CAST(CAST({name} AS {'UNSIGNED' if col.unsigned else 'SIGNED'}) AS CHAR)"
    if kind == "decimal":
        return f"CAST(CAST({name} AS DECIMAL({col.precision or 10}, {col.scale or 0})) AS CHAR)"
    if kind == "year":
        return f"CAST({name} + 0 AS CHAR)"  # YEAR 0000 is 0 in silver
    if kind == "date":
        return _zero_date_guard(name, f"DATE_FORMAT({name}, '%Y-%m-%d')")
    if kind == "datetime":
        return _zero_date_guard(name, f"DATE_FORMAT({name}, '%Y-%m-%d %H:%i:%s.%f')")
    if kind == "timestamp":
        # UTC microseconds; the zero TIMESTAMP (epoch 0, never a real value) is NULL in silver.
        return f"CAST(NULLIF(CAST(UNIX_TIMESTAMP({name}) * 1000000 AS SIGNED), 0) AS CHAR)"
    if kind == "time":
        # canonical.time_text: the fraction only when there is one, always six digits then.
        return (f"IF(MICROSECOND({name}) = 0, TIME_FORMAT({name}, '%H:%i:%s'), "
                f"TIME_FORMAT({name}, '%H:%i:%s.%f'))")
    if kind in FLOAT_TYPES:
        return _sql_binary_float(name)
    if kind in MARIADB_BINARY_TEXT:
        return f"CAST({name} AS CHAR)"
    return name  # text types, enum, set, json: the text itself


def _sql_binary_float(name: str) -> str:
    """``[-]MpE`` for a FLOAT or DOUBLE (see the module docstring), ``0`` for zero, NULL for NULL."""
    size = f"ABS(CAST({name} AS DOUBLE))"
    guess = f"GREATEST(FLOOR(LOG2(NULLIF({size}, 0))), {MIN_EXPONENT})"
    scaled = f"({size} / POW(2, {guess} - {SIGNIFICAND_BITS}))"  # exact: a power of two divides
    high = f"{scaled} >= {2 ** (SIGNIFICAND_BITS + 1)}"  # the exponent was guessed one too low
    low = f"{scaled} < {2 ** SIGNIFICAND_BITS} AND {guess} > {MIN_EXPONENT}"  # one too high
    significand = f"{scaled} * IF({high}, 5e-1, IF({low}, 2e0, 1e0))"
    exponent = f"{guess} + IF({high}, 1, IF({low}, -1, 0)) - {SIGNIFICAND_BITS}"
    return (f"IF({size} = 0, '0', CONCAT(IF({name} < 0, '-', ''), CAST(CAST({significand} AS UNSIGNED) AS CHAR), "
            f"'p', CAST(CAST({exponent} AS SIGNED) AS CHAR)))")


def sql_row_hash(columns: Sequence[ColumnInfo]) -> str:
    """The SQL expression of the fingerprint of ``columns``."""
    fields = ", ".join(sql_field(c) for c in columns) or f"'{NULL_FIELD}'"
    return (f"CAST(CONV(LEFT(MD5(CONCAT_WS('{SEPARATOR}', {fields})), {HASH_HEX_DIGITS}), 16, 10) "
            "AS UNSIGNED)")


# --- Spark (silver) -----------------------------------------------------------------------


def spark_field(col: ColumnInfo) -> Column:
    """The Spark expression of one column's field, equal to :func:`sql_field` for equal values."""
    value = F.col(quote_ident(col.name))
    kind = col.data_type
    if is_long(col):
        return F.when(value.isNull(), F.lit(NULL_FIELD)).otherwise(F.upper(F.md5(value.cast("binary"))))
    if kind == "bit" and (col.display_width or 1) > 1:
        hexed = F.hex(value)
    else:
        hexed = F.hex(_spark_text(col, value))
    return F.coalesce(hexed, F.lit(NULL_FIELD))


def _spark_text(col: ColumnInfo, value: Column) -> Column:
    kind = col.data_type
    if kind == "bit":
        return value.cast("int").cast("string")
    if kind == "date":
        return F.date_format(value, "yyyy-MM-dd")
    if kind == "datetime":
        return F.date_format(value, "yyyy-MM-dd HH:mm:ss.SSSSSS")
    if kind == "timestamp":
        return F.unix_micros(value).cast("string")
    if kind in FLOAT_TYPES:
        return _spark_binary_float(value)
    if kind in INTEGER_TYPES or kind == "year" or (kind == "decimal" and (col.precision or 10) <= SPARK_MAX_PRECISION):
        return value.cast("string")  # a DECIMAL as plain positional text with its scale, like CAST AS CHAR
    return value  # already silver's text (text types, enum, set, json, time, uuid, inet, DECIMAL(>38))


def _spark_binary_float(value: Column) -> Column:
    """:func:`_sql_binary_float` in Spark."""
    size = F.abs(value.cast("double"))
    guess = F.greatest(F.floor(F.log2(size)), F.lit(MIN_EXPONENT))  # log2(0) is NULL, as in SQL
    scaled = size / F.pow(F.lit(2.0), guess - SIGNIFICAND_BITS)
    high = scaled >= F.lit(2 ** (SIGNIFICAND_BITS + 1))
    low = (scaled < F.lit(2 ** SIGNIFICAND_BITS)) & (guess > MIN_EXPONENT)
    significand = scaled * F.when(high, 0.5).when(low, 2.0).otherwise(1.0)
    exponent = guess + F.when(high, 1).when(low, -1).otherwise(0) - SIGNIFICAND_BITS
    spelled = F.concat(F.when(value < 0, "-").otherwise(""), significand.cast("long").cast("string"), F.lit("p"),
                       exponent.cast("string"))
    return F.when(size == 0, F.lit("0")).otherwise(spelled)


def spark_row_hash(columns: Sequence[ColumnInfo]) -> Column:
    """The Spark expression of the fingerprint of ``columns``, equal to :func:`sql_row_hash`."""
    fields = [spark_field(c) for c in columns] or [F.lit(NULL_FIELD)]
    digest = F.md5(F.concat_ws(SEPARATOR, *fields).cast("binary"))
    return F.conv(F.substring(digest, 1, HASH_HEX_DIGITS), 16, 10).cast("bigint")
