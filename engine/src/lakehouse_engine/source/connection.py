"""Connections to the source MySQL/MariaDB and the few statements every stage shares.

Every connection runs with ``time_zone = '+00:00'`` so TIMESTAMP values read by SELECT are UTC,
like the binlog's. Connection failures become one-line errors without the password.
"""

from __future__ import annotations

import functools
import re
import ssl
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pymysql
import pymysql.cursors

from ..config.project import SourceProfile
from ..errors import ConfigError, IngestError, PreflightError, SourceUnavailableError
from ..identifiers import quote_ident as quote_ident  # re-exported: the source's SQL quotes with it
from ..state.positions import BinlogPosition

ACCESS_DENIED = {1045, 1698}  # the login itself: user or password
UNKNOWN_DATABASE = 1049
CANNOT_CONNECT = {2002, 2003, 2005, 2006, 2013}
NO_PRIVILEGE = {1227, 1142, 1143, 1044}  # 1044: no privilege on the database (login accepted)
# The server went away or dropped this connection mid-run: shutdown in progress, connection
# killed, server gone, lost during a query (kill -9 of the server), lost while reading a packet.
CONNECTION_LOST = {1053, 1927, 2006, 2013, 2055} | CANNOT_CONNECT
# Transient refusals of one statement: lock wait timeout, deadlock.
TRANSIENT = {1205, 1213}
GRANTS = ("GRANT the ingest user SELECT ON the source database and REPLICATION SLAVE, REPLICATION CLIENT "
          "(BINLOG MONITOR on MariaDB) ON *.*, then run again (`make debug` checks the grants)")
# A driver error as a Spark task's traceback prints it: pymysql.err.OperationalError: (2013, '...')
_DRIVER_ERROR_TEXT = re.compile(r"pymysql\.err\.(\w+): \((\d+), ['\"](.*?)['\"]\)")


def literal_percent(sql: str) -> str:
    """SQL text for a statement run with arguments: the driver reads each ``%`` as the start of a
    placeholder (``DATE_FORMAT``'s ``'%Y'``, a modulo, a column named ``growth_%``)."""
    return sql.replace("%", "%%")


def qualified(schema: str, table: str) -> str:
    return f"{quote_ident(schema)}.{quote_ident(table)}"


class SourceConnection(pymysql.connections.Connection):
    """pymysql's connection with one TLS context per process for its default (``PREFERRED``: TLS
    when the server offers it, unverified) mode. pymysql builds that context for every
    connection, loading the system's CA bundle each time: 46 ms of CPU per connection here, which
    made an idle ``follow`` (a dump connection every few seconds, two for each binlog pass) cost
    2-3% of a core. Also the driver python-mysql-replication is given (``pymysql_wrapper``)."""

    def _create_ssl_ctx(self, sslp: object) -> ssl.SSLContext:
        if sslp == {}:
            return _preferred_context()
        context: ssl.SSLContext = super()._create_ssl_ctx(sslp)  # type: ignore[misc]  # private, not in the stubs
        return context


@functools.cache
def _preferred_context() -> ssl.SSLContext:
    """The context of pymysql's PREFERRED mode, made once by pymysql's own maker (which reads
    nothing of the connection), so that its settings stay pymysql's. Shared across threads: it
    is never changed after this."""
    context: ssl.SSLContext = pymysql.connections.Connection._create_ssl_ctx(None, {})  # type: ignore[attr-defined]
    return context


def connect(
    profile: SourceProfile,
    *,
    streaming: bool = False,
    read_timeout: int | None = 600,
) -> pymysql.connections.Connection:
    """Open a connection, turning driver errors into messages a user can act on."""
    try:
        return SourceConnection(
            host=profile.host,
            port=profile.port,
            user=profile.user,
            password=password_bytes(profile),
            database=profile.database,
            connect_timeout=profile.connect_timeout,
            read_timeout=read_timeout,
            charset="utf8mb4",
            autocommit=True,
            init_command="SET time_zone = '+00:00'",
            cursorclass=pymysql.cursors.SSCursor if streaming else pymysql.cursors.Cursor,
        )
    except pymysql.err.OperationalError as exc:
        raise connection_error(exc, profile) from None
    except pymysql.err.InternalError as exc:  # e.g. unknown database on some versions
        raise connection_error(exc, profile) from None


