"""Arrow columns that repeat one value, laid out from buffers.

A snapshot chunk's change metadata (its operation, watermark, run and batch) is one value per
column for the whole chunk. ``pa.array`` or ``pa.scalar`` would import pandas into the Spark
worker (:mod:`..arrowcolumns` says why that matters), so the one value is laid out by
:func:`..arrowcolumns.column` and repeated with a take.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..arrowcolumns import column


def repeated(value: object, kind: pa.DataType, length: int) -> pa.Array:
    """``length`` copies of ``value`` as an Arrow array of type ``kind``."""
    return single(value, kind).take(_zeros(length))


def single(value: object, kind: pa.DataType) -> pa.Array:
    """``value`` as a one-element array of type ``kind`` (None: a null of that type)."""
    if value is None:
        return pa.nulls(1, kind)
    return column([value], kind)


def _zeros(length: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int32(), length, [None, pa.py_buffer(np.zeros(length, dtype=np.int32))])
