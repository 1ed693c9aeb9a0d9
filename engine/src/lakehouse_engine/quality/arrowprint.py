"""The row fingerprint and key bucket of :mod:`fingerprint` and :mod:`bucketing`, over Arrow.

``dq`` on a local lake reads silver's Parquet files itself (``arrowsilver``) instead of starting
a JVM: Spark's start and its first, cold pass over silver cost more than half the snapshot they
check. This module computes, for every row of an Arrow table, the same 61-bit fingerprint as
:func:`fingerprint.spark_row_hash` and the same bucket as :meth:`Bucketing.spark`, so both are
compared with the source's SQL sums exactly as Spark's are. It mirrors the Spark expressions
branch by branch (``spark_numbers``, ``spark_weighed``, ``_spark_text``), and the tests hold
both sides to the source's sums on a real server for every column type.

Arithmetic is in unsigned 64-bit numpy: the fingerprint's terms stay under 2**57 and its sums
under 2**63 (see :mod:`fingerprint`), so nothing wraps. A CRC-32 is zlib's, of each distinct
value's bytes read in place from the Arrow buffers, computed for all values of one length at once
(:func:`crc32s`).
A key's spelling (for hash buckets) is hex-encoded in one numpy pass over the Arrow buffer.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..source.introspect import ColumnInfo
from ..source.typemap import SPARK_MAX_PRECISION
from .bucketing import Bucketing
from .fingerprint import (
    FLOAT_TYPES,
    INT_OFFSET,
    INTEGER_TYPES,
    LOW_BITS,
    MIN_EXPONENT,
    MODULUS,
    NULL_FIELD,
    NULL_VALUE,
    SEPARATOR,
    SIGNIFICAND_BITS,
    TERMS_PER_REDUCTION,
    column_weight,
    is_long,
)

U64 = np.uint64
SMALLEST_EXPONENT = MIN_EXPONENT - SIGNIFICAND_BITS  # a subnormal double's: |x| = M * 2**-1074


class Unprintable(Exception):
    """A column whose values this module cannot read as Spark does; Spark must check the table."""


def buckets(bucketing: Bucketing, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Each row's bucket (int64) and whether it has one, as :meth:`Bucketing.spark` gives it:
    ``key div width`` of the first key column (truncated toward zero; none where it is NULL),
    else the CRC-32 of the key's spelling modulo the bucket count (every row has one)."""
    if bucketing.width is None:
        crcs, _ = crc32s(key_ids(bucketing.key, table))
        return (crcs % U64(bucketing.count)).astype(np.int64), np.ones(table.num_rows, dtype=bool)
    values, valid = _integers(table.column(bucketing.key[0].name))
    width = np.int64(bucketing.width)
    quotient = np.abs(values) // width
    return np.where(values < 0, -quotient, quotient), valid


def key_ids(key: Sequence[ColumnInfo], table: pa.Table) -> pa.Array:
    """Each row's key spelled as :func:`bucketing.spark_key_id` spells it: every key column's
    field (:func:`key_field`) joined by ``|``."""
    fields = [key_field(col, table.column(col.name)) for col in key]
    if len(fields) == 1:
        return fields[0]
    return pc.binary_join_element_wise(*fields, SEPARATOR)


def key_field(col: ColumnInfo, values: pa.ChunkedArray | pa.Array) -> pa.Array:
    """:func:`fingerprint.spark_field`: the upper-case hex of the value's text (of a BIT(>1)'s
    bytes), the upper-case MD5 of a variable-length value, ``N`` for NULL."""
    array = _one_chunk(values)
    if is_long(col):
        data = array.cast(pa.binary()) if pa.types.is_string(array.type) else array
        digests = [None if v is None else hashlib.md5(v).hexdigest().upper() for v in data.to_pylist()]
        return pa.array(digests, type=pa.string()).fill_null(NULL_FIELD)
    if col.data_type == "bit" and (col.display_width or 1) > 1:
        return _upper_hex(array).fill_null(NULL_FIELD)
    return _upper_hex(_key_text(col, array)).fill_null(NULL_FIELD)