def password_bytes(profile: SourceProfile) -> bytes:
    """The password as the server hashed it: UTF-8, like the mysql client sends what was typed.
    (pymysql encodes a ``str`` password as latin1, which fails on ``€`` and sends other bytes
    than the server expects for any non-ASCII character.)"""
    return profile.password.encode("utf-8")


def connection_error(exc: pymysql.err.MySQLError, profile: SourceProfile) -> IngestError:
    code = exc.args[0] if exc.args else None
    where = f"{profile.user}@{profile.host}:{profile.port}"
    if code in NO_PRIVILEGE:
        return privilege_error(_reason(exc))
    if code in ACCESS_DENIED:
        return ConfigError(
            f"source login refused for {where}: check the user in profiles.yml and the "
            "MYSQL_PASSWORD environment variable"
        )
    if code == UNKNOWN_DATABASE:
        return ConfigError(
            f"source database {profile.database!r} does not exist on {profile.host}:"
            f"{profile.port}: fix 'database' in profiles.yml"
        )
    if code in CANNOT_CONNECT:
        return SourceUnavailableError(
            f"cannot reach the source at {profile.host}:{profile.port} ({_reason(exc)}): "
            "start it (`make source-up` for the embedded demo) or fix host/port in profiles.yml; once it "
            "is back, run again: it resumes from the last commit"
        )
    return SourceUnavailableError(f"source error from {where}: {_reason(exc)}")


def privilege_error(reason: str, where: str = "", table: str | None = None) -> ConfigError:
    """The source refused a statement for want of a privilege: running again cannot help."""
    place = f"{where}: " if where else ""
    return ConfigError(f"{place}the source refused a statement for lack of a privilege ({reason}): {GRANTS}",
                       table=table, setting="GRANT")


def driver_error(exc: BaseException, where: str, table: str | None = None) -> IngestError | None:
    """The engine error for a driver error raised on an open connection (the source went away,
    a privilege was revoked, a lock wait timed out), ``None`` for any other exception or code.
    ``where`` starts the message: ``table orders`` or the command."""
    if not isinstance(exc, pymysql.err.MySQLError):
        return None
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    reason = _reason(exc).strip()
    shown = f"{code} {reason}" if code and reason else reason
    return _by_code(code, shown, isinstance(exc, pymysql.err.InterfaceError), where, table)


def driver_error_in_text(text: str, where: str, table: str | None = None) -> IngestError | None:
    """``driver_error`` for the last driver error a traceback's text shows (a Spark task's)."""
    found = _DRIVER_ERROR_TEXT.findall(text)
    if not found:
        return None
    kind, code, message = found[-1]
    return _by_code(int(code), f"{code} {message}"[:200], kind == "InterfaceError", where, table)


def _by_code(code: int | None, reason: str, interface: bool, where: str, table: str | None) -> IngestError | None:
    if code in NO_PRIVILEGE or code in ACCESS_DENIED:
        return privilege_error(reason, where, table) if code in NO_PRIVILEGE else ConfigError(
            f"{where}: the source refused the login ({reason}): check the user in profiles.yml and the "
            "MYSQL_PASSWORD environment variable, then run again", table=table, setting="password")
    if code in CONNECTION_LOST or interface:  # InterfaceError: a connection already closed under us
        return SourceUnavailableError(
            f"{where}: lost the connection to the source ({reason or 'connection closed'}): run again once "
            "the source is back; it resumes from the last commit", table=table)
    if code in TRANSIENT:
        return SourceUnavailableError(f"{where}: the source gave up a statement ({reason}): run again; it "
                                      "resumes from the last commit", table=table)
    return None


def _reason(exc: pymysql.err.MySQLError) -> str:
    message = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    return (message.splitlines() or [""])[0][:200]


@contextmanager
def connection(profile: SourceProfile, **kwargs: Any) -> Iterator[pymysql.connections.Connection]:
    conn = connect(profile, **kwargs)
    try:
        yield conn
    finally:
        conn.close()


