"""Connections to the source MySQL/MariaDB and the few statements every stage shares.

Every connection runs with ``time_zone = '+00:00'`` so TIMESTAMP values read by SELECT are UTC,
like the binlog's. Connection failures become one-line errors without the password.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pymysql
import pymysql.cursors

from ..config.project import SourceProfile
from ..errors import ConfigError, PreflightError, SourceUnavailableError
from ..state.positions import BinlogPosition

ACCESS_DENIED = {1044, 1045, 1698}
UNKNOWN_DATABASE = 1049
CANNOT_CONNECT = {2002, 2003, 2005, 2006, 2013}
NO_PRIVILEGE = {1227, 1142, 1143}


def quote_ident(name: str) -> str:
    """Quote an identifier for MySQL: backticks, with embedded backticks doubled."""
    return "`" + name.replace("`", "``") + "`"


def literal_percent(sql: str) -> str:
    """SQL text for a statement run with arguments: the driver reads each ``%`` as the start of a
    placeholder (``DATE_FORMAT``'s ``'%Y'``, a modulo, a column named ``growth_%``)."""
    return sql.replace("%", "%%")


def qualified(schema: str, table: str) -> str:
    return f"{quote_ident(schema)}.{quote_ident(table)}"


def connect(
    profile: SourceProfile,
    *,
    streaming: bool = False,
    read_timeout: int | None = 600,
) -> pymysql.connections.Connection:
    """Open a connection, turning driver errors into messages a user can act on."""
    try:
        return pymysql.connect(
            host=profile.host,
            port=profile.port,
            user=profile.user,
            password=profile.password,
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


def connection_error(exc: pymysql.err.MySQLError, profile: SourceProfile) -> Exception:
    code = exc.args[0] if exc.args else None
    where = f"{profile.user}@{profile.host}:{profile.port}"
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
            "start it (`make source-up` for the embedded demo) or fix host/port in profiles.yml"
        )
    return SourceUnavailableError(f"source error from {where}: {_reason(exc)}")


def _reason(exc: pymysql.err.MySQLError) -> str:
    message = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    return message.splitlines()[0][:200]


@contextmanager
def connection(profile: SourceProfile, **kwargs: Any) -> Iterator[pymysql.connections.Connection]:
    conn = connect(profile, **kwargs)
    try:
        yield conn
    finally:
        conn.close()


def query(conn: pymysql.connections.Connection, sql: str, args: Any = None) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


KEYS_PER_QUERY = 500  # key tuples per IN list


def query_keys(conn: pymysql.connections.Connection, head: str, width: int,
               keys: Sequence[tuple[Any, ...]]) -> list[tuple]:
    """Rows of ``head`` (``SELECT ... WHERE (key columns) IN``, its ``%`` doubled) for ``keys``
    (tuples of ``width`` values), asked in batches of ``KEYS_PER_QUERY``."""
    one = "(" + ", ".join(["%s"] * width) + ")"
    rows: list[tuple] = []
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
