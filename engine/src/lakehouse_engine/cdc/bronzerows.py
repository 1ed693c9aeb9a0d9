"""A table's bronze rows buffered for its next batch: data as row tuples, meta columns by run.

Every row of a binlog event shares its meta values but two: ``_op`` (one letter per row) and
``_seq`` (the event's base plus the row index). Row tuples holding all eight, turned into Arrow
value by value, cost the catch-up's consuming thread more than the data columns themselves
(a 50k-row batch of an 18-column table: 0.10 s for the 8 meta columns, 0.06 s for the 18 data
columns; the Decimal and the two timestamps most). :class:`BronzeRows` keeps one *run* per
event instead (its op letters, its first ``_seq``, and the other meta values once) and builds
the meta columns of a batch with a few vectorized steps: the op letters as one string buffer,
``_seq`` as 128-bit integers computed in numpy, the rest as one value per run taken per row.

The meta columns' order is :func:`routing.meta_values`': ``_op``, ``_seq``, then the values a
run shares (``routing.event_meta``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from ..sink.arrows import columns_to_batch

_WORD = 1 << 64


@dataclass(frozen=True)
class Run:
    """Consecutive rows that share their meta values but ``_op`` and ``_seq``: ``_seq`` is
    ``seq`` for the first and one more for each next."""

    ops: str  # one ``Op`` letter per row
    seq: int
    shared: tuple[Any, ...]  # the meta values after ``_op`` and ``_seq``


class BronzeRows:
    """Bronze rows in binlog order: each one's data values (the table's columns, canonical) and
    the meta values of its run."""

    def __init__(self) -> None:
        self.values: list[tuple[Any, ...]] = []
        self.runs: list[Run] = []

    def __len__(self) -> int:
        return len(self.values)

    def __bool__(self) -> bool:
        return bool(self.values)

    def add(self, ops: str, seq: int, shared: tuple[Any, ...], values: Sequence[tuple[Any, ...]]) -> None:
        """Rows of one run: ``values[i]``'s op is ``ops[i]``, its ``_seq`` is ``seq + i``."""
        if len(ops) != len(values):
            raise ValueError(f"{len(ops)} op letters for {len(values)} rows")
        if values:
            self.values.extend(values)
            self.runs.append(Run(ops, seq, shared))

    def add_rows(self, rows: Iterable[tuple[Any, ...]], width: int) -> None:
        """Whole bronze rows (``width`` data values, then every meta value), a run each."""
        for row in rows:
            self.add(row[width], int(row[width + 1]), tuple(row[width + 2:]), [tuple(row[:width])])

    def extend(self, other: BronzeRows) -> None:
        self.values.extend(other.values)
        self.runs.extend(other.runs)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        """Each row whole: its data values, then its meta values (``_seq`` as a Decimal)."""
        values = iter(self.values)
        for run in self.runs:
            for i, op in enumerate(run.ops):
                yield (*next(values), op, Decimal(run.seq + i), *run.shared)

    def to_arrow(self, schema: pa.Schema, width: int) -> pa.Table:
        """The rows as one Arrow table of ``schema``: ``width`` data columns, then the meta columns."""
        if not self.values:
            return pa.Table.from_batches([pa.RecordBatch.from_pylist([], schema=schema)])
        data = columns_to_batch(list(zip(*self.values, strict=True)), pa.schema(list(schema)[:width]))
        counts = np.fromiter((len(run.ops) for run in self.runs), dtype=np.int64, count=len(self.runs))
        of_row = np.repeat(np.arange(len(self.runs), dtype=np.int64), counts)
        meta = [_ops(self.runs, len(self.values)), _seqs(self.runs, counts, of_row, schema.field(width + 1).type)]
        taken = pa.array(of_row)
        shared = zip(*(run.shared for run in self.runs), strict=True)
        meta += [pa.array(column, type=field.type, from_pandas=False).take(taken)
                 for column, field in zip(shared, list(schema)[width + 2:], strict=True)]
        return pa.Table.from_arrays([*data.columns, *meta], schema=schema)


def _ops(runs: Sequence[Run], rows: int) -> pa.Array:
    """The op letters (ASCII, one byte each) as one string array over one buffer."""
    letters = "".join(run.ops for run in runs).encode("ascii")
    if len(letters) != rows:
        raise ValueError("an op is not one ASCII letter")
    offsets = np.arange(rows + 1, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(letters)])


def _seqs(runs: Sequence[Run], counts: np.ndarray, of_row: np.ndarray, kind: pa.DataType) -> pa.Array:
    """Each row's ``_seq`` (its run's first plus its place in the run) as a decimal of scale 0:
    little-endian 128-bit integers, the low word carried into the high one."""
    first = [divmod(run.seq, _WORD) for run in runs]
    if any(high >= 1 << 63 or high < 0 for high, _ in first):
        raise ValueError("a _seq does not fit 127 bits")
    high = np.fromiter((h for h, _ in first), dtype=np.uint64, count=len(runs))
    low = np.fromiter((lo for _, lo in first), dtype=np.uint64, count=len(runs))
    starts = np.cumsum(counts) - counts
    within = (np.arange(len(of_row), dtype=np.int64) - starts[of_row]).astype(np.uint64)
    words = np.empty((len(of_row), 2), dtype=np.uint64)
    words[:, 0] = low[of_row] + within  # wraps modulo 2**64, as a carry does
    words[:, 1] = high[of_row] + (words[:, 0] < low[of_row])
    return pa.Array.from_buffers(kind, len(of_row), [None, pa.py_buffer(words)])
