"""Arrow columns from Python values, laid out from buffers.

``pa.array`` is the simple way to turn canonical Python values into an Arrow column, but
pyarrow's conversion from Python objects (and from numpy) first imports pandas, to recognise
pandas objects, whether or not pandas is ever used: in a Spark worker that is 0.26 s of CPU and
about 48 MB of memory for each Python worker, which a snapshot otherwise never needs (its
columns come off the wire as buffers, :mod:`..source.resultset`). The types the type mapping
produces (:mod:`.source.typemap`) are therefore laid out here from their bytes, with numpy.

The result must equal ``pa.array(values, type=kind)``, or be refused as pyarrow refuses it: a
value this module does not lay out exactly (another Python type than the canonical one, a
decimal with more fractional digits than its scale, a string column past 2 GiB) sends the whole
column to pyarrow's own conversion, which then decides.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_NAIVE_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DAY = dt.date(1970, 1, 1)
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_MICROSECOND = dt.timedelta(microseconds=1)
_MAX_OFFSET = 2**31 - 1  # string and binary (not large_) offsets are int32


class _NotLaidOut(Exception):
    """A value this module does not lay out exactly: pyarrow converts the column instead."""


def column(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    """``values`` (canonical Python values, None for null) as an Arrow array of type ``kind``."""
    layout = _layout(kind)
    if layout is not None:
        try:
            return layout(values, kind)
        except _NotLaidOut:
            pass
    return pa.array(values, type=kind, from_pandas=False)


def mask(flags: Sequence[bool]) -> pa.Array:
    """A boolean array of ``flags`` (a filter mask)."""
    return _booleans(flags, None, 0)


def _layout(kind: pa.DataType) -> Callable[[Sequence[Any], pa.DataType], pa.Array] | None:
    if pa.types.is_integer(kind):
        return _integers
    if pa.types.is_floating(kind) and kind.bit_width in (32, 64):
        return _floats
    if pa.types.is_boolean(kind):
        return _bools
    if pa.types.is_decimal128(kind):
        return _decimals
    if pa.types.is_timestamp(kind):
        return _timestamps
    if pa.types.is_date32(kind):
        return _dates
    if pa.types.is_string(kind) or pa.types.is_binary(kind):
        return _variable
    return None


def _validity(values: Sequence[Any]) -> tuple[pa.Buffer | None, int]:
    """The validity bitmap (None when nothing is null) and the null count."""
    valid = [v is not None for v in values]
    nulls = len(valid) - sum(valid)
    if not nulls:
        return None, 0
    return pa.py_buffer(np.packbits(np.array(valid, dtype=np.bool_), bitorder="little").tobytes()), nulls


def _fixed(kind: pa.DataType, length: int, validity: pa.Buffer | None, nulls: int, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(kind, length, [validity, pa.py_buffer(data)], null_count=nulls)


def _only(values: Sequence[Any], accepted: Callable[[Any], bool]) -> None:
    if not all(v is None or accepted(v) for v in values):
        raise _NotLaidOut


def _integers(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    _only(values, lambda v: v.__class__ is int)
    validity, nulls = _validity(values)
    dtype = np.dtype(f"{'i' if pa.types.is_signed_integer(kind) else 'u'}{kind.bit_width // 8}")
    try:
        data = np.array([0 if v is None else v for v in values], dtype=dtype)
    except OverflowError:
        raise _NotLaidOut from None  # pyarrow refuses it with its own message
    return _fixed(kind, len(values), validity, nulls, data.tobytes())


def _floats(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    _only(values, lambda v: v.__class__ is float)
    validity, nulls = _validity(values)
    dtype = np.float32 if kind.bit_width == 32 else np.float64
    if dtype is np.float32 and not all(v is None or float(np.float32(v)) == v or v != v for v in values):
        raise _NotLaidOut  # not exactly a float32: pyarrow decides how to narrow it
    data = np.array([0.0 if v is None else v for v in values], dtype=dtype)
    return _fixed(kind, len(values), validity, nulls, data.tobytes())


def _bools(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    _only(values, lambda v: v.__class__ is bool)
    validity, nulls = _validity(values)
    return _booleans([v is True for v in values], validity, nulls)


def _booleans(flags: Sequence[bool], validity: pa.Buffer | None, nulls: int) -> pa.Array:
    data = np.packbits(np.array(flags, dtype=np.bool_), bitorder="little").tobytes()
    return _fixed(pa.bool_(), len(flags), validity, nulls, data)


def _decimals(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    validity, nulls = _validity(values)
    limit = 10**kind.precision
    data = bytearray()
    for value in values:
        unscaled = 0 if value is None else _unscaled(value, kind.scale)
        if not -limit < unscaled < limit:
            raise _NotLaidOut
        data += unscaled.to_bytes(16, "little", signed=True)
    return _fixed(kind, len(values), validity, nulls, bytes(data))


def _unscaled(value: Any, scale: int) -> int:
    """``value`` times 10**scale, exactly (no decimal context: a 38-digit value stays whole)."""
    if value.__class__ is int:
        return int(value) * _ten(scale)
    if not isinstance(value, Decimal) or not value.is_finite():
        raise _NotLaidOut
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # finite
    whole = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    if shift < 0:
        whole, dropped = divmod(whole, _ten(-shift))
        if dropped:
            raise _NotLaidOut  # more fractional digits than the scale
    else:
        whole *= _ten(shift)
    return -whole if sign else whole


def _ten(power: int) -> int:
    """10**power for a power >= 0 (typed: ``int ** int`` may be a float)."""
    return int(10**power)


def _timestamps(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    aware = kind.tz is not None
    if aware and kind.tz not in ("UTC", "+00:00"):
        raise _NotLaidOut
    _only(values, lambda v: v.__class__ is dt.datetime and (v.tzinfo is not None) == aware)
    epoch = _EPOCH if aware else _NAIVE_EPOCH
    per_second = _PER_SECOND[kind.unit]
    if per_second > 1_000_000:
        scale: Callable[[int], int] = lambda us: us * (per_second // 1_000_000)  # noqa: E731
    else:
        scale = lambda us: us // (1_000_000 // per_second)  # noqa: E731 - floors, as pyarrow truncates
    validity, nulls = _validity(values)
    ticks = [0 if v is None else scale((v - epoch) // _MICROSECOND) for v in values]
    return _fixed(kind, len(values), validity, nulls, np.array(ticks, dtype=np.int64).tobytes())


def _dates(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    _only(values, lambda v: v.__class__ is dt.date)
    validity, nulls = _validity(values)
    days = [0 if v is None else (v - _EPOCH_DAY).days for v in values]
    return _fixed(kind, len(values), validity, nulls, np.array(days, dtype=np.int32).tobytes())


def _variable(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    text = pa.types.is_string(kind)
    _only(values, (lambda v: v.__class__ is str) if text else (lambda v: v.__class__ is bytes))
    validity, nulls = _validity(values)
    try:
        pieces = [b"" if v is None else (v.encode() if text else v) for v in values]
    except UnicodeEncodeError:
        raise _NotLaidOut from None  # a lone surrogate: pyarrow refuses it with its own message
    offsets = np.zeros(len(pieces) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in pieces], out=offsets[1:])
    if offsets[-1] > _MAX_OFFSET:
        raise _NotLaidOut
    buffers = [validity, pa.py_buffer(offsets.astype(np.int32).tobytes()), pa.py_buffer(b"".join(pieces))]
    return pa.Array.from_buffers(kind, len(pieces), buffers, null_count=nulls)
