"""Typed Arrow columns from the text protocol's bytes, exactly as pymysql and typemap give them.

Each column gets one converter, built once per chunk. The exact path is the reference: pymysql's
own decoding of the field (its charset, then its decoder for the field type) followed by
:func:`typemap.select_converter`, value by value, which is precisely what a pymysql cursor plus
the row converter produce. The fast path parses the server's text with one vectorized Arrow cast
per block, for the types whose text Arrow parses to the same value (integers, DECIMAL up to 38
digits, DOUBLE and FLOAT, DATE, DATETIME, TIMESTAMP in the session's UTC, text and binary
strings). A block the fast path cannot parse (a zero date, say) or whose values lie outside what
the exact path can represent (year 0) goes through the exact path instead, so both always agree;
the unit tests compare them value by value.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..arrowcolumns import column
from . import canonical
from .introspect import ColumnInfo
from .resultset import ResultColumn
from .typemap import SMALL_INTS, Convert, select_converter, select_step

ColumnConverter = Callable[[pa.Array], pa.Array]

INTEGER_KINDS = SMALL_INTS | {"int", "bigint", "year"}
# Python's datetime cannot hold year 0 (which MariaDB can store): pymysql then returns the text
# and typemap maps it to NULL. The fast path defers any block reaching below 0001-01-01.
MIN_DAYS = -719_162  # 0001-01-01 in days since 1970-01-01
MIN_MICROS = MIN_DAYS * 86_400 * 1_000_000
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)


def column_converter(col: ColumnInfo, result: ResultColumn, target: pa.DataType) -> ColumnConverter:
    """Raw text-protocol values of ``col`` (an Arrow binary array) to ``target`` values."""
    exact = partial(exact_values, select_converter(col), result, target)
    fast = fast_path(col, result, target)
    if fast is None:
        return exact
    return partial(_fast_or_exact, fast, exact)


def exact_values(step: Convert, result: ResultColumn, target: pa.DataType, raw: pa.Array) -> pa.Array:
    """What a pymysql cursor and the row converter give, value by value (the reference)."""
    encoding, decode = result.encoding, result.converter
    out: list[Any] = []
    for value in raw.to_pylist():
        if value is not None:
            if encoding is not None:
                value = value.decode(encoding)
            if decode is not None:
                value = decode(value)
        out.append(step(value))
    return column(out, target)  # not pa.array: that would import pandas into the worker


def fast_path(col: ColumnInfo, result: ResultColumn, target: pa.DataType) -> ColumnConverter | None:
    """A vectorized converter for ``col``, or None when only the exact path is right for it."""
    kind = col.data_type
    step = select_step(col)
    text = result.encoding is not None
    if kind in INTEGER_KINDS and (pa.types.is_integer(target) or pa.types.is_decimal(target)):
        return partial(_parse, target)
    if kind == "decimal" and pa.types.is_decimal(target):
        return partial(_parse, target)
    if kind == "double" and pa.types.is_float64(target):
        return partial(_parse, target)
    if kind == "float" and pa.types.is_float32(target):  # read as DOUBLE, see typemap
        return _float32
    if kind == "date" and pa.types.is_date32(target):
        return partial(_temporal, target, MIN_DAYS)
    if kind in {"datetime", "timestamp"} and pa.types.is_timestamp(target):
        return partial(_temporal, target, MIN_MICROS)
    if step is canonical.as_text and text and pa.types.is_string(target):
        return _utf8
    if step is canonical.as_bytes and not text and pa.types.is_binary(target):
        return _binary
    return None


def _fast_or_exact(fast: ColumnConverter, exact: ColumnConverter, raw: pa.Array) -> pa.Array:
    try:
        return fast(raw)
    except _ARROW_ERRORS:
        return exact(raw)


def _parse(target: pa.DataType, raw: pa.Array) -> pa.Array:
    return raw.cast(pa.string()).cast(target)


def _float32(raw: pa.Array) -> pa.Array:
    # float64 -> float32 rounds to nearest like struct.pack('<f'); never out of range here.
    return raw.cast(pa.string()).cast(pa.float64()).cast(pa.float32(), safe=False)


def _temporal(target: pa.DataType, lowest: int, raw: pa.Array) -> pa.Array:
    parsed = raw.cast(pa.string())
    if pa.types.is_timestamp(target) and target.tz is not None:
        # TIMESTAMP text is in the session's zone, UTC: parse as wall time, then label it UTC.
        parsed = parsed.cast(pa.timestamp(target.unit)).cast(target)
    else:
        parsed = parsed.cast(target)
    storage = parsed.cast(pa.int32() if pa.types.is_date32(target) else pa.int64())
    smallest = pc.min(storage).as_py()
    if smallest is not None and smallest < lowest:
        raise pa.ArrowInvalid("a value before 0001-01-01: the exact path maps it")
    return parsed


def _utf8(raw: pa.Array) -> pa.Array:
    return raw.cast(pa.string())  # validates UTF-8, as pymysql's strict decode does


def _binary(raw: pa.Array) -> pa.Array:
    return raw
