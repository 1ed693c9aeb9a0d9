"""A transaction's changes routed to the tables they belong to, as bronze rows, exactly once.

Each captured table takes the row changes after its own start position (those at or before it
are in bronze already), less those its snapshot's chunk reads already hold (the exactly-once
filter, :func:`after_watermarks`). A parent's delete or update is held for each child table that
derives its cascades (``cascading``). A problem the binlog reports for a table (statement-logged
DML, an incomplete row image) stops it, and every child whose cascades it hides.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from ..errors import IngestError
from ..ops import Op
from ..source.keyorder import selected_key
from ..state.positions import MAX_ROW_INDEX, BinlogPosition, sequence
from . import cascading
from .binlog import RowChange, Transaction
from .tablecapture import TableCapture, schema_changed, table_stopped


def route(transaction: Transaction, by_source: Mapping[str, TableCapture], run_id: str) -> int:
    """Route ``transaction`` to the tables of ``by_source`` (by source table name); returns how
    many rows were buffered and parent changes held (both bound a flush)."""
    _stop_on_problems(transaction, by_source)
    return _hold_parent_changes(transaction, by_source) + _buffer_rows(transaction, by_source, run_id)


def _stop_on_problems(transaction: Transaction, by_source: Mapping[str, TableCapture]) -> None:
    for problem in transaction.problems:
        capture = by_source.get(problem.table)
        if capture is not None and capture.failure is None and problem.position > capture.start:
            capture.fail(table_stopped(capture.spec.name, f"{problem.reason} at {problem.position}", problem.position))
        for child in by_source.values():  # a parent's change unknown: so is its cascade
            if (child.failure is None and problem.position > child.start
                    and any(c.parent_table == problem.table for c in child.cascades)):
                child.fail(table_stopped(
                    child.spec.name, f"its cascades cannot be derived: parent {problem.table}: {problem.reason} "
                    f"at {problem.position}", problem.position))


def _hold_parent_changes(transaction: Transaction, by_source: Mapping[str, TableCapture]) -> int:
    held = 0
    for parent_change in transaction.parent_changes:
        for child in by_source.values():
            if child.failure is not None or parent_change.position <= child.start:
                continue
            for cascade in child.cascades:
                if cascade.parent_table == parent_change.table:
                    action = cascading.action(cascade, parent_change)
                    if action is not None:
                        child.pending.append(cascading.Pending(cascade, parent_change, action))
                        held += 1
    return held


def _buffer_rows(transaction: Transaction, by_source: Mapping[str, TableCapture], run_id: str) -> int:
    changes: dict[str, list[RowChange]] = {}
    for change in transaction.changes:
        capture = by_source.get(change.table)
        if capture is not None and capture.failure is None and change.position > capture.start:
            changes.setdefault(change.table, []).append(change)
    added = 0
    for table, rows in changes.items():
        capture = by_source[table]
        try:
            new_rows = bronze_rows(capture, after_watermarks(capture, rows), run_id)
        except IngestError as exc:
            capture.fail(exc)
            continue
        capture.rows.extend(new_rows)
        added += len(new_rows)
    return added


def after_watermarks(capture: TableCapture, changes: list[RowChange]) -> list[RowChange]:
    """Exactly-once: drop a change its chunk's snapshot read already contains (a change at or
    before the high watermark of the chunk its key falls in)."""
    progress = capture.checkpoint.snapshot
    if capture.locator is None or progress is None:
        return changes
    # A chunk to be read again (a DDL came while it was read) will contain every change before
    # that read: drop them all until then.
    window = changes if not progress.complete else [c for c in changes if c.position <= progress.high_watermark]
    if not window:
        return changes
    keys = [tuple(c.values[k] for k in capture.schema.key) for c in window]
    stale = {id(change) for change, gone in zip(window, read_with(capture, keys, [c.position for c in window]),
                                               strict=True) if gone}
    return [c for c in changes if id(c) not in stale]


def read_with(capture: TableCapture, keys: Sequence[tuple[Any, ...]],
              positions: Sequence[BinlogPosition]) -> list[bool]:
    """For each key (values of the key columns), whether its chunk's snapshot read holds the
    change at the position beside it: the chunk was read at or after it, or is still to be read."""
    progress = capture.checkpoint.snapshot
    if capture.locator is None or progress is None:
        return [False] * len(keys)
    chunks = capture.locator.locate([selected_key(capture.schema.key_columns, k) for k in keys])
    stale = []
    for position, chunk in zip(positions, chunks, strict=True):
        if progress.complete and position > progress.high_watermark:  # after every chunk's read
            stale.append(False)
            continue
        read_at = progress.done.get(chunk.index)
        stale.append(read_at is None or position <= read_at)
    return stale


def bronze_rows(capture: TableCapture, changes: Sequence[RowChange], run_id: str) -> list[tuple[Any, ...]]:
    """The bronze rows of ``changes``: each one's values in the table's column order, then the
    meta columns (:func:`meta_values`). One loop, since it bounds a catch-up's consuming
    thread: the meta values that rows share (an event's position and ``_seq`` base, a
    transaction's timestamp, the ingest time, the batch) are made once, not per row."""
    names = capture.schema.column_names
    expected = frozenset(names)
    convert = capture.convert
    batch = capture.checkpoint.batch + 1
    ingested = dt.datetime.now(dt.UTC)
    rows: list[tuple[Any, ...]] = []
    position: BinlogPosition | None = None
    base = 0  # the event's _seq with row index 0, as an int: Decimal sums round to 28 digits
    timestamp: int | None = None
    source_ts = ingested
    for change in changes:
        values = change.values
        if capture.project:
            values = {n: values.get(n) for n in names}
        if values.keys() != expected:
            raise schema_changed(capture.spec.name, f"a row at {change.position} has columns "
                                 f"{sorted(values)}", change.position)
        if change.position is not position:
            position = change.position
            base = int(sequence(position))
        if not 0 <= change.row_index <= MAX_ROW_INDEX:
            sequence(position, change.row_index)  # raises its ValueError
        if change.timestamp != timestamp:
            timestamp = change.timestamp
            source_ts = dt.datetime.fromtimestamp(timestamp, dt.UTC)
        rows.append((*convert(values), *meta_values(change.op, Decimal(base + change.row_index), position, source_ts,
                                                    ingested, run_id, batch)))
    return rows


def meta(capture: TableCapture, op: Op, position: BinlogPosition, row_index: int, timestamp: int,
         run_id: str) -> tuple[Any, ...]:
    """The bronze meta columns (``bronze.META_FIELDS``) of a change, in the batch the table commits next."""
    return meta_values(op, sequence(position, row_index), position, dt.datetime.fromtimestamp(timestamp, dt.UTC),
                       dt.datetime.now(dt.UTC), run_id, capture.checkpoint.batch + 1)


def meta_values(op: Op, seq: Decimal, position: BinlogPosition, source_ts: dt.datetime, ingested: dt.datetime,
                run_id: str, batch: int) -> tuple[Any, ...]:
    """``bronze.META_FIELDS``' values, in their order (the one place that knows it)."""
    return (op, seq, position.file, position.offset, source_ts, ingested, run_id, batch)
