"""Arrow columns that repeat one value, laid out from buffers.

A snapshot chunk's change metadata (its operation, watermark, run and batch) is one value per
column for the whole chunk. Building such a column with ``pa.array`` or ``pa.scalar`` would be
simplest, but pyarrow's conversion from Python objects first imports pandas (to recognise pandas
objects), whether or not pandas is ever used: in a Spark worker that is 0.26 s of CPU and about
48 MB of memory for each Python worker of a snapshot, which otherwise never imports pandas (its
columns come off the wire as buffers, :mod:`..source.resultset`). So the common types are laid
out here from their bytes; any other type takes ``pa.array``.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def repeated(value: object, kind: pa.DataType, length: int) -> pa.Array:
    """``length`` copies of ``value`` as an Arrow array of type ``kind``."""
    return single(value, kind).take(_zeros(length))


def single(value: object, kind: pa.DataType) -> pa.Array:
    """``value`` as a one-element array of type ``kind`` (None: a null of that type)."""
    if value is None:
        return pa.nulls(1, kind)
    if pa.types.is_integer(kind) and isinstance(value, int) and not isinstance(value, bool):
        dtype = np.dtype(f"{'i' if pa.types.is_signed_integer(kind) else 'u'}{kind.bit_width // 8}")
        return _fixed(kind, np.array([value], dtype=dtype).tobytes())
    if pa.types.is_decimal128(kind) and _whole(value):
        unscaled = int(value) * 10 ** kind.scale  # type: ignore[call-overload]
        if len(str(abs(unscaled))) <= kind.precision:
            return _fixed(kind, unscaled.to_bytes(16, "little", signed=True))
    if pa.types.is_timestamp(kind) and isinstance(value, dt.datetime) and value.tzinfo is not None:
        ticks = (value - _EPOCH) // dt.timedelta(microseconds=1) * _PER_SECOND[kind.unit] // 1_000_000
        return _fixed(kind, np.array([ticks], dtype=np.int64).tobytes())
    if (pa.types.is_string(kind) and isinstance(value, str)) or (pa.types.is_binary(kind) and isinstance(value, bytes)):
        data = value.encode() if isinstance(value, str) else value
        offsets = np.array([0, len(data)], dtype=np.int32).tobytes()
        return pa.Array.from_buffers(kind, 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return pa.array([value], type=kind)


def _whole(value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, Decimal) and value == value.to_integral_value())


def _fixed(kind: pa.DataType, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(kind, 1, [None, pa.py_buffer(data)])


def _zeros(length: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int32(), length, [None, pa.py_buffer(np.zeros(length, dtype=np.int32))])
