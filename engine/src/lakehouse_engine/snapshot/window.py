"""Window-watermark chunk reads (Netflix DBLog, Flink CDC): a chunk's rows made exact without a
read view that knows its binlog position (MySQL community, or ``snapshot_mode: window``).

A chunk is read between a low and a high watermark (binlog positions). Its rows are then some
state of the table between the two. Replaying the binlog ``(low, high]`` for the chunk's key
range onto them makes them exactly the state at the high watermark: row images are complete, so
an insert or update puts its after image and a delete removes the row, and the last change of a
key wins whatever the SELECT had already seen. The chunk then records the high watermark as
its position, like a consistent-snapshot read records its read view's, and everything after it
(the exactly-once filter, reading chunks again after a DDL) works unchanged.

The low watermark must not be later than any transaction the SELECT misses. The binlog is
written before the storage engine makes a transaction visible, so a position read just before
the SELECT can already include a transaction the SELECT does not see. Replaying from an earlier
position is always harmless, so the driver takes as a batch's low watermark a position it read
at least ``LOW_MARGIN_S`` earlier (or at the run's start): a transaction would have to wait that
long between its binlog write and its engine commit to be missed. This is a margin, not a
proof: without writing to the source there is no exact test on MySQL.

Within a batch, each Spark task reads its chunks one after the other (:class:`TaskWindows`): a
later chunk's low watermark is one of the task's own earlier high watermarks, read at least the
same margin before its SELECT, and the task decodes the binlog once for all its windows. Under a
steady writer a chunk's replay is then bounded by the margin plus its own read time; with the
batch's low watermark for every chunk, the chunks read last replayed the whole batch so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pymysql

from ..arrowcolumns import column, mask
from ..cdc.binlog import BinlogSource, RowChange, Transaction
from ..cdc.passes import ShortRead, transactions_through
from ..config.project import SnapshotMode, SourceProfile
from ..errors import FatalError, SourceUnavailableError
from ..ops import Op
from ..source.connection import connection, current_position
from ..source.introspect import TableSchema
from ..source.keyorder import SortKeys, selected_key, within
from ..source.serverids import FIRST_TASK, ServerIds
from ..source.typemap import row_converter
from ..state.positions import BinlogPosition
from .chunking import Chunk, KeyValue


@dataclass(frozen=True)
class WindowHooks:
    """Statements run by ``writer`` at two points of one chunk's window (tests inject writes
    there, as Flink CDC's snapshot-phase hooks do)."""

    writer: SourceProfile
    chunk: int  # the chunk's index
    after_low: tuple[str, ...] = ()  # before the SELECT, after the low watermark
    before_high: tuple[str, ...] = ()  # after the SELECT, before the high watermark


@dataclass(frozen=True)
class Window:
    """What a task needs to read its chunk in a window."""

    low: BinlogPosition
    server_id: int  # the task's own binlog reader id (two readers with one id evict each other)
    read_timeout_s: float
    hooks: WindowHooks | None = None

    def for_task(self, slot: int, server_ids: tuple[int, int]) -> Window:
        """This window for the ``slot``-th task of a batch: its own server id from the range,
        past the one the run's own binlog reader took (``self.server_id``; ``source.serverids``)."""
        ids = ServerIds.of(server_ids)
        return replace(self, server_id=ids.at(FIRST_TASK + slot, pid=self.server_id - ids.low))


# How much older than the batch a low watermark is. A transaction can be in the binlog while the
# engine does not show it yet (fsync, group commit delays, a semi-sync wait for a replica, 10 s
# by MySQL's default timeout); replaying from earlier only costs reading more binlog.
LOW_MARGIN_S = 10.0


class LowWatermarks:
    """Binlog positions the driver sampled, and the low watermark for a batch: the newest one
    sampled at least ``margin_s`` ago, else the oldest one (the run's first)."""

    def __init__(self, margin_s: float = LOW_MARGIN_S, clock: Callable[[], float] = time.monotonic):
        self._margin_s = margin_s
        self._clock = clock
        self._samples: list[tuple[float, BinlogPosition]] = []

    def sample(self, position: BinlogPosition) -> None:
        self._samples.append((self._clock(), position))

    def seed(self, position: BinlogPosition) -> None:
        """A position known to be at least ``margin_s`` old already (the batch's low watermark)."""
        self._samples.insert(0, (float("-inf"), position))

    def low(self) -> BinlogPosition:
        if not self._samples:
            raise ValueError("no position sampled yet")
        cutoff = self._clock() - self._margin_s
        old = [i for i, (at, _) in enumerate(self._samples) if at <= cutoff]
        if old:
            del self._samples[: old[-1]]  # never needed again: a later sample is old enough
        return self._samples[0][1]


