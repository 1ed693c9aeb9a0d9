"""The binlog phase: one reader for every selected table, committed per table to bronze.

Each table keeps its own position (:class:`~.tablecapture.TableCapture`). A catch-up reads the
binlog once, from the lowest table position to a stop, and for each transaction in order applies
its DDL (:mod:`.schemachanges`), routes its rows to their tables exactly once (:mod:`.routing`)
and, once enough rows are buffered, has every table commit them (:mod:`.commits`). A table
whose changes cannot be known is stopped on its own, and the other tables go on. A lost
connection is retried with backoff from the last transaction read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import pymysql
from pyspark.sql import SparkSession

from ..config.defaults import DEFAULTS
from ..config.project import ProjectConfig
from ..errors import IngestError, SourceUnavailableError
from ..logs import PROGRESS
from ..source.connection import binlog_sizes, query
from ..source.serverids import ServerIds
from ..state.positions import BinlogPosition, bytes_behind
from .binlog import BinlogSource, Transaction
from .commits import Commits, GtidTrail
from .passes import transactions_through
from .prefetch import ProcessPrefetcher
from .routing import route
from .schemachanges import SchemaChanges
from .tablecapture import TableCapture, table_stopped

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


class Feed(Protocol):
    """Where a catch-up gets its transactions instead of a reader of its own: follow mode's one
    stream (``feed.BinlogFeed``), or an ingest's reader started ahead (``headstart.HeadStart``)."""

    def transactions(self, source: BinlogSource, start: BinlogPosition,
                     stop: BinlogPosition) -> Iterator[Transaction]: ...

    def close(self) -> None: ...


def read_transactions(source: BinlogSource, start: BinlogPosition, stop: BinlogPosition) -> Iterator[Transaction]:
    """The reader process's work (a module-level function, so that it pickles): every
    transaction up to ``stop``, since the catch-up records the range as read (follow mode's idle
    tables then read on from ``stop``)."""
    return transactions_through(source, start, stop)


def transaction_weight(transaction: Transaction) -> int:
    return transaction.rows + 1


# What a catch-up's reader process may have decoded and not yet handed over, pickled. The
# consumer stops for each commit (bronze, and every ``HELD_ROWS`` rows silver's merge): a few
# groups of room (it had 8 groups of 2,000 rows) left the reader blocked for half of each
# commit. 64 MiB holds about 150k rows of an 18-column table, 3 s of decoding.
READ_AHEAD_BYTES = 64 << 20
# The reader is ahead more often than not (it decodes while Spark starts, ``headstart``): it
# takes the CPU the JVM's start and the consumer leave, as follow mode's reader does.
READER_NICENESS = 10


def range_reader(source: BinlogSource, start: BinlogPosition, stop: BinlogPosition) -> ProcessPrefetcher[Transaction]:
    """A reader process for the transactions of ``(start, stop]`` (not started yet)."""
    return ProcessPrefetcher(partial(read_transactions, source, start, stop), weight=transaction_weight,
                             max_bytes=READ_AHEAD_BYTES, niceness=READER_NICENESS)


def purged_tables(conn: pymysql.connections.Connection, captures: Sequence[TableCapture]) -> list[TableCapture]:
    """Tables whose resume position lies in a binlog file the server no longer has."""
    try:
        files = {str(row[0]) for row in query(conn, "SHOW BINARY LOGS")}
    except pymysql.err.MySQLError:
        return []  # no privilege to list them: the reader reports a purged position itself
    return [c for c in captures if c.start.file not in files]


def server_id(config: ProjectConfig) -> int:
    """The replica server id this process's own binlog reader uses (``source.serverids``)."""
    return ServerIds.of(config.server_ids).own()


def binlog_source(config: ProjectConfig, keys: Mapping[str, Sequence[str]], parents: Collection[str],
                  retry: RetryPolicy) -> BinlogSource:
    """The binlog reader of the source tables ``keys`` (each to its key columns) and of the
    cascades' ``parents``, on this process's server id."""
    return BinlogSource(config.source, server_id(config), config.source.database, keys,
                        read_timeout=retry.read_timeout_s, parents=parents)


