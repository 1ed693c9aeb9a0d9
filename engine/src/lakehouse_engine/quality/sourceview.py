"""The source's side of ``dq``: one read view, opened and summed while Spark starts.

``dq`` compares silver at its position ``R`` with the source inside one consistent snapshot at
``P`` (see ``dq``). Nothing of the source's part needs Spark or silver: the view's position, each
table's schema and row count, and the bucket sums of every table whose values are compared, the
longest single piece of ``dq`` (one server thread reading every row: 5-6 s for make bench's
2M-row ``customer``). :class:`PendingView` does all of it on a thread of its own, begun before
Spark's JVM starts (3-5 s), so the two overlap; silver's side is summed meanwhile too.

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

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import pymysql

from ..config.project import SourceProfile
from ..source.connection import connect, qualified, query, start_consistent_snapshot
from ..source.introspect import TableSchema, describe_table
from ..state.positions import BinlogPosition
from ..tables import TableSpec
from .bucketing import Bucketing
from .reconcile import SourceSide, plan_source, source_side


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

    def __init__(self, profile: SourceProfile, specs: Sequence[TableSpec], compares: Callable[[TableSpec], bool]):
        self.started_at = time.time()  # before the head is read: a lag measured from here is never short
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
        try:
            self._conn = connect(self._profile)
            self._opened = _open(self._conn, self._profile.database, self._specs, self._compares)
            self._ready.set()
            for name, planned in self._opened.tables.items():
                wanted = self._wanted(name)
                if wanted is None:
                    continue
                if planned.bucketing is None or wanted == "count":
                    self._rows[name] = _count(self._conn, planned.schema)
                    continue
                self._sums[name] = side = source_side(self._conn, planned.schema, planned.bucketing)
                self._rows[name] = side.rows
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by opened() and sums()
            self._error = exc
        finally:
            self._ready.set()
            with self._lock:
                self._finished = True
                abandoned = self._closed
            if abandoned:
                self._close_connection()

    def _wanted(self, name: str) -> str | None:
        """What the caller still wants of a table: its ``sums``, its ``count``, or nothing (None:
        dropped, or the view closed)."""
        with self._lock:
            if self._closed or name in self._dropped:
                return None
            return "count" if name in self._counted_only else "sums"

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except pymysql.err.Error:
                pass  # already gone: the read view ended with it


def _open(conn: pymysql.connections.Connection, database: str, specs: Sequence[TableSpec],
          compares: Callable[[TableSpec], bool]) -> OpenedView:
    """Open the read view on ``conn`` and plan every table in it."""
    position = start_consistent_snapshot(conn)
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