def _key_text(col: ColumnInfo, array: pa.Array) -> pa.Array:
    """``fingerprint._spark_text`` of a key column (as text)."""
    kind = col.data_type
    if kind == "bit":  # BIT(1): a boolean in silver, 0 or 1 as text
        return pc.cast(array.cast(pa.int8()), pa.string())
    if kind in INTEGER_TYPES or kind == "year":
        if pa.types.is_decimal(array.type):  # an unsigned BIGINT
            return _decimal_text(array)
        if not pa.types.is_integer(array.type):
            raise Unprintable(f"an integer key column is {array.type} in silver")
        return pc.cast(array, pa.string())
    return canonical_bytes(col, array)


_HEX_DIGITS = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)


def _upper_hex(array: pa.Array) -> pa.Array:
    """Every value's bytes as upper-case hex (Spark's ``hex``), in one pass over the buffer."""
    if not (pa.types.is_string(array.type) or pa.types.is_binary(array.type)):
        raise Unprintable(f"hex of {array.type}")
    if array.offset:
        array = pa.concat_arrays([array])  # a copy starting at its first value, validity bits too
    validity, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[:len(array) + 1].astype(np.int64)
    data = (np.frombuffer(data_buffer, dtype=np.uint8)[offsets[0]:offsets[-1]] if data_buffer is not None
            else np.empty(0, dtype=np.uint8))
    hexed = np.empty(2 * len(data), dtype=np.uint8)
    hexed[0::2], hexed[1::2] = _HEX_DIGITS[data >> 4], _HEX_DIGITS[data & 15]
    doubled = pa.py_buffer((2 * (offsets - offsets[0])).astype(np.int32).tobytes())
    return pa.Array.from_buffers(pa.string(), len(array), [validity, doubled, pa.py_buffer(hexed.tobytes())],
                                 null_count=array.null_count)


def row_hashes(columns: Sequence[ColumnInfo], table: pa.Table) -> np.ndarray:
    """Every row's fingerprint of ``columns`` (``table`` holds them by name, as silver stores
    them), equal to :func:`fingerprint.spark_row_hash` row by row."""
    rows = table.num_rows
    total: np.ndarray | None = None
    terms = [term(col, i, table.column(col.name)) for i, col in enumerate(columns)]
    if not terms:
        raise ValueError("a fingerprint needs at least one column")
    for start in range(0, len(terms), TERMS_PER_REDUCTION):
        chunk = terms[start:start + TERMS_PER_REDUCTION]
        summed = np.zeros(rows, dtype=U64) if total is None else total.copy()
        for part in chunk:
            summed += part
        total = summed % U64(MODULUS)
    assert total is not None
    return total