class TaskWindows:
    """One Spark task's window reads, chunk after chunk (the task's chunks are read one after the
    other on one connection).

    - Each chunk's low watermark is the newest position this task read at least ``margin_s``
      before the chunk's SELECT (its earlier chunks' high watermarks), else the batch's: the same
      margin argument as the batch's own (:class:`LowWatermarks`), so the replay of a chunk read
      late in a long batch no longer starts at the batch's beginning.
    - The binlog is read once for all of them: the transactions read for one chunk's window stay
      in memory for the next window, which overlaps it, and only what lies past the last high
      watermark is read. Transactions before the current low watermark are dropped.

    Under a steady writer a chunk's replay is then about ``margin_s`` plus its own read time of
    binlog, where it was the whole batch's so far; the binlog is decoded once per task."""

    def __init__(self, batch_low: BinlogPosition, margin_s: float = LOW_MARGIN_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lows = LowWatermarks(margin_s, clock)
        self._lows.seed(batch_low)
        self._read: list[Transaction] = []  # every transaction of (``_from``, ``_until``]
        self._from: BinlogPosition | None = None
        self._until: BinlogPosition | None = None

    def low(self) -> BinlogPosition:
        """The next chunk's low watermark (asked right before its SELECT)."""
        return self._lows.low()

    def read_to(self, high: BinlogPosition) -> None:
        """A high watermark this task read (a position, sampled now)."""
        self._lows.sample(high)

    def transactions(self, low: BinlogPosition, high: BinlogPosition,
                     read: Callable[[BinlogPosition, BinlogPosition], Iterable[Transaction]]) -> list[Transaction]:
        """The transactions of ``(low, high]``, reading only what was not read before (``read``
        gives every transaction of a range, or raises)."""
        if self._from is None or self._until is None or not self._from <= low <= self._until:
            self._read, self._from, self._until = [], low, low
        if high > self._until:
            self._read.extend(read(self._until, high))
            self._until = high
        # Lows only grow: what ends at or before this one is never asked for again.
        self._read, self._from = [t for t in self._read if t.end > low], low
        return [t for t in self._read if t.end <= high]


def resolve(mode: SnapshotMode, reports_positions: Callable[[], bool]) -> SnapshotMode:
    """The mode a run reads chunks in: ``auto`` becomes consistent where the source reports
    read-view positions (``reports_positions``, asked only then), window elsewhere."""
    if mode is not SnapshotMode.AUTO:
        return mode
    return SnapshotMode.CONSISTENT if reports_positions() else SnapshotMode.WINDOW


def run_hook(profile: SourceProfile, statements: Sequence[str]) -> None:
    if not statements:
        return
    with connection(profile) as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
        conn.commit()


def read_in_window(conn: pymysql.connections.Connection, profile: SourceProfile, table: TableSchema,
                   chunk: Chunk, window: Window, select: Callable[[], pa.Table],
                   task: TaskWindows | None = None) -> tuple[pa.Table, BinlogPosition]:
    """The chunk's rows as they are at its high watermark, and that watermark. ``select`` reads
    the chunk (on ``conn``) as a table of the source's columns; ``task``: the windows of the
    task's chunks read before this one (else the chunk reads from the batch's low watermark)."""
    low = window.low if task is None else task.low()
    hooks = window.hooks if window.hooks is not None and window.hooks.chunk == chunk.index else None
    if hooks is not None:
        run_hook(hooks.writer, hooks.after_low)
    rows = select()
    if hooks is not None:
        run_hook(hooks.writer, hooks.before_high)
    high = current_position(conn)
    if task is not None:
        task.read_to(high)
    if high == low:  # nothing was written meanwhile
        return rows, high

    def read(start: BinlogPosition, stop: BinlogPosition) -> list[Transaction]:
        source = BinlogSource(profile, window.server_id, table.schema, {table.table: tuple(table.key)},
                              read_timeout=window.read_timeout_s)
        return list(_read_up_to(source, start, stop, table.table, chunk.index))

    window_transactions = read(low, high) if task is None else task.transactions(low, high, read)
    changes = changes_in(window_transactions, table.table, chunk.index)
    convert = row_converter(table, "binlog")
    names = set(table.column_names)

    def images(values: list[dict[str, Any]]) -> pa.Table:
        if any(set(image) != names for image in values):
            raise SourceUnavailableError(
                f"table {table.table}: a binlog row image in snapshot chunk {chunk.index}'s window has other "
                "columns than the table had when this run started; run again", table=table.table)
        converted = [convert(v) for v in values]
        # Laid out from buffers, not with pa.array: that would import pandas into the Spark
        # worker (arrowcolumns.py), which a window's replay otherwise never needs.
        columns = [column([row[i] for row in converted], field.type) for i, field in enumerate(rows.schema)]
        return pa.Table.from_batches([pa.RecordBatch.from_arrays(columns, schema=rows.schema)])

    sort_keys = SortKeys(conn, table.key_columns)

    def in_chunk(keys: list[KeyValue]) -> list[bool]:
        return within(chunk, sort_keys, [selected_key(table.key_columns, k) for k in keys])

    return replay(rows, table.key, changes, images, in_chunk), high


def _read_up_to(source: BinlogSource, low: BinlogPosition, high: BinlogPosition, table: str,
                chunk: int) -> Iterator[Transaction]:
    """The transactions of ``(low, high]``, all of them: a replay that missed the last ones
    would record the chunk at ``high`` without them, and the binlog phase would drop them too."""
    try:
        yield from transactions_through(source, low, high)
    except ShortRead as exc:
        raise SourceUnavailableError(
            f"table {table}: the binlog read for snapshot chunk {chunk} stopped at {exc.position}, before "
            f"the chunk's high watermark {high}; run again", table=table) from None


def changes_in(transactions: Iterable[Transaction], table: str, chunk: int) -> Iterator[RowChange]:
    """The row changes of ``table`` in the window's transactions, in binlog order. A DDL or a
    change the binlog does not describe fully makes the chunk unreadable in this window."""
    for transaction in transactions:
        for problem in transaction.problems:
            if problem.table == table:
                raise FatalError(f"table {table}: {problem.reason} (at {problem.position})", table=table)
        for ddl in transaction.schema_changes:
            if ddl.table == table:
                raise SourceUnavailableError(
                    f"table {table}: a DDL at {ddl.position} came while snapshot chunk {chunk} was "
                    "read; run again: the DDL is applied first, then the chunk is read again", table=table)
        yield from transaction.changes_of(table)


def replay(
    rows: pa.Table,
    key: Sequence[str],
    changes: Iterable[RowChange],
    images: Callable[[list[dict[str, Any]]], pa.Table],
    in_chunk: Callable[[list[KeyValue]], list[bool]],
) -> pa.Table:
    """``rows`` (a chunk as its SELECT saw it) with ``changes`` (the window's, in binlog order)
    applied: the chunk as it is at the window's end.

    The last change of each key wins: a delete removes the key's row, an insert or update puts
    its after image, if the key falls in the chunk (``in_chunk``, in the source's collation). A
    key-changing update arrives as a delete of the old key and an update of the new one.
    ``images`` turns row images into rows of ``rows``' schema, so keys compare as the same Arrow
    values on both sides."""
    last: dict[KeyValue, RowChange] = {}  # folded as they stream in: one change per key is kept
    for change in changes:
        last[tuple(change.values[k] for k in key)] = change
    if not last:
        return rows
    finals = list(last.values())
    put = [inside and c.op is not Op.DELETE for c, inside in zip(finals, in_chunk(list(last)), strict=True)]
    # Every key a change touched leaves the SELECT's rows, compared as the Arrow values the
    # images convert to (the SELECT's rows went through the same conversion); the images to
    # put take their place.
    touched = images([c.values for c in finals])
    gone = set(zip(*(touched.column(k).to_pylist() for k in key), strict=True))
    kept = [k not in gone for k in zip(*(rows.column(k).to_pylist() for k in key), strict=True)]
    return pa.concat_tables([rows.filter(mask(kept)), touched.filter(mask(put))])
