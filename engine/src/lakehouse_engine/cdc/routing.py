"""A transaction's changes routed to the tables they belong to, as bronze rows, exactly once.

Each captured table takes the row changes after its own start position (those at or before it
are in bronze already), less those its snapshot's chunk reads already hold (the exactly-once
filter, :func:`after_watermarks`). A parent's delete or update is held for each child table that
derives its cascades (``cascading``). A problem the binlog reports for a table (statement-logged
DML, an incomplete row image) stops it, and every child whose cascades it hides.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from operator import itemgetter
from typing import Any

from ..errors import IngestError
from ..ops import Op
from ..source.keyorder import selected_key
from ..state.positions import MAX_ROW_INDEX, BinlogPosition, sequence
from . import cascading
from .binlog import RowImages, Transaction
from .bronzerows import BronzeRows
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
    events: dict[str, list[RowImages]] = {}
    for event in transaction.events:
        capture = by_source.get(event.table)
        if capture is not None and capture.failure is None and event.position > capture.start:
            events.setdefault(event.table, []).append(event)
    added = 0
    for table, mine in events.items():
        capture = by_source[table]
        try:
            new_rows = bronze_rows(capture, after_watermarks(capture, mine), run_id)
        except IngestError as exc:
            capture.fail(exc)
            continue
        capture.rows.extend(new_rows)
        added += len(new_rows)
    return added


def after_watermarks(capture: TableCapture, events: list[RowImages]) -> list[RowImages]:
    """Exactly-once: drop a change its chunk's snapshot read already contains (a change at or
    before the high watermark of the chunk its key falls in). An event some of whose images
    are dropped becomes one per run of images kept, each with its first row index."""
    progress = capture.checkpoint.snapshot
    if capture.locator is None or progress is None:
        return events
    # A chunk to be read again (a DDL came while it was read) will contain every change before
    # that read: drop them all until then.
    window = events if not progress.complete else [e for e in events if e.position <= progress.high_watermark]
    if not window:
        return events
    keys: list[tuple[Any, ...]] = []
    positions: list[BinlogPosition] = []
    for event in window:
        missing = [k for k in capture.schema.key if k not in event.columns]
        if missing:
            raise schema_changed(capture.spec.name, f"a row at {event.position} lacks key columns {missing}",
                                 event.position)
        pick = itemgetter(*(event.columns.index(k) for k in capture.schema.key))
        keys.extend(tuple(pick(image)) if len(capture.schema.key) > 1 else (pick(image),) for image in event.images)
        positions.extend([event.position] * len(event.images))
    stale = iter(read_with(capture, keys, positions))
    inside = {id(e) for e in window}
    kept: list[RowImages] = []
    for event in events:
        if id(event) not in inside:
            kept.append(event)
            continue
        run: list[int] = []  # indexes into the event's images of the run being kept
        for i in range(len(event.images)):
            if not next(stale):
                run.append(i)
                continue
            kept.extend(_run(event, run))
            run = []
        kept.extend(_run(event, run))
    return kept


def _run(event: RowImages, run: list[int]) -> list[RowImages]:
    """The images ``run`` (consecutive indexes) of ``event`` as an event of their own."""
    if not run:
        return []
    if len(run) == len(event.images):
        return [event]
    lo, hi = run[0], run[-1] + 1
    return [event._replace(ops=event.ops[lo:hi], images=event.images[lo:hi], first=event.first + lo)]


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


def bronze_rows(capture: TableCapture, events: Sequence[RowImages], run_id: str) -> BronzeRows:
    """The bronze rows of ``events``: each image's values in the table's column order, then the
    meta columns (:func:`meta_values`), a run of :class:`BronzeRows` per event. It bounds a
    catch-up's consuming thread: the meta values an event's rows share (its position, file and
    offset, its timestamp, the ingest time, the batch) are made once per event, and an image
    needs only its columns' conversions when its columns are the table's, in its order (checked
    once per layout: the reader shares one ``columns`` tuple between the events of a table map).
    The text columns the fast decoder read (``RowImages.texts``) need no conversion: an image of
    text and integers then goes into the batch as the reader made it (converting 458k changes of
    an 18-column table cost the consuming thread 1.5 s of a 12.4 s catch-up)."""
    batch = capture.checkpoint.batch + 1
    ingested = dt.datetime.now(dt.UTC)
    rows = BronzeRows()
    columns: tuple[str, ...] | None = None
    texts: tuple[str, ...] | None = None
    pick: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None = None
    convert: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None = None
    timestamp: int | None = None
    source_ts = ingested
    for event in events:
        position = event.position
        if event.columns is not columns:
            columns = event.columns
            pick = _picker(capture, columns, position)
        if event.texts is not texts:
            texts = event.texts
            convert = capture.converter(texts)
        last = event.first + len(event.images) - 1
        if event.first < 0 or last > MAX_ROW_INDEX:
            sequence(position, event.first if event.first < 0 else last)  # raises its ValueError
        if event.timestamp != timestamp:
            timestamp = event.timestamp
            source_ts = dt.datetime.fromtimestamp(timestamp, dt.UTC)
        # The first row's _seq as an int: Decimal sums round to 28 digits.
        seq = int(sequence(position)) + event.first
        images = event.images if pick is None else [pick(image) for image in event.images]
        values = images if convert is None else [convert(image) for image in images]
        rows.add(event.ops, seq, event_meta(position, source_ts, ingested, run_id, batch), values)
    return rows


def _picker(capture: TableCapture, columns: tuple[str, ...],
            position: BinlogPosition) -> Callable[[tuple[Any, ...]], tuple[Any, ...]] | None:
    """How to lay an image with ``columns`` out in the table's column order: None when it is
    already; under ``on_schema_change: ignore`` cut to the lake's columns (missing: NULL);
    otherwise other columns than the table's stop it."""
    names = capture.schema.column_names
    if columns == names:
        return None
    if not capture.project and set(columns) != set(names):
        raise schema_changed(capture.spec.name, f"a row at {position} has columns {sorted(columns)}", position)
    at = {c: i for i, c in enumerate(columns)}
    where = tuple(at.get(n) for n in names)
    return lambda image: tuple(None if i is None else image[i] for i in where)


def meta(capture: TableCapture, op: Op, position: BinlogPosition, row_index: int, timestamp: int,
         run_id: str) -> tuple[Any, ...]:
    """The bronze meta columns (``bronze.META_FIELDS``) of a change, in the batch the table commits next."""
    return meta_values(op, sequence(position, row_index), position, dt.datetime.fromtimestamp(timestamp, dt.UTC),
                       dt.datetime.now(dt.UTC), run_id, capture.checkpoint.batch + 1)


def meta_values(op: Op | str, seq: Decimal, position: BinlogPosition, source_ts: dt.datetime,
                ingested: dt.datetime, run_id: str, batch: int) -> tuple[Any, ...]:
    """``bronze.META_FIELDS``' values, in their order (the one place that knows it, with
    :func:`event_meta` and the loop of :func:`bronze_rows`, which put ``op`` and ``seq`` first)."""
    return (op, seq, *event_meta(position, source_ts, ingested, run_id, batch))


def event_meta(position: BinlogPosition, source_ts: dt.datetime, ingested: dt.datetime, run_id: str,
               batch: int) -> tuple[Any, ...]:
    """The meta values after ``_op`` and ``_seq``: the same for every row of an event."""
    return (position.file, position.offset, source_ts, ingested, run_id, batch)
