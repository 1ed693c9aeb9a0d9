"""A typed adapter around python-mysql-replication: committed transactions, nothing else.

The rest of the engine never sees the library's keyword arguments or event classes. This module
yields whole transactions ending at a commit boundary (Xid, COMMIT or DDL), because resuming
mid-transaction silently loses rows. The library's silent auto-reconnect is not safe for exactly-
once (it resumes mid-transaction without the table map), so a reconnect inside a transaction
aborts the read; the caller rebuilds the reader from its own checkpoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import QueryEvent, RotateEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from .config import SourceProfile
from .errors import FatalError, SourceUnavailableError
from .positions import BinlogPosition

Op = Literal["c", "u", "d"]
PURGED_OR_MISSING = 1236


@dataclass(frozen=True)
class RowChange:
    """One row image. A key-changing UPDATE arrives as a delete of the old key plus an update."""

    table: str
    op: Op
    values: dict[str, Any]
    position: BinlogPosition  # end of the rows event
    row_index: int  # from 1 within the event
    timestamp: int


@dataclass(frozen=True)
class SchemaChange:
    table: str
    statement: str
    position: BinlogPosition


@dataclass(frozen=True)
class Transaction:
    changes: tuple[RowChange, ...]
    end: BinlogPosition  # a commit boundary: safe to resume from
    ddl: SchemaChange | None = None


class BinlogSource:
    """Reads committed transactions of ``tables`` in ``schema`` between two positions."""

    def __init__(
        self,
        profile: SourceProfile,
        server_id: int,
        schema: str,
        keys: Mapping[str, Sequence[str]],
    ):
        """``keys`` maps each table to read to its key columns."""
        self._profile = profile
        self._server_id = server_id
        self._schema = schema
        self._keys = {t: tuple(k) for t, k in keys.items()}
        self._tables = tuple(self._keys)

    def transactions(self, start: BinlogPosition, stop: BinlogPosition) -> Iterator[Transaction]:
        """Transactions whose commit ends after ``start`` and at or before ``stop``."""
        stream = BinLogStreamReader(
            connection_settings={
                "host": self._profile.host,
                "port": self._profile.port,
                "user": self._profile.user,
                "password": self._profile.password,
                "connect_timeout": self._profile.connect_timeout,
            },
            server_id=self._server_id,
            resume_stream=True,
            blocking=False,
            log_file=start.file,
            log_pos=start.offset,
            only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent, QueryEvent, RotateEvent],
            only_schemas=[self._schema],
            only_tables=list(self._tables),
            is_mariadb=False,  # True without GTID ignores the file/position
            enable_logging=False,
        )
        try:
            yield from self._read(stream, stop)
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else None
            if code == PURGED_OR_MISSING:
                raise FatalError(
                    f"binlog position {start} is no longer on the source ({exc.args[1]}): "
                    "re-snapshot the table with `make ingest TABLE=<table> FULL_REFRESH=1`"
                ) from None
            raise SourceUnavailableError(
                f"lost the binlog connection to {self._profile.host}:{self._profile.port} "
                f"after {start}: run again, it resumes from the last commit"
            ) from None
        finally:
            stream.close()

    def _read(self, stream: BinLogStreamReader, stop: BinlogPosition) -> Iterator[Transaction]:
        pending: list[RowChange] = []
        for event in stream:
            file = stream.log_file
            if isinstance(event, RotateEvent):
                if pending and event.timestamp == 0:
                    raise SourceUnavailableError(
                        "the binlog stream reconnected inside a transaction; run again, it "
                        "resumes from the last commit"
                    )
                continue
            end = BinlogPosition(file, event.packet.log_pos)
            if isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                pending.extend(self._changes(event, end))
                continue
            ddl = None
            if isinstance(event, QueryEvent):
                statement = _text(event.query).strip()
                if statement.upper() == "BEGIN":
                    continue
                if statement.upper() != "COMMIT":
                    ddl = self._schema_change(event, statement, end)
            # Xid, COMMIT or DDL: a commit boundary.
            if end > stop:
                return
            yield Transaction(tuple(pending), end, ddl)
            pending = []

    def _changes(self, event: Any, end: BinlogPosition) -> Iterator[RowChange]:
        table = event.table
        ts = int(event.timestamp)
        index = 0
        for row in event.rows:
            if isinstance(event, UpdateRowsEvent):
                before, after = row["before_values"], row["after_values"]
                if any(before[k] != after[k] for k in self._keys[table]):
                    index += 1
                    yield RowChange(table, "d", before, end, index, ts)
                index += 1
                yield RowChange(table, "u", after, end, index, ts)
            else:
                index += 1
                op: Op = "c" if isinstance(event, WriteRowsEvent) else "d"
                yield RowChange(table, op, row["values"], end, index, ts)

    def _schema_change(self, event: Any, statement: str, end: BinlogPosition) -> SchemaChange | None:
        schema = _text(event.schema)
        if schema and schema != self._schema:
            return None
        table = ddl_target(statement, self._tables)
        return SchemaChange(table, statement[:200], end) if table else None


_DDL = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*(ALTER\s+(?:ONLINE\s+)?(?:IGNORE\s+)?TABLE|DROP\s+TABLE|RENAME\s+TABLES?|"
    r"TRUNCATE(?:\s+TABLE)?)\b(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL,
)


_NAME = re.compile(r"((?:`[^`]+`|\w+)(?:\.(?:`[^`]+`|\w+))?)")


def ddl_target(statement: str, tables: Sequence[str]) -> str | None:
    """The watched table a DDL statement changes, if any. TRUNCATE matters as much as ALTER:
    it deletes rows without writing row events."""
    match = _DDL.match(statement)
    if not match:
        return None
    kind = match.group(1).split()[0].upper()
    names = [n for n in _NAME.findall(match.group("rest")) if n.upper() not in {"IF", "EXISTS", "TO"}]
    if kind in {"ALTER", "TRUNCATE"}:
        names = names[:1]  # the rest of an ALTER names columns and indexes, not tables
    watched = {t.lower(): t for t in tables}
    for name in names:
        bare = name.rsplit(".", 1)[-1].strip("`").lower()
        if bare in watched:
            return watched[bare]
    return None


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