def query(conn: pymysql.connections.Connection, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


KEYS_PER_QUERY = 500  # key tuples per IN list


def query_keys(conn: pymysql.connections.Connection, head: str, width: int,
               keys: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows of ``head`` (``SELECT ... WHERE (key columns) IN``, its ``%`` doubled) for ``keys``
    (tuples of ``width`` values), asked in batches of ``KEYS_PER_QUERY``."""
    one = "(" + ", ".join(["%s"] * width) + ")"
    rows: list[tuple[Any, ...]] = []
    for start in range(0, len(keys), KEYS_PER_QUERY):
        batch = keys[start:start + KEYS_PER_QUERY]
        rows += query(conn, head + f"({', '.join([one] * len(batch))})", [value for key in batch for value in key])
    return rows


def current_position(conn: pymysql.connections.Connection) -> BinlogPosition:
    """The end of the binlog now. MySQL 8.4 renamed the statement, so try both."""
    for statement in ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"):
        try:
            rows = query(conn, statement)
        except pymysql.err.ProgrammingError:
            continue
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] in NO_PRIVILEGE:
                raise PreflightError(
                    "the source user may not read the binlog position: GRANT REPLICATION "
                    "CLIENT (BINLOG MONITOR on MariaDB) ON *.* TO the ingest user"
                ) from None
            raise
        if not rows:
            raise PreflightError("binary logging is off on the source: start it with log_bin=ON")
        return BinlogPosition(str(rows[0][0]), int(rows[0][1]))
    raise PreflightError("the source answers neither SHOW MASTER STATUS nor SHOW BINARY LOG STATUS")


def binlog_sizes(conn: pymysql.connections.Connection) -> dict[str, int]:
    """The source's binlog files and their sizes in bytes (``SHOW BINARY LOGS``)."""
    return {str(row[0]): int(row[1]) for row in query(conn, "SHOW BINARY LOGS")}


def check_on_source(conn: pymysql.connections.Connection, position: BinlogPosition, table: str) -> None:
    """Refuse a start position the source does not hold: its file purged or never written, or
    an offset past the file's end (a typo would otherwise start reading somewhere else)."""
    sizes = binlog_sizes(conn)
    head = current_position(conn)
    if position.file not in sizes:
        raise ConfigError(
            f"table {table}: start_position {position} is not on the source (its binlog files are "
            f"{min(sizes, default='none')} .. {max(sizes, default='none')}): use a position that "
            "SHOW MASTER STATUS printed while that file existed, or startup='latest'",
            table=table, setting="start_position")
    if position > head or position.offset > sizes[position.file] or position.offset < 4:
        raise ConfigError(
            f"table {table}: start_position {position} is past the end of {position.file} "
            f"({sizes[position.file]} bytes; the source is at {head}): use a position SHOW MASTER "
            "STATUS printed", table=table, setting="start_position")


def start_consistent_snapshot(conn: pymysql.connections.Connection) -> BinlogPosition:
    """Open a read view and return the exact binlog position it shows.

    MariaDB and Percona expose ``binlog_snapshot_file/position`` for the transaction's read
    view, so rows read inside it are exactly the state at that position (no backfill).
    """
    with conn.cursor() as cur:
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
        status = {str(name).lower(): value for name, value in cur.fetchall()}
    file = status.get("binlog_snapshot_file")
    position = status.get("binlog_snapshot_position")
    if not file or position is None:
        raise PreflightError(
            "the source does not report binlog_snapshot_file/position (MySQL community): snapshots "
            "need defaults.snapshot_mode 'auto' or 'window' in lakehouse_project.yml, and dq and "
            "repair need MariaDB or Percona"
        )
    return BinlogPosition(str(file), int(position))


def reports_snapshot_positions(conn: pymysql.connections.Connection) -> bool:
    """Whether the source tells a read view's binlog position (MariaDB, Percona; not MySQL
    community, which lacks the ``binlog_snapshot_%`` status variables)."""
    with conn.cursor() as cur:
        cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
        status = {str(name).lower(): value for name, value in cur.fetchall()}
    return bool(status.get("binlog_snapshot_file")) and status.get("binlog_snapshot_position") is not None


def gtid_position_at(conn: pymysql.connections.Connection, position: BinlogPosition) -> str | None:
    """MariaDB's GTID position at a binlog position (``''`` before any GTID); None where the
    server cannot tell (MySQL, a position inside an event, a purged file)."""
    try:
        rows = query(conn, "SELECT BINLOG_GTID_POS(%s, %s)", (position.file, position.offset))
    except pymysql.err.MySQLError:
        return None
    value = rows[0][0] if rows else None
    return None if value is None else str(value)
