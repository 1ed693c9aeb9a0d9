"""The binlog phase: one reader for every selected table, committed per table to bronze.

Each table keeps its own position. A DDL is applied to the table's bronze at its exact position
(``cdc.evolution``, ``sink.evolve``), or, per the table's ``on_schema_change``, stops it or is
ignored. A table whose changes cannot be known (a DDL that cannot be applied exactly,
statement-logged DML, incomplete row images, a column mismatch, a failed commit) is stopped on its own: its
buffered rows are dropped uncommitted, so its checkpoint stays at the last good commit, and the
other tables go on. A lost connection is retried with backoff from the last transaction read.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import pyarrow as pa
import pymysql
from pyspark.sql import SparkSession

from .. import failures
from ..config.defaults import DEFAULTS
from ..config.project import Delivery, Layer, ProjectConfig, SchemaPolicy
from ..errors import TABLE, FatalError, IngestError, SourceUnavailableError
from ..logs import FILE_ONLY, PROGRESS
from ..ops import Op
from ..sink import bronze, evolve, history
from ..sink.silver import HELD_ROWS
from ..snapshot.chunking import ChunkLocator, SortKeys, selected_key
from ..source import ddl as ddl_text
from ..source.cascades import Cascade
from ..source.connection import binlog_sizes, gtid_position_at, query
from ..source.introspect import TableSchema, describe_table
from ..source.serverids import ServerIds
from ..source.typemap import binlog_converter, described_schema, row_converter, spark_schema
from ..state.checkpoint import Checkpoint, Phase, SnapshotProgress
from ..state.lakechange import Kind, LakeChange
from ..state.positions import BinlogPosition, after_transaction, bytes_behind, sequence
from ..tables import CascadePolicy, TableSpec
from . import cascading
from .binlog import BinlogSource, RowChange, SchemaChange, Transaction
from .evolution import plan
from .feed import BinlogFeed
from .passes import transactions_through
from .prefetch import ProcessPrefetcher

log = logging.getLogger(__name__)
# The line that opens every catch-up; follow mode keeps it in the log file (its own cycle line
# says the same on the console).
READING = "binlog: reading %s .. %s"


@dataclass(frozen=True)
class RetryPolicy:
    """How the binlog reader survives a dropped connection or a server that stops answering."""

    attempts: int = 5
    first_backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    read_timeout_s: float = DEFAULTS.binlog_read_timeout_s

    def backoff(self, attempt: int) -> float:
        return float(min(self.max_backoff_s, self.first_backoff_s * 2 ** (attempt - 1)))


@dataclass
class TableCapture:
    """Binlog-phase state of one table during a catch-up."""

    spec: TableSpec
    schema: TableSchema
    checkpoint: Checkpoint
    start: BinlogPosition  # changes at or before this are already in bronze
    locator: ChunkLocator | None  # set while binlog changes may fall inside a chunk's window
    convert: Callable[[dict[str, Any]], tuple[Any, ...]]
    # Follow mode: a catch-up that found none of this table's rows may leave its checkpoint
    # where it is (see ``CatchUp._flush``) instead of committing an empty batch.
    hold_idle: bool = False
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    failure: IngestError | None = None
    binlog_rows: int = 0
    # The bronze batches committed by this catch-up since silver last took them, as written (at
    # most about silver.HELD_ROWS rows): silver then merges them without reading bronze back.
    recent: dict[int, pa.Table] = field(default_factory=dict)
    # on_schema_change='ignore': rows are cut to the lake's columns (missing: NULL).
    project: bool = False
    # on_cascade='apply': the foreign keys whose cascades it derives, and the parent changes of
    # the rows buffered that cascade into it (resolved when they are committed: ``cascading``).
    cascades: tuple[Cascade, ...] = ()
    pending: list[cascading.Pending] = field(default_factory=list)


# A DDL that may add, drop or change a foreign key.
FOREIGN_KEY_DDL = re.compile(r"\b(FOREIGN\s+KEY|REFERENCES|DROP\s+CONSTRAINT)\b", re.IGNORECASE)
# Columns of the lake's own, which a source column must never take (nor overwrite in a rewrite).
LAKE_COLUMNS = frozenset({*bronze.META_COLUMNS, *history.CHANGE_META, *history.HISTORY_META, "_rank", "_at"})


def table_stopped(table: str, detail: str, position: BinlogPosition | None = None) -> FatalError:
    return FatalError(
        f"table {table}: {detail}; nothing was written past the last checkpoint; re-snapshot with "
        f"`make ingest TABLE={table} FULL_REFRESH=1`",
        table=table, position=str(position) if position is not None else None,
    )


def schema_changed(table: str, detail: str, position: BinlogPosition | None = None) -> FatalError:
    return table_stopped(table, f"schema change ({detail}) cannot be applied", position)


def resume_position(checkpoint: Checkpoint) -> BinlogPosition | None:
    """Where the binlog phase of a table resumes: every change at or before it is in bronze
    (``None`` while no snapshot chunk is done)."""
    if checkpoint.position is not None:
        return checkpoint.position
    progress = checkpoint.snapshot
    if progress is not None and progress.done:
        return progress.low_watermark
    return None


def new_capture(conn: pymysql.connections.Connection, spec: TableSpec, schema: TableSchema,
                checkpoint: Checkpoint, delivery: Delivery, *, read_to: BinlogPosition | None = None,
                hold_idle: bool = False, cascades: tuple[Cascade, ...] = ()) -> TableCapture:
    """``read_to``: how far this process already read the binlog past the checkpoint without
    finding a row of the table (an idle advance held in memory); reading resumes there."""
    progress = checkpoint.snapshot
    start = resume_position(checkpoint)
    if start is None:
        raise FatalError(f"table {spec.name}: checkpoint has neither a position nor chunks", table=spec.name)
    if read_to is not None and read_to > start:
        start = read_to
    locator = None
    if delivery == Delivery.EXACTLY_ONCE and progress is not None and (
            start < progress.high_watermark or not progress.complete):
        locator = ChunkLocator(progress.chunks, SortKeys(conn, schema.key_columns))
    return TableCapture(spec, schema, checkpoint, start, locator, row_converter(schema, "binlog"),
                        hold_idle=hold_idle, project=spec.on_schema_change is SchemaPolicy.IGNORE, cascades=cascades)


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


def read_transactions(source: BinlogSource, start: BinlogPosition, stop: BinlogPosition) -> Iterator[Transaction]:
    """The reader process's work (a module-level function, so that it pickles): every
    transaction up to ``stop``, since the catch-up records the range as read (follow mode's idle
    tables then read on from ``stop``)."""
    return transactions_through(source, start, stop)


def transaction_weight(transaction: Transaction) -> int:
    return len(transaction.changes) + 1


def purged_tables(conn: pymysql.connections.Connection, captures: Sequence[TableCapture]) -> list[TableCapture]:
    """Tables whose resume position lies in a binlog file the server no longer has."""
    try:
        files = {str(row[0]) for row in query(conn, "SHOW BINARY LOGS")}
    except pymysql.err.MySQLError:
        return []  # no privilege to list them: the reader reports a purged position itself
    return [c for c in captures if c.start.file not in files]


class CatchUp:
    """Reads the binlog from the lowest table position to ``stop`` and commits each table."""

    def __init__(self, config: ProjectConfig, spark: SparkSession, run_id: str, retry: RetryPolicy,
                 gtid_known: tuple[BinlogPosition, str] | None = None, feed: BinlogFeed | None = None,
                 merge_silver: Callable[[TableCapture], None] | None = None):
        """``gtid_known``: a binlog position and the GTID position there, from an earlier catch-up
        (asking the server costs it a read of the binlog file up to the position). ``feed``: a
        binlog reader kept across catch-ups (follow mode), instead of one per catch-up.
        ``merge_silver``: merges a table's batches held in ``recent`` into silver (see
        :meth:`_hold`); without it, silver reads batches beyond what may be held from bronze."""
        self.config = config
        self.feed = feed
        self.merge_silver = merge_silver
        self.spark = spark
        self.run_id = run_id
        self.retry = retry
        # The GTID position at the last transaction read (its end, and the position there), kept
        # up to date from each transaction's GTID; None where unknown.
        self._gtid: tuple[BinlogPosition, str] | None = gtid_known

    def run(self, conn: pymysql.connections.Connection, captures: Sequence[TableCapture],
            stop: BinlogPosition, stop_seen_at: float | None = None) -> None:
        """Catch every capture up to ``stop``; failures are recorded on the capture.
        ``stop_seen_at``: the Unix time ``stop`` was the source's head, recorded as the
        ``synced_at`` of each table's checkpoint once the whole range is read."""
        for capture in purged_tables(conn, captures):
            self._fail(capture, table_stopped(
                capture.spec.name, f"its binlog position {capture.start} is no longer on the source "
                "(purged)", capture.start))
        active = [c for c in captures if c.failure is None]
        if not active:
            return
        start = min(c.start for c in active)
        by_source = {c.schema.table: c for c in active}
        if start >= stop:  # nothing to read; a table that never recorded synced_at records it now
            self._flush(by_source, start, final=True, synced_at=stop_seen_at)
            return
        if self._gtid is None or self._gtid[0] != start:
            known = gtid_position_at(conn, start)
            self._gtid = (start, known) if known is not None else None
        source = BinlogSource(
            self.config.source, server_id(self.config), self.config.source.database,
            {c.schema.table: c.schema.key for c in active}, read_timeout=self.retry.read_timeout_s,
            parents={cascade.parent_table for c in active for cascade in c.cascades},
        )
        log.info(READING, start, stop, extra=PROGRESS)
        sizes = binlog_sizes(conn) if start.file != stop.file else {}
        position = start
        buffered = 0
        read_rows = 0
        started = time.monotonic()
        try:
            for transaction in self._transactions(source, start, stop):
                if transaction.schema_changes:
                    self._schema_changes(conn, transaction, by_source, position)
                routed = self._route(transaction, by_source)
                buffered += routed
                read_rows += routed
                position = transaction.end
                self._gtid = self._gtid_after(transaction)
                if buffered >= self.config.defaults.flush_rows:
                    self._flush(by_source, position)
                    buffered = 0
                    elapsed = max(time.monotonic() - started, 1e-6)
                    log.info("binlog: at %s, %s bytes to %s, %d rows, %.0f rows/s, %.0f s in", position,
                             f"{bytes_behind(position, stop, sizes):,}", stop, read_rows, read_rows / elapsed,
                             elapsed, extra=PROGRESS)
        except IngestError as exc:
            # The stream itself failed (after retries): every table it served stops here, with
            # what was read so far committed, since each transaction routed so far is complete.
            self._flush(by_source, position, final=True)
            for capture in by_source.values():
                if capture.failure is None:
                    self._fail(capture, exc)
            return
        # The whole range is read: every table is complete up to the moment ``stop`` was the head.
        self._flush(by_source, max(position, start), final=True, synced_at=stop_seen_at)

    def _transactions(self, source: BinlogSource, start: BinlogPosition,
                      stop: BinlogPosition) -> Iterator[Transaction]:
        """Transactions in ``(start, stop]``, reconnecting with backoff from the last one read."""
        position = start
        attempt = 0
        while True:
            try:
                reader: Iterable[Transaction]
                if self.feed is not None:
                    reader = self.feed.transactions(source, position, stop)
                else:
                    reader = ProcessPrefetcher(partial(read_transactions, source, position, stop),
                                               weight=transaction_weight)
                for transaction in reader:
                    attempt = 0
                    position = transaction.end
                    yield transaction
                return
            except SourceUnavailableError as exc:
                attempt += 1
                if attempt >= self.retry.attempts:
                    raise
                pause = self.retry.backoff(attempt)
                log.warning("binlog: %s; retry %d/%d from %s in %.1f s", exc, attempt,
                            self.retry.attempts - 1, position, pause)
                time.sleep(pause)

    def _schema_changes(self, conn: pymysql.connections.Connection, transaction: Transaction,
                        by_source: dict[str, TableCapture], before: BinlogPosition) -> None:
        """Apply a DDL to each captured table it changes, after committing that table's rows up
        to ``before`` (the end of the previous transaction)."""
        for change in transaction.schema_changes:
            capture = by_source.get(change.table)
            if capture is None or capture.failure is not None or transaction.end <= capture.start:
                continue
            try:
                self._schema_change(conn, capture, change, transaction, before)
            except Exception as exc:  # this table stops; the others go on
                self._fail(capture, as_table_error(exc, capture.spec.name, self.config.lake_root))

    def _schema_change(self, conn: pymysql.connections.Connection, capture: TableCapture, change: SchemaChange,
                       transaction: Transaction, before: BinlogPosition) -> None:
        name = capture.spec.name
        what = f"{change.statement[:200]!r} at {change.position}"
        if capture.spec.on_cascade is CascadePolicy.APPLY and FOREIGN_KEY_DDL.search(change.statement):
            # The cascades applied are those the run began with: from here on they may be others.
            raise table_stopped(name, f"schema change {what} may change the foreign keys whose cascades it applies "
                                "(on_cascade='apply')", change.position)
        policy = capture.spec.on_schema_change
        if policy is SchemaPolicy.STOP:
            raise table_stopped(name, f"schema change {what} (the table module sets on_schema_change='stop')",
                                change.position)
        if policy is SchemaPolicy.IGNORE:
            log.warning("%s: schema change %s ignored (on_schema_change='ignore'): the lake keeps its columns, "
                        "a column the source added is left out, one it removed is NULL from now on", name, what)
            capture.project = True
            return
        # Chunks read at or after the DDL's position hold rows the DDL already changed, read with
        # the columns the run started with.
        progress = capture.checkpoint.snapshot
        read_after = sorted(i for i, at in (progress.done if progress else {}).items() if at >= transaction.end)
        if read_after and not capture.spec.followed:
            raise schema_changed(name, f"{what}, while the snapshot's chunks were read", change.position)
        parsed = ddl_text.parse(change.statement)
        path = self.config.table_path(Layer.BRONZE, name)
        if parsed.truncate:
            self._commit_before(capture, before)
            checkpoint = self._ddl_checkpoint(capture, change, transaction)
            assert progress is not None or not read_after
            evolve.truncate_bronze(self.spark, path, capture.schema.key, checkpoint, transaction.end,
                                   transaction.timestamp or 0, self.run_id,
                                   [sequence(progress.done[i]) for i in read_after] if progress else [])
            log.info("%s: TRUNCATE at %s recorded (silver is emptied there)", name, change.position)
        else:
            now = describe_table(conn, self.config.source.database, capture.schema.table, capture.spec.key)
            evolution = plan(capture.schema, parsed, now, LAKE_COLUMNS)
            if isinstance(evolution, str):
                raise schema_changed(name, f"{what}: {evolution}", change.position)
            if not evolution.changes:
                log.info("%s: schema change %s changes no column (%s)", name, what, "; ".join(parsed.ignored))
                return
            self._commit_before(capture, before)
            checkpoint = replace(self._ddl_checkpoint(capture, change, transaction),
                                 schema_changes=evolution.changes)
            if read_after:
                assert progress is not None
                checkpoint = self._read_again(capture, checkpoint, progress, read_after, what)
            evolve.evolve_bronze(self.spark, path, checkpoint.schema_changes, described_schema(evolution.schema),
                                 checkpoint, self.config.defaults.table_features)
            capture.schema = evolution.schema
            capture.convert = row_converter(evolution.schema, "binlog")
            log.info("%s: schema change %s applied to bronze (%s)", name, what,
                     ", ".join(f"{c.kind.value} {c.column}" for c in evolution.changes))
        capture.checkpoint = checkpoint
        capture.start = transaction.end
        capture.recent.clear()  # silver reads bronze from here on: its batches changed shape

    @staticmethod
    def _read_again(capture: TableCapture, checkpoint: Checkpoint, progress: SnapshotProgress,
                    chunks: Sequence[int], what: str) -> Checkpoint:
        """``checkpoint`` with ``chunks`` to be read again, and their rows removed from the lake
        (by the same commit as the schema change: their ``_seq`` is their read's watermark)."""
        seqs = sorted({str(sequence(progress.done[i])) for i in chunks})
        pending = replace(progress, done={i: at for i, at in progress.done.items() if i not in set(chunks)})
        log.info("%s: schema change %s came while the snapshot was read: %d chunk(s) read after it are read "
                 "again with the new columns", capture.spec.name, what, len(chunks))
        forget = LakeChange(Kind.FORGET, "_seq", value=",".join(seqs))
        return replace(checkpoint, phase=Phase.SNAPSHOT, snapshot=pending,
                       schema_changes=(*checkpoint.schema_changes, forget))

    def _commit_before(self, capture: TableCapture, before: BinlogPosition) -> None:
        if capture.rows or capture.pending:
            self._flush({capture.schema.table: capture}, before)
            if capture.failure is not None:
                raise capture.failure

    def _ddl_checkpoint(self, capture: TableCapture, change: SchemaChange, transaction: Transaction) -> Checkpoint:
        gtid = self._gtid_text(self._gtid_after(transaction), transaction.end)
        return replace(capture.checkpoint.advanced_to(transaction.end, self.run_id, gtid=gtid),
                       ddl=change.statement[:200])

    @staticmethod
    def _gtid_text(at: tuple[BinlogPosition, str] | None, position: BinlogPosition) -> str | None:
        """The GTID position ``at`` holds for ``position``: None when it holds another position's,
        or none logged yet."""
        if at is None or at[0] != position:
            return None
        return at[1] or None

    def _gtid_after(self, transaction: Transaction) -> tuple[BinlogPosition, str] | None:
        """The GTID position once ``transaction`` (the next one read) is logged."""
        if self._gtid is None:
            return None
        after = after_transaction(self._gtid[1], transaction.gtid)
        return (transaction.end, after) if after is not None else None

    @property
    def gtid_position(self) -> tuple[BinlogPosition, str] | None:
        """The last binlog position read and the GTID position there, when known."""
        return self._gtid

    def _route(self, transaction: Transaction, by_source: dict[str, TableCapture]) -> int:
        for problem in transaction.problems:
            capture = by_source.get(problem.table)
            if capture is not None and capture.failure is None and problem.position > capture.start:
                self._fail(capture, table_stopped(capture.spec.name, f"{problem.reason} at {problem.position}",
                                                         problem.position))
            for child in by_source.values():  # a parent's change unknown: so is its cascade
                if (child.failure is None and problem.position > child.start
                        and any(c.parent_table == problem.table for c in child.cascades)):
                    self._fail(child, table_stopped(
                        child.spec.name, f"its cascades cannot be derived: parent {problem.table}: {problem.reason} "
                        f"at {problem.position}", problem.position))
        added = 0  # rows buffered, and parent changes held to derive rows from (both bound a flush)
        for parent_change in transaction.parent_changes:
            for child in by_source.values():
                if child.failure is not None or parent_change.position <= child.start:
                    continue
                for cascade in child.cascades:
                    if cascade.parent_table == parent_change.table:
                        action = cascading.action(cascade, parent_change)
                        if action is not None:
                            child.pending.append(cascading.Pending(cascade, parent_change, action))
                            added += 1
        changes: dict[str, list[RowChange]] = {}
        for change in transaction.changes:
            capture = by_source.get(change.table)
            if capture is not None and capture.failure is None and change.position > capture.start:
                changes.setdefault(change.table, []).append(change)
        for table, rows in changes.items():
            capture = by_source[table]
            try:
                new_rows = [self._bronze_row(capture, change) for change in after_watermarks(capture, rows)]
            except IngestError as exc:
                self._fail(capture, exc)
                continue
            capture.rows.extend(new_rows)
            added += len(new_rows)
        return added

    def _bronze_row(self, capture: TableCapture, change: RowChange) -> tuple[Any, ...]:
        if capture.project:
            change = replace(change, values={n: change.values.get(n) for n in capture.schema.column_names})
        if len(change.values) != len(capture.schema.columns) or any(
            name not in change.values for name in capture.schema.column_names
        ):
            raise schema_changed(capture.spec.name, f"a row at {change.position} has columns "
                                 f"{sorted(change.values)}", change.position)
        values = capture.convert(change.values)
        return (*values, *self._meta(capture, change.op, change.position, change.row_index, change.timestamp))

    def _meta(self, capture: TableCapture, op: Op, position: BinlogPosition, row_index: int,
              timestamp: int) -> tuple[Any, ...]:
        """The bronze meta columns (``bronze.META_FIELDS``) of a change."""
        return (
            op,
            sequence(position, row_index),
            position.file,
            position.offset,
            dt.datetime.fromtimestamp(timestamp, dt.UTC),
            dt.datetime.now(dt.UTC),
            self.run_id,
            capture.checkpoint.batch + 1,
        )

    def _derive_cascades(self, capture: TableCapture) -> None:
        """Add to ``capture.rows`` the changes its pending parent changes cascade into it."""
        pending, capture.pending = capture.pending, []
        schema = capture.schema
        convert = {c.name: binlog_converter(c) for c in schema.columns}
        wanted: dict[Cascade, set[tuple[Any, ...]]] = {}
        for p in pending:
            old = tuple(cascading.normal(convert[c](p.change.before[pc]))
                        for c, pc in zip(p.cascade.columns, p.cascade.parent_columns, strict=True))
            wanted.setdefault(p.cascade, set()).add(old)
        current = cascading.candidates(self.spark, self.config.table_path(Layer.BRONZE, capture.spec.name),
                                       schema.column_names, schema.key, wanted)
        derived = cascading.derive(
            schema.column_names, schema.key, current, capture.rows, pending, convert,
            lambda op, change, index: self._meta(capture, op, change.position, index, change.timestamp),
            stale=None if capture.locator is None else lambda keys, at: read_with(capture, keys, [at] * len(keys)))
        if derived:
            log.info("%s: %d row(s) changed by %d cascading parent change(s) derived", capture.spec.name,
                     len(derived), len(pending))
        capture.rows.extend(derived)

    def _flush(self, by_source: dict[str, TableCapture], position: BinlogPosition, *,
               final: bool = False, synced_at: float | None = None) -> None:
        """Commit each table's buffered rows with ``position`` as its new checkpoint.

        A table without rows commits only its advance, and only at the end of the catch-up
        (a flush in between has nothing to save for it), unless its advance is held."""
        for capture in by_source.values():
            # Once per table (after its snapshot, or a checkpoint older than synced_at): an empty
            # commit, so its freshness is known from the first catch-up on, not only after a change.
            first_sync = synced_at is not None and capture.checkpoint.synced_at is None
            # Also once when its last chunks were read (again, after a DDL) and nothing followed
            # them: the commit ends its snapshot phase.
            must = first_sync or (final and capture.checkpoint.phase is Phase.SNAPSHOT
                                  and capture.checkpoint.snapshot is not None and capture.checkpoint.snapshot.complete)
            if capture.failure is not None or (position <= capture.start and not capture.rows and not must
                                               and not capture.pending):
                continue
            if capture.pending:
                try:
                    self._derive_cascades(capture)
                except Exception as exc:  # this table stops; the others go on
                    self._fail(capture, as_table_error(exc, capture.spec.name, self.config.lake_root))
                    continue
            target = max(position, capture.start)
            if not capture.rows and not must and (not final or idle_advance_held(capture, target)):
                continue
            gtid = self._gtid_text(self._gtid, target)
            checkpoint = capture.checkpoint.advanced_to(target, self.run_id, synced_at, gtid)
            try:
                written = bronze.append_rows(self.spark, self.config.table_path(Layer.BRONZE, capture.spec.name),
                                             capture.rows, bronze.bronze_schema(spark_schema(capture.schema)),
                                             checkpoint)
            except Exception as exc:  # one table's failed commit never stops the others
                self._fail(capture, as_table_error(exc, capture.spec.name, self.config.lake_root))
                continue
            capture.binlog_rows += len(capture.rows)
            capture.checkpoint = checkpoint
            capture.start = target
            capture.rows = []
            if capture.locator is not None and checkpoint.snapshot is None:
                capture.locator = None
            self._hold(capture, checkpoint.batch, written)

    def _hold(self, capture: TableCapture, batch: int, written: pa.Table) -> None:
        """Keep the bronze batch just committed for silver. Once the held batches reach
        ``HELD_ROWS`` rows, a table past its snapshot has them merged into silver now (from memory,
        in Arrow unless the table needs Delta's MERGE, while the reader process decodes on), so a
        long catch-up holds a bounded number of rows and never leaves silver a batch too big to
        merge from memory. During the snapshot silver takes nothing but snapshot rows
        (``reader._seeds_silver``): the held batches are dropped and silver reads them from
        bronze at the end."""
        capture.recent[batch] = written
        if sum(t.num_rows for t in capture.recent.values()) < HELD_ROWS:
            return
        past_snapshot = capture.checkpoint.phase is Phase.BINLOG and capture.locator is None
        if self.merge_silver is not None and past_snapshot:
            self.merge_silver(capture)
        capture.recent.clear()

    @staticmethod
    def _fail(capture: TableCapture, error: IngestError) -> None:
        log.error("%s: stopped: %s", capture.spec.name, error)
        capture.failure = error
        capture.rows = []  # uncommitted: the checkpoint stays at the last good commit
        capture.pending = []