class _Progress:
    """How far a catch-up has read, for its flushes and its progress lines."""

    def __init__(self, start: BinlogPosition, stop: BinlogPosition, sizes: dict[str, int]):
        self.position = start  # the end of the last transaction read
        self.stop = stop
        self.sizes = sizes  # binlog file sizes, to tell the bytes still to read across files
        self.buffered = 0  # rows routed since the last flush
        self.read_rows = 0
        self.started = time.monotonic()

    def routed(self, rows: int, end: BinlogPosition) -> None:
        self.buffered += rows
        self.read_rows += rows
        self.position = end

    def flushed(self) -> None:
        self.buffered = 0
        elapsed = max(time.monotonic() - self.started, 1e-6)
        log.info("binlog: at %s, %s bytes to %s, %d rows, %.0f rows/s, %.0f s in", self.position,
                 f"{bytes_behind(self.position, self.stop, self.sizes):,}", self.stop, self.read_rows,
                 self.read_rows / elapsed, elapsed, extra=PROGRESS)


class CatchUp:
    """Reads the binlog from the lowest table position to ``stop`` and commits each table."""

    def __init__(self, config: ProjectConfig, spark: SparkSession, run_id: str, retry: RetryPolicy,
                 gtid_known: tuple[BinlogPosition, str] | None = None, feed: Feed | None = None,
                 merge_silver: Callable[[TableCapture], None] | None = None):
        """``gtid_known``: a binlog position and the GTID position there, from an earlier catch-up
        (asking the server costs it a read of the binlog file up to the position). ``feed``: a
        binlog reader kept across catch-ups (follow mode), or started ahead (an ingest's head
        start), instead of one per catch-up.
        ``merge_silver``: merges a table's batches held in ``recent`` into silver (see
        ``Commits._hold``); without it, silver reads batches beyond what may be held from bronze."""
        self.config = config
        self.feed = feed
        self.run_id = run_id
        self.retry = retry
        self.gtid = GtidTrail(gtid_known)
        self.commits = Commits(config, spark, run_id, self.gtid, merge_silver)
        self.schema_changes = SchemaChanges(config, spark, run_id, self.commits)

    @property
    def gtid_position(self) -> tuple[BinlogPosition, str] | None:
        """The last binlog position read and the GTID position there, when known."""
        return self.gtid.at

    def run(self, conn: pymysql.connections.Connection, captures: Sequence[TableCapture],
            stop: BinlogPosition, stop_seen_at: float | None = None) -> None:
        """Catch every capture up to ``stop``; failures are recorded on the capture.
        ``stop_seen_at``: the Unix time ``stop`` was the source's head, recorded as the
        ``synced_at`` of each table's checkpoint once the whole range is read."""
        for capture in purged_tables(conn, captures):
            capture.fail(table_stopped(capture.spec.name, f"its binlog position {capture.start} is no longer on the "
                                       "source (purged)", capture.start))
        active = [c for c in captures if c.failure is None]
        if not active:
            return
        start = min(c.start for c in active)
        by_source = {c.schema.table: c for c in active}
        if start >= stop:  # nothing to read; a table that never recorded synced_at records it now
            self.commits.flush(by_source, start, final=True, synced_at=stop_seen_at)
            return
        self.gtid.start(conn, start)
        log.info(READING, start, stop, extra=PROGRESS)
        progress = _Progress(start, stop, binlog_sizes(conn) if start.file != stop.file else {})
        try:
            for transaction in self._transactions(self._source(active), start, stop):
                self._take(conn, transaction, by_source, progress)
        except IngestError as exc:
            # The stream itself failed (after retries): every table it served stops here, with
            # what was read so far committed, since each transaction routed so far is complete.
            self.commits.flush(by_source, progress.position, final=True)
            for capture in by_source.values():
                if capture.failure is None:
                    capture.fail(exc)
            return
        # The whole range is read: every table is complete up to the moment ``stop`` was the head.
        self.commits.flush(by_source, max(progress.position, start), final=True, synced_at=stop_seen_at)

    def _take(self, conn: pymysql.connections.Connection, transaction: Transaction,
              by_source: dict[str, TableCapture], progress: _Progress) -> None:
        """One transaction read: its DDL applied, its changes routed, and a flush once enough
        rows are buffered."""
        if transaction.schema_changes:
            self.schema_changes.apply(conn, transaction, by_source, progress.position)
        progress.routed(route(transaction, by_source, self.run_id), transaction.end)
        self.gtid.advance(transaction)
        if progress.buffered >= self.config.defaults.flush_rows:
            self.commits.flush(by_source, progress.position)
            progress.flushed()

    def _source(self, active: Sequence[TableCapture]) -> BinlogSource:
        return binlog_source(self.config, {c.schema.table: c.schema.key for c in active},
                             {cascade.parent_table for c in active for cascade in c.cascades}, self.retry)

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
                    reader = range_reader(source, position, stop)
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
