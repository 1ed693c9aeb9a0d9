"""A typed adapter around python-mysql-replication: committed transactions, nothing else.

The rest of the engine never sees the library's keyword arguments or event classes. This module
yields whole transactions ending at a commit boundary (Xid, COMMIT or DDL), because resuming
mid-transaction silently loses rows. What the library gets wrong, or leaves to the caller, is
handled here, and wherever the adapter cannot be sure it stops instead of guessing:

- **Table ids are per connection and per transaction.** The library keeps its table-id map across
  reconnects and server restarts, and does not record ids of tables it filters out, so after a
  restart another table's rows can be decoded as a captured table's. The adapter installs its
  own map, emptied at every transaction boundary and every rotation, and a rows event whose id
  no TableMapEvent of the current transaction announced raises (never silently dropped). For the
  same reason the library's own schema/table filters are not used: every table map is read, and
  rows of tables we do not capture are skipped before they are decoded.
- **A reconnect inside a transaction** (the library's silent auto-reconnect resumes at the last
  event, mid-transaction, without the table maps) aborts the read; the caller resumes from its
  last commit boundary.
- **Row images must be complete.** A session with ``binlog_row_image=MINIMAL``/``NOBLOB`` writes
  images without every column; statement-based logging writes DML as SQL text. Both are reported
  as problems of the watched table they touch, which the pipeline stops with one clear line.
- **Text is decoded as the server decodes it** (:mod:`.charsets`): latin1 is the server's, not
  Python's cp1252, and ENUM/SET members of a non-UTF-8 column keep their characters.
- **DDL** is resolved against the event's default database (``USE other; ALTER TABLE demo.t``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any, NamedTuple

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, RowsEvent, UpdateRowsEvent, WriteRowsEvent

from ..config.project import SourceProfile
from ..errors import TABLE, ConfigError, FatalError, SourceUnavailableError
from ..ops import Op
from ..source.connection import SourceConnection, driver_error, password_bytes
from ..source.statements import Kind, TableName, classify
from ..source.typemap import binlog_values
from ..state.positions import BinlogPosition
from . import charsets, rowimage
from .headwatch import HeadWatch

PURGED_OR_MISSING = 1236
# MariaDB GTID event flag: the event group is one statement without COMMIT/XID (DDL).
GTID_STANDALONE = 1
# Rows event flag: the writing session had foreign_key_checks=0, so InnoDB cascaded nothing.
NO_FOREIGN_KEY_CHECKS = 0x0002
# The dump thread writes to us while we are busy writing to the lake: never let the server give
# up on a slow reader (its default net_write_timeout is 60 s).
NET_WRITE_TIMEOUT_S = 3600


class RowChange(NamedTuple):
    """One row image. A key-changing UPDATE arrives as a delete of the old key plus an update.

    A named tuple, not a dataclass: every change crosses from the reader process to the catch-up
    in a pickle, and a tuple unpickles in less than half the time (5,000 changes of an 18-column
    table: 6.8 ms against 15.5 ms), on the catch-up's consuming thread."""

    table: str
    op: Op
    values: dict[str, Any]
    position: BinlogPosition  # end of the rows event
    row_index: int  # from 1 within the event
    timestamp: int


@dataclass(frozen=True)
class ParentChange:
    """A delete or update of a row of a foreign key's parent table, as InnoDB saw it: the rows
    it cascades into a child are not in the binlog (see ``source.cascades``)."""

    table: str
    before: dict[str, Any]
    after: dict[str, Any] | None  # None: the row was deleted
    position: BinlogPosition  # end of the rows event
    timestamp: int
    checked: bool  # the session checked foreign keys: InnoDB cascaded (foreign_key_checks=0 does not)


@dataclass(frozen=True)
class SchemaChange:
    """A DDL statement that changes (or empties, or drops) a watched table."""

    table: str
    statement: str
    position: BinlogPosition


@dataclass(frozen=True)
class TableProblem:
    """Something in the binlog that makes a watched table's changes unknowable."""

    table: str
    reason: str
    position: BinlogPosition


