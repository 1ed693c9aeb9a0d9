"""One fingerprint of a row's values, computed alike by the source (SQL) and by Spark (silver).

Reconciliation compares silver with the source value by value without moving the rows: each side
reduces every row to a 61-bit number and groups the numbers by key bucket. Both sides must
therefore read every value as the same number, which is what this module owns.

The fingerprint is cheap on purpose: both sides compute it for every row of the table, and the
first design (the MD5 of the upper-case hex of every field, joined as text) cost more than the
snapshot it checked (8.3 s of Spark and 8.9 s of MariaDB for 1M 18-column rows; 3.3 s and 4.4 s
now). Each column gives one *term*, a non-negative integer under 2**61, and no text is built:

- an integer (TINYINT to INT, YEAR, BIT(1)) is its value plus 2**31, times the column's weight;
  a BIGINT's low and high 32 bits each get a weight of their own;
- any other value is the CRC-32 of its canonical bytes (text as UTF-8), times the weight;
- NULL reads as 2**33 and a value the server refuses to build (over ``max_allowed_packet``) as
  2**33 + 1: no integer or CRC gives either, so neither equals a value.

The weights are odd numbers under 2**24 fixed by the column's position, so every term is under
2**57 and a value moved to another column changes the sum. The row's fingerprint is the sum of
its terms modulo the prime 2**61 - 1, reduced every 48 terms so that no sum exceeds a signed
BIGINT on either side (MariaDB's BIGINT fails on an overflow; Spark's bucket sums weigh the
numbers without overflow checks, see ``unchecked``, so the bound is what keeps the sides equal). A change
of one value always changes the fingerprint (a weight times a difference under 2**34 is never a
multiple of the prime) unless the value's CRC-32 is unchanged, a chance of 2**-32 per changed
text value; changes of several values cancel with a chance near 2**-61.

The source computes this for every row inside its read views (two server threads, each summing
part of the table: ``sourceview``), so its cost is the check's: each SQL function call costs
the server ~50-100 ns a row. A text column already in utf8mb4 is therefore CRC'd as it is (no
``CONVERT``, which copies the value, and no refusal to guard against), a NOT NULL column has no
``COALESCE``, and a row's terms are reduced once per 48 instead of every three (make bench's
2M-row ``customer``, alternating: 7.7-12.8 s -> 5.8-7.4 s for the bucket sums query). Spark's
side keeps its NULL guards: a NULL in silver where the source has none must still differ.

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

A key is also *spelled* (:func:`sql_field`, :func:`spark_field`): the upper-case hex of each key
value joined by ``|``, which names a key without ambiguity (reports, bucket hashes). Only key
columns are spelled, so its cost does not grow with the table's width.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

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
MODULUS = 2**61 - 1  # a prime: a row's fingerprint is its terms' sum modulo it
TERMS_PER_REDUCTION = 48  # a sum under 2**61 plus 48 terms under 2**57 stays under 2**63
WEIGHT_BITS = 24  # weights under 2**24 times values under 2**33 + 2 keep every term under 2**57
WEIGHT_SLOTS = 1 << (WEIGHT_BITS - 1)  # odd weights under 2**WEIGHT_BITS: 2 * slot + 1
HIGH_HALF_OFFSET = 1 << (WEIGHT_BITS - 2)  # the slots of BIGINTs' high halves, apart from the columns'
NULL_VALUE = 2**33  # what NULL reads as: above every integer (+ 2**31) and every CRC-32
REFUSED_VALUE = 2**33 + 1  # a value the server refused to build (over max_allowed_packet)
INT_OFFSET = 2**31  # a signed 32-bit integer plus this is non-negative
LOW_BITS = 2**32  # a BIGINT is weighed as its low and high 32 bits
INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})
FLOAT_TYPES = frozenset({"float", "double"})
SIGNIFICAND_BITS = 52  # a double's significand holds 53 bits, the leading one implicit
MIN_EXPONENT = -1022  # of a normal double; below it the significand is a subnormal's (no leading 1)
LONG_TEXT_TYPES = TEXT_TYPES | {"set", "json"}
UTF8MB4 = "utf8mb4"  # silver's text encoding (UTF-8)

T = TypeVar("T", str, Column)


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
    return _fold([sql_term(c, i) for i, c in enumerate(columns)], lambda parts: f"(({' + '.join(parts)}) % {MODULUS})")


def sql_term(col: ColumnInfo, position: int) -> str:
    """The SQL expression of the term of ``col``, the ``position``-th column (never NULL)."""
    name = quote_ident(col.name)
    kind, weight = col.data_type, column_weight(position)

    def unless_null(value: str, null: int = NULL_VALUE) -> str:
        return f"COALESCE({value}, {null})" if col.nullable else f"({value})"

    if kind == "bigint":  # & and >> work on the unsigned 64 bits: a negative value's are its two's complement
        high = column_weight(position, high_half=True)
        return unless_null(f"({name} & {LOW_BITS - 1}) * {weight} + ({name} >> 32) * {high}", NULL_VALUE * weight)
    if kind in INTEGER_TYPES or kind == "year" or (kind == "bit" and (col.display_width or 1) == 1):
        number = name if kind in INTEGER_TYPES else f"({name} + 0)"  # YEAR 0000 and BIT(1) as numbers
        return f"{unless_null(f'{number} + {INT_OFFSET}')} * {weight}"
    if kind == "bit":  # silver holds big-endian bytes, (width + 7) // 8 of them
        width = 2 * (((col.display_width or 1) + 7) // 8)
        return f"COALESCE(CRC32(UNHEX(LPAD(HEX({name} + 0), {width}, '0'))), {NULL_VALUE}) * {weight}"
    if kind in LONG_TEXT_TYPES and col.charset == UTF8MB4:  # its own bytes are the canonical ones
        return f"{unless_null(f'CRC32({name})')} * {weight}"
    if is_long(col):
        if kind in BINARY_TYPES:
            canonical = name
        elif kind in SPATIAL_TYPES:
            canonical = _sql_wkb(name)
        else:
            canonical = f"CONVERT({_sql_text(col, name)} USING utf8mb4)"
        # Building the canonical value may be refused (NULL) where the value is not NULL.
        return f"IF({name} IS NULL, {NULL_VALUE}, COALESCE(CRC32({canonical}), {REFUSED_VALUE})) * {weight}"
    return f"COALESCE(CRC32(CONVERT({_sql_text(col, name)} USING utf8mb4)), {NULL_VALUE}) * {weight}"


def column_weight(position: int, *, high_half: bool = False) -> int:
    """The odd weight of the ``position``-th column (of a BIGINT's high 32 bits with ``high_half``):
    distinct for every column and half, under 2**WEIGHT_BITS."""
    index = position + 1 + (HIGH_HALF_OFFSET if high_half else 0)
    return 2 * (index * 0x9E3779B1 % WEIGHT_SLOTS) + 1  # an odd multiplier: a bijection on the slots


def _fold(terms: Sequence[T], reduce: Callable[[Sequence[T]], T]) -> T:
    """The terms' sum modulo :data:`MODULUS`, ``reduce`` (sum, then modulo) applied to the running
    sum and the next :data:`TERMS_PER_REDUCTION` terms, so that no sum overflows 63 bits."""
    total: T | None = None
    for start in range(0, len(terms), TERMS_PER_REDUCTION):
        chunk = list(terms[start:start + TERMS_PER_REDUCTION])
        if total is not None:
            chunk.insert(0, total)
        total = reduce(chunk)
    if total is None:
        raise ValueError("a fingerprint needs at least one column")
    return total


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
    return spark_row_hash_of(columns, [spark_numbers(c) for c in columns])


def _spark_reduce(parts: Sequence[Column]) -> Column:
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total % F.lit(MODULUS)


def spark_term(col: ColumnInfo, position: int) -> Column:
    """The Spark expression of the term of ``col``, equal to :func:`sql_term` for equal values."""
    return spark_weighed(col, position, spark_numbers(col))


def spark_numbers(col: ColumnInfo) -> tuple[Column, ...]:
    """The number(s) the term of ``col`` weighs (NULL where the value is NULL): its value, its
    BIGINT halves, or the CRC-32 of its canonical bytes. All the casts are here and none of the
    arithmetic, so that the two can be evaluated under different settings (see ``unchecked``)."""
    value = F.col(quote_ident(col.name))
    kind = col.data_type
    if kind == "bigint":
        if col.unsigned:  # a DECIMAL(20, 0) in silver
            return F.pmod(value, F.lit(LOW_BITS)).cast("long"), F.floor(value / F.lit(LOW_BITS)).cast("long")
        return value.bitwiseAND(F.lit(LOW_BITS - 1)), F.shiftrightunsigned(value, 32)
    if kind in INTEGER_TYPES or kind == "year" or (kind == "bit" and (col.display_width or 1) == 1):
        return (value.cast("long"),)
    if kind == "bit":
        return (F.crc32(value),)
    if is_long(col):
        return (F.crc32(value.cast("binary")),)
    return (F.crc32(_spark_text(col, value).cast("binary")),)


def spark_weighed(col: ColumnInfo, position: int, numbers: Sequence[Column]) -> Column:
    """The term of ``col`` from its :func:`spark_numbers` (or columns holding them): the
    arithmetic alone, never NULL."""
    kind, weight = col.data_type, F.lit(column_weight(position))
    null = F.lit(NULL_VALUE)
    if kind == "bigint":
        low, high = numbers
        high_weight = F.lit(column_weight(position, high_half=True))
        return F.coalesce(low * weight + high * high_weight, null * weight)
    (number,) = numbers
    if kind in INTEGER_TYPES or kind == "year" or (kind == "bit" and (col.display_width or 1) == 1):
        return F.coalesce(number + F.lit(INT_OFFSET), null) * weight
    return F.coalesce(number, null) * weight


def spark_row_hash_of(columns: Sequence[ColumnInfo], numbers: Sequence[Sequence[Column]]) -> Column:
    """:func:`spark_row_hash` from each column's :func:`spark_numbers` (or columns holding them)."""
    terms = [spark_weighed(c, i, n) for i, (c, n) in enumerate(zip(columns, numbers, strict=True))]
    return _fold(terms, _spark_reduce)
