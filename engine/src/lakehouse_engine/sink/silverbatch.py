"""The bronze batches a silver MERGE applies: held in memory when they can be, and their facts.

A batch this process just committed to bronze (``recent``), or a small one read back, is merged
from the driver's memory (Arrow): its facts need no Spark job and the MERGE reads it in each pass
without going back to bronze. The facts (row count, snapshot rows only, key bounds) choose how
silver takes the batch and bound the MERGE's target to the batch's keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..identifiers import quote_ident
from ..ops import Op

# Key types whose min/max may bound the MERGE's target: Spark orders them consistently with its
# equality and Delta's statistics of them are exact (not strings, whose statistics are
# truncated prefixes, nor floats with NaN, nor timestamps, kept at millisecond precision).
RANGE_KEY_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType, T.DateType)


@dataclass(frozen=True)
class BatchFacts:
    """What the MERGE needs to know of the bronze rows it applies, from one aggregate."""

    rows: int
    snapshot_only: bool  # every row is a snapshot row (_op = 'r')
    key_bounds: tuple[tuple[str, Any, Any], ...]  # (key column, min, max) of range-able keys


def in_memory(changes: DataFrame, recent: Mapping[int, pa.Table] | None, done: int, upto: int,
              limit: int) -> pa.Table | None:
    """Batches ``(done, upto]`` as Arrow, in ``changes``' column order: from ``recent`` when it
    holds every one of them, else read when there are at most ``limit`` rows (else ``None``)."""
    rows = held(recent, done, upto)
    if rows is None:
        rows = collect_small(changes, limit)
    # Batches are laid out in the source's column order; bronze's may differ (a column added
    # by a DDL is last in bronze, wherever the source put it).
    return rows.select(changes.columns) if rows is not None else None


def held(recent: Mapping[int, pa.Table] | None, done: int, upto: int) -> pa.Table | None:
    """Batches ``(done, upto]`` from ``recent``, when it holds every one of them."""
    wanted = range(done + 1, upto + 1)
    if not recent or any(batch not in recent for batch in wanted):
        return None
    return pa.concat_tables([recent[batch] for batch in wanted])


def collect_small(changes: DataFrame, limit: int) -> pa.Table | None:
    """The batch's rows as Arrow, when there are at most ``limit`` of them (else ``None``)."""
    rows = changes.limit(limit + 1).toArrow()
    return rows if rows.num_rows <= limit else None


def arrow_facts(rows: pa.Table, key: Sequence[str], schema: T.StructType) -> BatchFacts:
    """:func:`batch_facts` of rows in memory."""
    types = {f.name: f.dataType for f in schema.fields}
    bounds = []
    for k in key:
        if isinstance(types[k], RANGE_KEY_TYPES):
            low, high = (v.as_py() for v in pc.min_max(rows[k]).values())
            if low is not None:
                bounds.append((k, low, high))
    snapshot_only = rows.num_rows == 0 or bool(pc.all(pc.equal(rows["_op"], Op.READ.value)).as_py())
    return BatchFacts(rows=rows.num_rows, snapshot_only=snapshot_only, key_bounds=tuple(bounds))


def batch_facts(changes: DataFrame, key: Sequence[str]) -> BatchFacts:
    """Row count, whether all rows are snapshot rows, and the bounds of range-able key columns."""
    types = {f.name: f.dataType for f in changes.schema.fields}
    bounded = [k for k in key if isinstance(types[k], RANGE_KEY_TYPES)]
    aggregates = [F.count(F.lit(1)), F.max((F.col("_op") != Op.READ.value).cast("int"))]
    for k in bounded:
        aggregates += [F.min(F.col(quote_ident(k))), F.max(F.col(quote_ident(k)))]
    row = changes.agg(*aggregates).first()
    assert row is not None  # a global aggregate always yields one row
    bounds = tuple((k, row[2 + 2 * i], row[3 + 2 * i]) for i, k in enumerate(bounded))
    return BatchFacts(rows=int(row[0]), snapshot_only=not row[1],
                      key_bounds=tuple(b for b in bounds if b[1] is not None))
