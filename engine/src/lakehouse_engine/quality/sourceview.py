"""The source's side of ``dq``: a read view, opened and summed while Spark starts.

``dq`` compares silver at its position ``R`` with the source inside one consistent snapshot at
``P`` (see ``dq``). Nothing of the source's part needs Spark or silver: the view's position, each
table's schema and row count, and the bucket sums of every table whose values are compared, the
longest single piece of ``dq`` (one server thread reading every row took 5-6 s for make bench's
2M-row ``customer``). :class:`PendingView` does all of it on a thread of its own, begun before
Spark's JVM starts (3-5 s), so the two overlap; silver's side is summed meanwhile too.

The sums are split: each summed table's rows in two disjoint parts (key ranges, or buckets by
remainder), summed at once by two read views opened at the very same binlog position (see
:func:`_open_views`; where the source commits between the two openings, or refuses a second
connection, one view sums everything). The server then reads each table on two threads: on
make bench's ``customer`` the sums query is ~75% fingerprint arithmetic, which two threads halve.

The caller first takes :meth:`PendingView.opened` (the position and the plans, ready once the
fast statements ran), reads silver's positions and the binlog between, sums silver, and only
then waits for the source's sums and row counts (:meth:`PendingView.sums`, :meth:`PendingView.rows`).
A summed table is counted by its sums (its buckets' row counts); only a table whose values are
not compared costs a ``COUNT(*)``. The connection keeps the read view
open until the view is closed, for the keys changed between ``R`` and ``P`` and the differing
buckets, which are read in that same view. One thread uses the connection at a time: the view's
own until its sums are done, the caller's after.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import pymysql

from ..config.defaults import DEFAULTS
from ..config.project import SourceProfile
from ..errors import SourceUnavailableError
from ..source.connection import connect, qualified, query, start_consistent_snapshot
from ..source.introspect import TableSchema, describe_table
from ..state.positions import BinlogPosition
from ..tables import TableSpec
from .bucketing import Bucketing
from .reconcile import SourceSide, merged_sums, plan_source, source_side
from .silverpass import Sums

log = logging.getLogger(__name__)

OPEN_TRIES = 3  # attempts to open two read views at one binlog position before one reads alone


@dataclass(frozen=True)
class Planned:
    """One table in the read view: its schema and how its values are bucketed (None: its values
    are not compared). Its row count comes later, with its sums (:meth:`PendingView.rows`)."""

    schema: TableSchema
    bucketing: Bucketing | None


@dataclass(frozen=True)
class OpenedView:
    """The read view once open: its connection, its exact binlog position, the tables planned."""

    conn: pymysql.connections.Connection
    position: BinlogPosition
    tables: dict[str, Planned]


class PendingView:
    """A read view of the source opened, planned and summed on a thread of its own.

    ``specs`` are planned and counted; those for which ``compares(spec)`` get their bucket sums
    (which count them). Where their turn has not yet come, :meth:`count_only` tables are counted
    instead of summed (the caller found it cannot compare their values), and :meth:`drop` tables
    neither (the caller gave up on them: a full ``COUNT(*)`` of a big table is seconds). Close
    it (or use it as a context manager): the connection is closed then, or by the view's thread
    once it ends, if it is still running."""

    def __init__(self, profile: SourceProfile, specs: Sequence[TableSpec], compares: Callable[[TableSpec], bool],
                 *, readers: int = DEFAULTS.dq_source_readers):
        self.started_at = time.time()  # before the head is read: a lag measured from here is never short
        self._readers = readers
        self.readers_used = 1  # read views summing at once (two once a second opened at the same position)
        self._profile = profile
        self._specs = list(specs)
        self._compares = compares
        self._lock = threading.Lock()
        self._counted_only: set[str] = set()
        self._dropped: set[str] = set()
        self._closed = False
        self._finished = False
        self._conn: pymysql.connections.Connection | None = None
        self._opened: OpenedView | None = None
        self._sums: dict[str, SourceSide] = {}
        self._rows: dict[str, int] = {}
        self._error: BaseException | None = None
        self._ready = threading.Event()  # opened (or failed)
        self._thread = threading.Thread(target=self._run, name="dq-source-view", daemon=True)
        self._thread.start()

    # -- the caller's side -------------------------------------------------------------------

    def opened(self) -> OpenedView:
        """The open view (waits for its fast statements only); raises what opening raised."""
        self._ready.wait()
        if self._opened is None:
            assert self._error is not None
            raise self._error
        return self._opened

    def sums(self) -> dict[str, SourceSide]:
        """Every summed table's bucket sums, by spec name (waits for them)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._sums

    def rows(self) -> dict[str, int]:
        """Every table's row count in the read view, by spec name (waits for the sums)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._rows

    def count_only(self, names: Iterable[str]) -> None:
        with self._lock:
            self._counted_only.update(names)

    def drop(self, names: Iterable[str]) -> None:
        with self._lock:
            self._dropped.update(names)

    def close(self) -> None:
        """Close the connection, ending the read view; a still running view closes it itself."""
        with self._lock:
            self._closed = True
            finished = self._finished
        if finished:
            self._close_connection()

    def __enter__(self) -> PendingView:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    # -- the view's thread ---------------------------------------------------------------

    def _run(self) -> None:
        helper: pymysql.connections.Connection | None = None
        try:
            self._conn = connect(self._profile)
            if self._readers > 1 and any(self._compares(spec) for spec in self._specs):
                helper = _helper_connection(self._profile)
            position, helper = _open_views(self._conn, helper)
            self.readers_used = 2 if helper is not None else 1
            self._opened = _plan(self._conn, position, self._profile.database, self._specs, self._compares)
            self._ready.set()
            work = _Work(self._opened.tables, parts=self.readers_used)
            beside = None
            if helper is not None:
                beside = threading.Thread(target=self._work_on, args=(helper, work), name="dq-source-part",
                                          daemon=True)
                beside.start()
            self._work_on(self._conn, work)
            if beside is not None:
                beside.join()
            work.raise_error()
            self._sums, self._rows = work.results()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by opened() and sums()
            self._error = exc
        finally:
            _close(helper)
            self._ready.set()
            with self._lock:
                self._finished = True
                abandoned = self._closed
            if abandoned:
                self._close_connection()

    def _work_on(self, conn: pymysql.connections.Connection, work: _Work) -> None:
        """Take the next part until none is left (or another reader failed): sum it, count its
        table, or pass it by (its table dropped, or counted already)."""
        try:
            while (part := work.take()) is not None:
                fate = work.decide(part.table, self._wanted(part.table))
                planned = work.tables[part.table]
                if fate == "count" and part.index == 0:
                    work.counted(part.table, _count(conn, planned.schema))
                elif fate == "sums":
                    assert planned.bucketing is not None
                    work.summed(part, source_side(conn, planned.schema, planned.bucketing, part.where).sums)
        except BaseException as exc:  # noqa: BLE001 - raised on the view's thread by work.raise_error()
            work.fail(exc)

    def _wanted(self, name: str) -> str | None:
        """What the caller still wants of a table: its ``sums``, its ``count``, or nothing (None:
        dropped, or the view closed)."""
        with self._lock:
            if self._closed or name in self._dropped:
                return None
            return "count" if name in self._counted_only else "sums"

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        _close(conn)


@dataclass(frozen=True)
class _Part:
    table: str
    index: int
    where: str | None  # one of ``Bucketing.sql_parts`` (None: the whole table)


class _Work:
    """The parts of every table the view sums or counts, taken in turn by one or two readers,
    and what they found. A table's fate (summed, counted, or passed by) is decided when its first
    part is taken and holds for its other parts; only dropping it later passes them by (its sums
    are then incomplete and never handed out)."""

    def __init__(self, tables: dict[str, Planned], parts: int):
        self.tables = tables
        self._lock = threading.Lock()
        self._parts: deque[_Part] = deque()
        self._expected: dict[str, int] = {}
        for name, planned in tables.items():
            wheres = planned.bucketing.sql_parts(parts) if planned.bucketing is not None else [None]
            self._expected[name] = len(wheres)
            self._parts.extend(_Part(name, i, where) for i, where in enumerate(wheres))
        self._fates: dict[str, str | None] = {}
        self._summed: dict[str, list[Sums]] = {}
        self._counts: dict[str, int] = {}
        self._error: BaseException | None = None

    def take(self) -> _Part | None:
        with self._lock:
            return self._parts.popleft() if self._parts and self._error is None else None

    def decide(self, table: str, wanted: str | None) -> str | None:
        with self._lock:
            if self.tables[table].bucketing is None and wanted is not None:
                wanted = "count"  # its values are not compared: nothing to sum
            if wanted is None or table not in self._fates:
                self._fates[table] = wanted
            return self._fates[table]

    def summed(self, part: _Part, sums: Sums) -> None:
        with self._lock:
            self._summed.setdefault(part.table, []).append(sums)

    def counted(self, table: str, rows: int) -> None:
        with self._lock:
            self._counts[table] = rows

    def fail(self, error: BaseException) -> None:
        with self._lock:
            if self._error is None:
                self._error = error

    def raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def results(self) -> tuple[dict[str, SourceSide], dict[str, int]]:
        """Every table summed in all its parts (its sums and count), every table counted."""
        sums: dict[str, SourceSide] = {}
        rows = dict(self._counts)
        for name, found in self._summed.items():
            planned = self.tables[name]
            if self._fates.get(name) != "sums" or len(found) != self._expected[name]:
                continue  # dropped after a part was summed
            assert planned.bucketing is not None
            sums[name] = side = SourceSide(planned.schema, planned.bucketing, merged_sums(found))
            rows[name] = side.rows
        return sums, rows


def _helper_connection(profile: SourceProfile) -> pymysql.connections.Connection | None:
    """A second connection to sum parts beside the first, or None where the source refuses one
    (its connection limit reached: the first reader then sums everything alone)."""
    try:
        return connect(profile)
    except SourceUnavailableError as exc:
        log.info("dq: a second read view of the source is refused (%s); one reads every table", exc)
        return None


def _open_views(conn: pymysql.connections.Connection, helper: pymysql.connections.Connection | None,
                ) -> tuple[BinlogPosition, pymysql.connections.Connection | None]:
    """Open the read view on ``conn``, and one on ``helper`` at the very same binlog position.

    Two views at one position see the same binlogged commits (the server takes a view and its
    position together, under its commit-order lock), so parts summed in either add up to the
    table at that position. Commits between the two openings move the second view past the
    first: then both are opened again, and after ``OPEN_TRIES`` the helper is closed and ``conn``
    sums everything (a busy source costs speed, never exactness)."""
    for _ in range(OPEN_TRIES):
        position = start_consistent_snapshot(conn)
        if helper is None:
            return position, None
        if start_consistent_snapshot(helper) == position:
            return position, helper
    log.info("dq: the source committed between two read views %d times; one reads every table", OPEN_TRIES)
    _close(helper)
    return position, None


def _close(conn: pymysql.connections.Connection | None) -> None:
    if conn is not None:
        try:
            conn.close()
        except pymysql.err.Error:
            pass  # already gone: the read view ended with it


def _plan(conn: pymysql.connections.Connection, position: BinlogPosition, database: str,
          specs: Sequence[TableSpec], compares: Callable[[TableSpec], bool]) -> OpenedView:
    """Plan every table in the read view ``conn`` has open at ``position``."""
    tables: dict[str, Planned] = {}
    for spec in specs:
        schema = describe_table(conn, database, spec.source_table, spec.key)
        bucketing = plan_source(conn, schema, _estimated_rows(conn, schema)) if compares(spec) else None
        tables[spec.name] = Planned(schema, bucketing)
    return OpenedView(conn, position, tables)


def _estimated_rows(conn: Any, schema: TableSchema) -> int:
    """The server's estimate of the table's row count (InnoDB's statistics: cheap, approximate)."""
    found = query(conn, "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                  "AND TABLE_NAME = %s", (schema.schema, schema.table))
    return int(found[0][0] or 0) if found else 0


def _count(conn: Any, schema: TableSchema) -> int:
    return int(query(conn, f"SELECT COUNT(*) FROM {qualified(schema.schema, schema.table)}")[0][0])
