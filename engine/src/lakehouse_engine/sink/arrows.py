"""Canonical rows to Arrow record batches, the form Spark takes without per-row conversion.

Spark's Python-to-JVM path for Python tuples verifies and converts every value in Python and
pickles every row; an Arrow batch crosses as columns. Values must already be canonical (what
:mod:`typemap` converters return): this module only lays them out in the Arrow type Spark
expects for each column's Spark type, and refuses a value that would not fit rather than
coercing it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema


def arrow_schema(schema: T.StructType) -> pa.Schema:
    """The Arrow schema Spark reads for ``schema`` (timestamps as UTC microseconds)."""
    return to_arrow_schema(schema, timestamp_utc=True)


def columns_to_batch(columns: Sequence[Sequence[Any]], schema: pa.Schema) -> pa.RecordBatch:
    """One batch from per-column value lists, in ``schema``'s field order."""
    arrays = [pa.array(values, type=field.type, from_pandas=False)
              for values, field in zip(columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def rows_to_batch(rows: Sequence[tuple[Any, ...]], schema: pa.Schema) -> pa.RecordBatch:
    """One batch from row tuples (each in ``schema``'s field order)."""
    if not rows:
        return pa.RecordBatch.from_pylist([], schema=schema)
    return columns_to_batch(list(zip(*rows, strict=True)), schema)