def server_id(config: ProjectConfig) -> int:
    """The replica server id this process's own binlog reader uses (``source.serverids``)."""
    return ServerIds.of(config.server_ids).own()


def idle_advance_held(capture: TableCapture, target: BinlogPosition) -> bool:
    """Whether a table with no new rows keeps its checkpoint instead of committing ``target``.

    Only in follow mode (``hold_idle``), only in the binlog phase, and never across a binlog
    file: the committed position then stays in the file being written, so purging older files
    never strands the table. The advance is not lost: follow mode reads on from it in memory
    (``new_capture(read_to=)``), and a restarted run re-reads a range with none of its rows."""
    durable = capture.checkpoint.position
    return capture.hold_idle and durable is not None and durable.file == target.file


def as_table_error(exc: BaseException, table: str, lake_root: str | None = None) -> IngestError:
    """An error to record against ``table``: engine errors as they are, Spark errors translated
    to one line, anything else as one line (its details go to the log). An error that Ctrl-C
    caused inside a Spark call is the interruption itself: it stops the run, not the table."""
    if failures.was_interrupted():
        raise KeyboardInterrupt from exc
    if isinstance(exc, IngestError):
        if TABLE in str(exc) or exc.table not in (None, table):
            return exc.for_table(table)  # an error the binlog stream's tables share: a copy each
        exc.table = table
        return exc
    log.error("%s: failed", table, exc_info=exc, extra=FILE_ONLY)  # the console gets the one line
    translated = failures.translate(exc, command=f"table {table}", lake_root=lake_root)
    if translated is not None:
        translated.table = table
        return translated
    text = str(exc).strip().splitlines()
    first = text[0][:300] if text else ""
    return FatalError(f"table {table}: {type(exc).__name__}: {first}; details in target/lakehouse.log",
                      table=table)
