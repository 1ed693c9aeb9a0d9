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
from collections.abc import Collection, Generator, Iterable, Iterator, Mapping, Sequence
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

    The form of a change for code that looks at a few (a snapshot window's replay, ``dq``'s
    count and changed keys): :meth:`Transaction.changes_of` makes them from the transaction's
    :class:`RowImages`, which is what crosses from the reader process."""

    table: str
    op: Op
    values: dict[str, Any]
    position: BinlogPosition  # end of the rows event
    row_index: int  # from 1 within the event
    timestamp: int


class RowImages(NamedTuple):
    """The row images one rows event holds for one table, as they cross from the reader process
    to the catch-up, in the least it takes: a tuple of values per image (in ``columns``' order,
    one tuple shared by every event of a table map), one op letter per image, and the position
    and time once. A key-changing UPDATE is a delete of the old key's image then an update of
    the new one's, as in :class:`RowChange`.

    Per-row objects bound a catch-up's consuming thread: unpickling 500k changes of an
    18-column table took 4.3 s as named tuples of dicts with enum ops and 1.8 s as this (a
    micro-benchmark); the pickle is 16% smaller."""

    table: str
    ops: str  # one ``Op`` letter per image
    images: tuple[tuple[Any, ...], ...]
    columns: tuple[str, ...]
    position: BinlogPosition  # end of the rows event
    timestamp: int
    first: int = 1  # the row index of the first image; the others follow it one by one
    # The columns whose values are all ``str`` or None, as the fast decoder read them (text in a
    # known charset): their text conversion is skipped (``typemap.image_converter``). Empty
    # when not known (the library decoded the event). One tuple per table map, like ``columns``.
    texts: tuple[str, ...] = ()

    def changes(self) -> Iterator[RowChange]:
        """Each image as a :class:`RowChange` (values by column name)."""
        columns, position, timestamp = self.columns, self.position, self.timestamp
        for i, (op, image) in enumerate(zip(self.ops, self.images, strict=True), self.first):
            yield RowChange(self.table, Op(op), dict(zip(columns, image, strict=True)), position, i, timestamp)


def row_images(changes: Iterable[RowChange]) -> tuple[RowImages, ...]:
    """``changes`` as :class:`RowImages`: one per run of changes of one table and event with
    the same columns and consecutive row indexes (how tests and tools state transactions)."""
    events: list[RowImages] = []
    for change in changes:
        columns = tuple(change.values)
        last = events[-1] if events else None
        if (last is not None and (last.table, last.position, last.timestamp, last.columns)
                == (change.table, change.position, change.timestamp, columns)
                and last.first + len(last.images) == change.row_index):
            events[-1] = last._replace(ops=last.ops + change.op, images=(*last.images, tuple(change.values.values())))
        else:
            events.append(RowImages(change.table, str(change.op), (tuple(change.values.values()),), columns,
                                    change.position, change.timestamp, change.row_index))
    return tuple(events)


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
    events: tuple[RowImages, ...]  # the row images of captured tables, in binlog order
    end: BinlogPosition  # a commit boundary: safe to resume from
    schema_changes: tuple[SchemaChange, ...] = ()
    problems: tuple[TableProblem, ...] = ()
    gtid: str | None = None
    timestamp: int | None = None  # when the binlog dates it (whole seconds): its GTID event's, else its commit's
    parent_changes: tuple[ParentChange, ...] = ()  # of the ``parents`` the source was asked for

    @classmethod
    def of_changes(cls, changes: Iterable[RowChange], end: BinlogPosition, *rest: Any, **named: Any) -> Transaction:
        """A transaction of ``changes`` (see :func:`row_images`)."""
        return cls(row_images(changes), end, *rest, **named)

    @property
    def changes(self) -> tuple[RowChange, ...]:
        """Every row image as a :class:`RowChange`, in binlog order (made anew on each call:
        the catch-up's routing reads :attr:`events` instead)."""
        return tuple(change for event in self.events for change in event.changes())

    def changes_of(self, table: str) -> list[RowChange]:
        """The row images of ``table`` as :class:`RowChange`, in binlog order."""
        return [change for event in self.events if event.table == table for change in event.changes()]

    @property
    def rows(self) -> int:
        """How many row images the transaction holds."""
        return sum(len(event.images) for event in self.events)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by the reader process for the catch-up with its events as plain tuples: a
        named tuple pickles through its ``__getnewargs__`` and unpickles through its ``__new__``,
        Python code run once per event on the two busiest threads of a catch-up; ``map`` over
        ``tuple`` and ``tuple.__new__`` runs none."""
        rest = tuple(getattr(self, f.name) for f in fields(self)[1:])
        return (_transaction, (tuple(map(tuple, self.events)), *rest))


_row_images = partial(tuple.__new__, RowImages)


def _transaction(events: tuple[tuple[Any, ...], ...], *rest: Any) -> Transaction:
    """A :class:`Transaction` from its pickled form (``Transaction.__reduce__``)."""
    return Transaction(tuple(map(_row_images, events)), *rest)


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
    events: list[RowImages] = field(default_factory=list)
    schema_changes: list[SchemaChange] = field(default_factory=list)
    problems: list[TableProblem] = field(default_factory=list)
    gtid: str | None = None
    standalone: bool = False
    timestamp: int | None = None
    parent_changes: list[ParentChange] = field(default_factory=list)

    def close(self, end: BinlogPosition, timestamp: int) -> Transaction:
        return Transaction(tuple(self.events), end, tuple(self.schema_changes), tuple(self.problems),
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
        if decoded is None:
            columns, images = _library_images(event)
            texts: tuple[str, ...] = ()
        else:
            columns, images, texts = decoded
        ts = int(event.timestamp)
        if parent and not isinstance(event, WriteRowsEvent):
            checked = not event.flags & NO_FOREIGN_KEY_CHECKS
            pairs = zip(images[0::2], images[1::2], strict=True) if isinstance(event, UpdateRowsEvent) \
                else ((values, None) for values in images)
            tx.parent_changes.extend(
                ParentChange(table, dict(zip(columns, before, strict=True)),
                             None if after is None else dict(zip(columns, after, strict=True)), end, ts, checked)
                for before, after in pairs)
        if table not in self._keys:
            return
        if isinstance(event, UpdateRowsEvent):
            # (a key column the images lack stops the table in routing: its columns differ)
            key = [columns.index(k) for k in self._keys[table] if k in columns]
            kept: list[tuple[Any, ...]] = []
            ops: list[str] = []
            for before, after in zip(images[0::2], images[1::2], strict=True):
                if any(before[k] != after[k] for k in key):
                    kept.append(before)
                    ops.append(Op.DELETE)
                kept.append(after)
                ops.append(Op.UPDATE)
            tx.events.append(RowImages(table, "".join(ops), tuple(kept), columns, end, ts, texts=texts))
            return
        op = Op.INSERT if isinstance(event, WriteRowsEvent) else Op.DELETE
        tx.events.append(RowImages(table, op * len(images), tuple(images), columns, end, ts, texts=texts))


def _library_images(event: Any) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """The columns and row images as python-mysql-replication decodes them (an update's before
    image, then its after image), with empty SETs restored."""
    if isinstance(event, UpdateRowsEvent):
        dicts = [binlog_values(row[f"{side}_values"], row[f"{side}_none_sources"])
                 for row in event.rows for side in ("before", "after")]
    else:
        dicts = [binlog_values(row["values"], row["none_sources"]) for row in event.rows]
    columns = tuple(dicts[0]) if dicts else tuple(c.name for c in event.columns)
    return columns, [tuple(values[c] for c in columns) for values in dicts]


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _first_line(exc: BaseException) -> str:
    text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    return (text.splitlines() or [type(exc).__name__])[0][:200]