def term(col: ColumnInfo, position: int, values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The term of ``col``, the ``position``-th column, for every value (:func:`fingerprint.spark_term`)."""
    kind, weight = col.data_type, U64(column_weight(position))
    null = U64(NULL_VALUE)
    if kind == "bigint":
        low, high, valid = _bigint_halves(col, values)
        high_weight = U64(column_weight(position, high_half=True))
        return np.where(valid, low * weight + high * high_weight, null * weight)
    if kind in INTEGER_TYPES or kind == "year" or (kind == "bit" and (col.display_width or 1) == 1):
        numbers, valid = _integers(values)
        return np.where(valid, (numbers + INT_OFFSET).astype(U64), null) * weight
    if pa.types.is_dictionary(values.type):
        crcs, valid = _dictionary_crc32s(col, values)
    else:
        crcs, valid = crc32s(canonical_bytes(col, values))
    return np.where(valid, crcs, null) * weight


def _dictionary_crc32s(col: ColumnInfo, values: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """:func:`crc32s` of a dictionary-encoded column (silver read from its files' dictionaries):
    each chunk's dictionary CRC'd once, then picked by its indices."""
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    crcs, valid = [np.zeros(0, dtype=U64)], [np.zeros(0, dtype=bool)]
    for chunk in chunks:
        distinct, known = crc32s(canonical_bytes(col, chunk.dictionary))
        # A zero last, where the dictionary is empty (every value NULL): the indices must land.
        distinct, known = np.append(distinct, U64(0)), np.append(known, False)
        picks = np.asarray(chunk.indices.fill_null(len(chunk.dictionary)).to_numpy(zero_copy_only=False))
        crcs.append(distinct[picks])
        valid.append(known[picks])
    return np.concatenate(crcs), np.concatenate(valid)


def bytes_type(kind: pa.DataType) -> bool:
    """A string or binary type, narrow or large."""
    return bool(pa.types.is_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_string(kind)
                or pa.types.is_large_binary(kind))


def canonical_bytes(col: ColumnInfo, values: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The values whose CRC-32 is the column's number: ``spark_numbers``'s operand, as a string
    or binary array (NULL where the value is NULL)."""
    array = _one_chunk(values)
    kind = col.data_type
    if kind == "bit" or is_long(col):
        return array  # BIT(>1) bytes, binary, spatial, long text: as stored
    if kind == "date":
        return pc.strftime(array, format="%Y-%m-%d")
    if kind == "datetime":
        return _datetime_text(array)
    if kind == "timestamp":
        return pc.cast(_micros(array), pa.string())
    if kind in FLOAT_TYPES:
        return _binary_float(array)
    if kind == "decimal" and (col.precision or 10) <= SPARK_MAX_PRECISION:
        return _decimal_text(array)
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        raise Unprintable(f"column {col.name} ({col.column_type}) is {array.type} in silver, not text")
    return array  # silver's own text (text types, enum, set, json, time, uuid, inet, DECIMAL(>38))


def crc32s(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The CRC-32 of every value's bytes (uint64) and which values are not NULL.

    A column with many repeats (names, flags, countries) is dictionary-encoded first, and each
    distinct value CRC'd once; the distinct values are CRC'd by :func:`_each_crc`."""
    if not bytes_type(array.type):
        raise Unprintable(f"a CRC-32 of {array.type}")
    valid = _valid(array)
    if len(array) >= REPEATS_WORTH_A_LOOK and _repeats(array):
        encoded = pc.dictionary_encode(array)
        if len(encoded.dictionary) <= len(array) // 2:
            # A zero first where every value is NULL (the dictionary is empty): indices must land.
            distinct = np.append(_each_crc(encoded.dictionary), U64(0))
            return distinct[np.asarray(encoded.indices.fill_null(0).to_numpy(zero_copy_only=False))], valid
    return _each_crc(array), valid


REPEATS_WORTH_A_LOOK = 1024  # values; fewer are CRC'd one by one at once


def _repeats(array: pa.Array) -> bool:
    """Whether the column's first values repeat enough for a dictionary to pay (encoding a
    column of distinct values costs a hash pass for nothing)."""
    sample = array.slice(0, REPEATS_WORTH_A_LOOK)
    return int(pc.count_distinct(sample, mode="all").as_py()) <= len(sample) // 2


def _each_crc(array: pa.Array) -> np.ndarray:
    """The CRC-32 (zlib's) of each value's bytes, read in place from the Arrow buffers (NULL: any
    number).

    Values of one length are CRC'd together, four byte positions per numpy step over all of them
    (:func:`_crc_together`): 2M 16-byte keys in 0.15 s against 0.77 s for one ``zlib`` call per
    value, whose cost is the call and the slice, not the bytes (per value at 200k values: 8
    bytes 66 ns against 448, 64 bytes 270-360 ns against 500-790, 128 bytes 610 ns against 480).
    A length held by few values, and values over 64 bytes, are left to ``zlib``."""
    rows = len(array)
    _, offsets_buffer, data_buffer = array.buffers()
    width = np.int64 if pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type) else np.int32
    offsets = np.frombuffer(offsets_buffer, dtype=width)[array.offset:array.offset + rows + 1].astype(np.int64)
    raw = data_buffer if data_buffer is not None else pa.py_buffer(b"")
    data, view = np.frombuffer(raw, dtype=np.uint8), memoryview(raw)  # the view's slices: zlib's, no copies
    starts, lengths = offsets[:-1], np.diff(offsets)
    crcs = np.zeros(rows, dtype=U64)  # the CRC-32 of no bytes is 0
    if not rows:
        return crcs
    if lengths.max() < 2**16:
        lengths = lengths.astype(np.uint16)  # numpy sorts these by radix, stable and fast
    by_length = np.argsort(lengths, kind="stable")
    present, firsts = np.unique(lengths[by_length], return_index=True)
    for length, first, last in zip(present.tolist(), firsts.tolist(), [*firsts[1:].tolist(), rows], strict=True):
        group = by_length[first:last]
        if length == 0:
            continue
        if len(group) < TOGETHER_AT_LEAST or length > TOGETHER_AT_MOST:
            crcs[group] = [zlib.crc32(view[s:s + length]) for s in starts[group].tolist()]
            continue
        for block in range(0, len(group), TOGETHER_PER_STEP):
            chosen = group[block:block + TOGETHER_PER_STEP]
            crcs[chosen] = _crc_together(data, starts[chosen], length)
    return crcs


TOGETHER_AT_LEAST = 64  # values of one length CRC'd together; fewer go to zlib one by one
TOGETHER_AT_MOST = 64  # bytes: a longer value's zlib call costs less than its bytes' steps (96: even)
TOGETHER_PER_STEP = 1 << 16  # values CRC'd together at once: their bytes stay in the CPU's cache


def _crc_table() -> np.ndarray:
    """The reflected CRC-32 (polynomial 0xEDB88320) tables of slicing-by-4: ``[k][b]`` is byte
    ``b``'s CRC pushed through ``k`` more zero bytes."""
    tables = np.zeros((4, 256), dtype=np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
        tables[0, byte] = crc
    for k in range(1, 4):
        tables[k] = (tables[k - 1] >> 8) ^ tables[0][tables[k - 1] & 0xFF]
    return tables


_CRC_TABLES = _crc_table()


def _crc_together(data: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """zlib's CRC-32 of the ``length`` bytes at each of ``starts`` in ``data``, all at once: one
    step per four byte positions (slicing-by-4), then one per byte left."""
    t0, t1, t2, t3 = _CRC_TABLES
    crc = np.full(len(starts), 0xFFFFFFFF, dtype=np.uint32)
    position = 0
    while position + 4 <= length:
        at = starts + position
        word = crc ^ (data[at].astype(np.uint32) | (data[at + 1].astype(np.uint32) << 8)
                      | (data[at + 2].astype(np.uint32) << 16) | (data[at + 3].astype(np.uint32) << 24))
        crc = t3[word & 0xFF] ^ t2[(word >> 8) & 0xFF] ^ t1[(word >> 16) & 0xFF] ^ t0[word >> 24]
        position += 4
    while position < length:
        crc = t0[(crc ^ data[starts + position]) & 0xFF] ^ (crc >> 8)
        position += 1
    return (crc ^ np.uint32(0xFFFFFFFF)).astype(U64)


# --- the operands ----------------------------------------------------------------------


def _one_chunk(values: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    return values


def _valid(array: pa.Array) -> np.ndarray:
    return np.asarray(pc.is_valid(array).to_numpy(zero_copy_only=False), dtype=bool)


def _integers(values: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """An integer (or BIT(1) boolean) column as int64 (0 where NULL) and its validity."""
    array = _one_chunk(values)
    if pa.types.is_boolean(array.type):
        array = array.cast(pa.int64())
    if not pa.types.is_integer(array.type):
        raise Unprintable(f"an integer column is {array.type} in silver")
    if pa.types.is_uint64(array.type):
        raise Unprintable("an unsigned 64-bit integer column")
    numbers = array.fill_null(0).cast(pa.int64()).to_numpy(zero_copy_only=False)
    return np.asarray(numbers, dtype=np.int64), _valid(array)


def _bigint_halves(col: ColumnInfo, values: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A BIGINT's low and high 32 bits (a signed one's two's complement; an unsigned one is a
    DECIMAL(20, 0) in silver) and its validity."""
    array = _one_chunk(values)
    valid = _valid(array)
    if pa.types.is_decimal(array.type):
        if array.type.scale != 0:
            raise Unprintable(f"column {col.name} is {array.type} in silver")
        bits = np.fromiter((0 if v is None else int(v) for v in array.to_pylist()), dtype=U64, count=len(array))
    elif pa.types.is_integer(array.type):
        bits = np.asarray(array.fill_null(0).cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64).view(U64)
    else:
        raise Unprintable(f"column {col.name} is {array.type} in silver")
    return bits & U64(LOW_BITS - 1), bits >> U64(32), valid


def _micros(array: pa.Array) -> pa.Array:
    """A TIMESTAMP as UTC microseconds since the epoch (int64)."""
    if not pa.types.is_timestamp(array.type):
        raise Unprintable(f"a TIMESTAMP column is {array.type} in silver")
    return pc.cast(array.cast(pa.timestamp("us", array.type.tz)), pa.int64())


def _datetime_text(array: pa.Array) -> pa.Array:
    """A DATETIME as ``yyyy-MM-dd HH:mm:ss.SSSSSS`` (always six fraction digits)."""
    if not pa.types.is_timestamp(array.type) or array.type.tz is not None:
        raise Unprintable(f"a DATETIME column is {array.type} in silver")
    micros = np.asarray(pc.cast(array.cast(pa.timestamp("us")), pa.int64()).fill_null(0)
                        .to_numpy(zero_copy_only=False), dtype=np.int64)
    # Floored, not truncated: 1969-12-31 23:59:59.999999 is -1 us.
    seconds = pa.array(micros // 1_000_000, type=pa.int64()).cast(pa.timestamp("s"))
    whole = pc.strftime(seconds, format="%Y-%m-%d %H:%M:%S")
    fraction = pc.utf8_slice_codeunits(pc.cast(pa.array(micros % 1_000_000 + 1_000_000), pa.string()), 1)
    text = pc.binary_join_element_wise(whole, fraction, ".")
    return pc.if_else(_valid(array), text, pa.scalar(None, pa.string()))


def _decimal_text(array: pa.Array) -> pa.Array:
    """A DECIMAL as plain positional text with its scale (``CAST AS CHAR``: ``-0.0100``)."""
    if not pa.types.is_decimal(array.type):
        raise Unprintable(f"a DECIMAL column is {array.type} in silver")
    return pa.array([None if v is None else format(v, "f") for v in array.to_pylist()], type=pa.string())


def _binary_float(array: pa.Array) -> pa.Array:
    """``[-]MpE`` of a FLOAT or DOUBLE (``|x| = M * 2**E``, M the integer significand), ``0``
    for zero: :func:`fingerprint._spark_binary_float`, from the exact frexp instead of a
    corrected logarithm."""
    if not pa.types.is_floating(array.type):
        raise Unprintable(f"a FLOAT or DOUBLE column is {array.type} in silver")
    x = np.asarray(array.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
    if not np.isfinite(x).all():
        raise Unprintable("a FLOAT or DOUBLE holds NaN or infinity")
    size = np.abs(x)
    _, exponent = np.frexp(size)
    exponent = np.maximum(exponent.astype(np.int64) - (SIGNIFICAND_BITS + 1), SMALLEST_EXPONENT)
    significand = np.ldexp(size, -exponent).astype(np.int64)  # exact: a power of two divides
    sign = pa.array(np.where(x < 0, "-", ""), type=pa.string())
    head = pc.binary_join_element_wise(sign, pc.cast(pa.array(significand), pa.string()), "")
    text = pc.binary_join_element_wise(head, pc.cast(pa.array(exponent), pa.string()), "p")
    text = pc.if_else(pa.array(size == 0), pa.scalar("0"), text)
    return pc.if_else(_valid(array), text, pa.scalar(None, pa.string()))