@dataclass(frozen=True)
class Transaction:
    changes: tuple[RowChange, ...]
    end: BinlogPosition  # a commit boundary: safe to resume from
    schema_changes: tuple[SchemaChange, ...] = ()
    problems: tuple[TableProblem, ...] = ()
    gtid: str | None = None
    timestamp: int | None = None  # when the binlog dates it (whole seconds): its GTID event's, else its commit's
    parent_changes: tuple[ParentChange, ...] = ()  # of the ``parents`` the source was asked for

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by the reader process for the catch-up, with the changes as plain tuples:
        a named tuple pickles through its ``__getnewargs__`` and unpickles through its
        ``__new__``, both Python code run once per row on the two busiest threads of a
        catch-up; ``map`` over ``tuple`` and ``tuple.__new__`` runs none."""
        rest = tuple(getattr(self, f.name) for f in fields(self)[1:])
        return (_transaction, (tuple(map(tuple, self.changes)), *rest))


_row_change = partial(tuple.__new__, RowChange)


def _transaction(changes: tuple[tuple[Any, ...], ...], *rest: Any) -> Transaction:
    """A :class:`Transaction` from its pickled form (``Transaction.__reduce__``)."""
    return Transaction(tuple(map(_row_change, changes)), *rest)


class UnknownTableIdError(FatalError):
    """A rows event names a table id no TableMapEvent of its transaction announced."""


class _TableMap(dict[int, Any]):
    """The library's table-id map, with a loud miss: the library treats a missing id as "filtered"
    and drops the rows; a ``KeyError`` subclass would be swallowed the same way, so this raises
    an error the library does not catch."""

    position: BinlogPosition | None = None  # of the event being read, for the message

    def __missing__(self, table_id: int) -> Any:
        raise UnknownTableIdError(
            f"binlog rows event at {self.position} uses table id {table_id}, which no table map of "
            "its transaction announced; the binlog cannot be decoded safely. Re-snapshot the "
            "tables with `make ingest-all FULL_REFRESH=1` if this persists"
        )


@dataclass
class _Pending:
    """The transaction being assembled."""

    open: bool = False
    changes: list[RowChange] = field(default_factory=list)
    schema_changes: list[SchemaChange] = field(default_factory=list)
    problems: list[TableProblem] = field(default_factory=list)
    gtid: str | None = None
    standalone: bool = False
    timestamp: int | None = None
    parent_changes: list[ParentChange] = field(default_factory=list)

    def close(self, end: BinlogPosition, timestamp: int) -> Transaction:
        return Transaction(tuple(self.changes), end, tuple(self.schema_changes), tuple(self.problems),
                           self.gtid, self.timestamp if self.timestamp is not None else timestamp,
                           tuple(self.parent_changes))


class BinlogSource:
    """Reads committed transactions of ``tables`` in ``schema`` between two positions."""

    def __init__(
        self,
        profile: SourceProfile,
        server_id: int,
        schema: str,
        keys: Mapping[str, Sequence[str]],
        *,
        read_timeout: float = 60.0,
        fast_decode: bool = True,
        parents: Collection[str] = (),
    ):
        """``keys`` maps each table to read to its key columns. ``parents``: tables whose deletes
        and updates are also reported as ``ParentChange`` (the parents of cascades a captured
        table applies; captured themselves or not). ``read_timeout`` bounds every
        socket read, so a server that stops answering fails the read instead of hanging it.
        ``fast_decode``: row images of common column types are decoded by :mod:`.rowimage`
        (False: all by python-mysql-replication, which tests compare it with)."""
        self._profile = profile
        self._server_id = server_id
        self._schema = schema
        self._keys = {t: tuple(k) for t, k in keys.items()}
        self._parents = frozenset(parents)
        # A statement-logged change of a parent hides its cascade as much as a captured table's rows.
        self._watched: tuple[TableName, ...] = tuple((schema, t) for t in sorted({*self._keys, *self._parents}))
        self._read_timeout = read_timeout
        self._fast_decode = fast_decode
        # The end of the last event the latest read got, handed over or not (a read stops early
        # at the end of what the server lets replicas see, which can trail SHOW MASTER STATUS).
        self.reached: BinlogPosition | None = None

    @property
    def identity(self) -> tuple[object, ...]:
        """What a read of this source depends on: equal identities read the same rows."""
        p = self._profile
        return (p.host, p.port, p.user, self._server_id, self._schema, tuple(sorted(self._keys.items())),
                tuple(sorted(self._parents)), self._read_timeout)

    def head_watch(self, heartbeat_s: float = 1.0) -> HeadWatch:
        """A wait for the server's next write, on this reader's connection settings and id."""
        return HeadWatch(self._profile, self._server_id, heartbeat_s)

    def transactions(self, start: BinlogPosition,
                     stop: BinlogPosition | None) -> Generator[Transaction, None, None]:
        """Transactions whose commit ends after ``start`` and at or before ``stop`` (``None``:
        up to the end of the binlog as the server shows it now). ``start`` must be a commit
        boundary, or a position no transaction spans (a binlog file's header events)."""
        self.reached = None
        charsets.install()  # table maps decoded as the server decodes text (latin1, ENUM members)
        stream = BinLogStreamReader(
            connection_settings={
                "host": self._profile.host,
                "port": self._profile.port,
                "user": self._profile.user,
                "password": password_bytes(self._profile),  # UTF-8, as the server hashed it
                "connect_timeout": self._profile.connect_timeout,
                "read_timeout": self._read_timeout,
                "init_command": f"SET SESSION net_write_timeout = {NET_WRITE_TIMEOUT_S}",
            },
            server_id=self._server_id,
            resume_stream=True,
            blocking=False,
            log_file=start.file,
            log_pos=start.offset,
            only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent, QueryEvent,
                         RotateEvent, MariadbGtidEvent],
            is_mariadb=False,  # True without GTID ignores the file/position
            enable_logging=False,
            pymysql_wrapper=SourceConnection,  # one TLS context per process, not a CA bundle load per connection
        )
        stream.table_map = _TableMap()
        try:
            yield from self._read(stream, stop)
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else None
            if code == PURGED_OR_MISSING:
                raise FatalError(
                    f"binlog position {start} is no longer on the source ({exc.args[1]}): "
                    f"re-snapshot the table with `make ingest TABLE={TABLE} FULL_REFRESH=1`",
                    position=str(start),
                ) from None
            refused = driver_error(exc, f"the binlog read after {start}")
            if isinstance(refused, ConfigError):  # a revoked privilege or a changed password: no retry helps
                refused.position = str(start)
                raise refused from None
            raise SourceUnavailableError(
                f"lost the binlog connection to {self._profile.host}:{self._profile.port} "
                f"after {start} ({_first_line(exc)}): run again, it resumes from the last commit",
                position=str(start),
            ) from None
        except (OSError, pymysql.err.InterfaceError) as exc:
            raise SourceUnavailableError(
                f"lost the binlog connection to {self._profile.host}:{self._profile.port} "
                f"after {start} ({_first_line(exc)}): run again, it resumes from the last commit",
                position=str(start),
            ) from None
        finally:
            with contextlib.suppress(pymysql.err.MySQLError, OSError):
                stream.close()  # a dead server must not turn cleanup into a second error

    def _read(self, stream: BinLogStreamReader, stop: BinlogPosition | None) -> Iterator[Transaction]:
        tx = _Pending()
        started = False
        for event in stream:
            if isinstance(event, RotateEvent):
                # A rotation may follow a server restart, which reassigns table ids.
                if event.timestamp == 0 and started and tx.open:
                    raise SourceUnavailableError(
                        "the binlog stream reconnected inside a transaction; run again, it "
                        "resumes from the last commit"
                    )
                started = True
                stream.table_map = _TableMap()
                continue
            end = BinlogPosition(stream.log_file, event.packet.log_pos)
            stream.table_map.position = end
            if isinstance(event, MariadbGtidEvent):
                tx = _Pending(open=True, gtid=event.gtid, standalone=bool(event.flags & GTID_STANDALONE),
                              timestamp=int(event.timestamp))
                continue
            if isinstance(event, RowsEvent):
                tx.open = True
                self._rows(event, end, tx)
                continue
            if isinstance(event, QueryEvent) and not self._query(event, end, tx):
                continue
            # Xid, COMMIT or DDL: a commit boundary.
            if stop is not None and end > stop:
                self.reached = end
                return
            yield tx.close(end, int(event.timestamp))
            tx = _Pending()
            stream.table_map = _TableMap()
        # The stream tracks every event it read, also those it did not hand over.
        file, offset = getattr(stream, "log_file", None), getattr(stream, "log_pos", None)
        if file is not None and offset is not None:
            self.reached = BinlogPosition(file, offset)

    def _query(self, event: QueryEvent, end: BinlogPosition, tx: _Pending) -> bool:
        """Record what a statement does to watched tables; True when it ends the transaction."""
        sql = _text(event.query)
        statement = classify(sql)
        if statement.kind is Kind.BEGIN:
            tx.open = True
            return False
        affected = statement.affected(_text(event.schema) or None, self._watched)
        if statement.kind is Kind.DML:
            for _, table in affected:
                tx.problems.append(TableProblem(
                    table, f"a change was logged as a statement, not as row images ({sql[:120]!r}); "
                    "set binlog_format=ROW for every session writing to it (SET GLOBAL, and no "
                    "SET SESSION binlog_format)", end))
        elif statement.kind is Kind.DDL:
            tx.schema_changes.extend(SchemaChange(table, sql, end) for _, table in affected)
        return tx.standalone or statement.ends_transaction

    def _rows(self, event: Any, end: BinlogPosition, tx: _Pending) -> None:
        table = event.table
        parent = table in self._parents
        if event.schema != self._schema or (table not in self._keys and not parent):
            return  # not captured: never decoded
        bitmaps = [event.columns_present_bitmap]
        if isinstance(event, UpdateRowsEvent):
            bitmaps.append(event.columns_present_bitmap2)
        if not all(rowimage.every_column(bitmap, event.number_of_columns) for bitmap in bitmaps):
            tx.problems.append(TableProblem(
                table, "a row image lacks columns (binlog_row_image is not FULL for the writing "
                "session); set binlog_row_image=FULL globally and for every session", end))
            return
        try:
            decoded = rowimage.decode(event) if self._fast_decode else None
        except rowimage.RowImageError as exc:  # stops this table only, never a guess
            tx.problems.append(TableProblem(table, str(exc), end))
            return
        images = _library_images(event) if decoded is None else decoded
        ts = int(event.timestamp)
        if parent and not isinstance(event, WriteRowsEvent):
            checked = not event.flags & NO_FOREIGN_KEY_CHECKS
            pairs = zip(images[0::2], images[1::2], strict=True) if isinstance(event, UpdateRowsEvent) \
                else ((values, None) for values in images)
            tx.parent_changes.extend(ParentChange(table, before, after, end, ts, checked) for before, after in pairs)
        if table not in self._keys:
            return
        index = 0
        if isinstance(event, UpdateRowsEvent):
            key = self._keys[table]
            for before, after in zip(images[0::2], images[1::2], strict=True):
                if any(before[k] != after[k] for k in key):
                    index += 1
                    tx.changes.append(RowChange(table, Op.DELETE, before, end, index, ts))
                index += 1
                tx.changes.append(RowChange(table, Op.UPDATE, after, end, index, ts))
            return
        op = Op.INSERT if isinstance(event, WriteRowsEvent) else Op.DELETE
        for values in images:
            index += 1
            tx.changes.append(RowChange(table, op, values, end, index, ts))


def _library_images(event: Any) -> list[dict[str, Any]]:
    """The row images as python-mysql-replication decodes them (an update's before image, then
    its after image), with empty SETs restored."""
    if isinstance(event, UpdateRowsEvent):
        return [binlog_values(row[f"{side}_values"], row[f"{side}_none_sources"])
                for row in event.rows for side in ("before", "after")]
    return [binlog_values(row["values"], row["none_sources"]) for row in event.rows]


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _first_line(exc: BaseException) -> str:
    text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    return (text.splitlines() or [type(exc).__name__])[0][:200]
