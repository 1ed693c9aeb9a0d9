"""Where a table started without a snapshot begins reading, as a binlog position.

``latest`` is the source's position at the first run and ``position`` is given. ``gtid`` and
``timestamp`` are found in the binlog, always at a commit boundary (where a checkpoint may
stand), by reading it with the engine's own decoder:

- ``gtid``: the end of the transaction with that MariaDB GTID (domain-server-seq). Each binlog
  file opens with the GTID list of everything logged before it (``Gtid_list``), so only the
  file whose list precedes the GTID is read, up to that transaction. A GTID position (one GTID
  per replication domain, as ``@@gtid_binlog_pos`` prints it) starts where the last of its
  transactions ends, once the server confirms its position there was exactly that.
- ``timestamp``: the end of the last transaction the binlog dates before that time. Binlog
  times are whole seconds, so the comparison is at the second: a transaction in the same second
  as the time is read (read once more rather than missed). Reading starts one file before the
  newest one whose first transaction is older than the time: binlog dates mostly grow with the
  files, but not strictly (a session's ``SET timestamp``, a replicated master's clock), and the
  margin makes a slightly earlier start, never a later one.

Both assume what MariaDB keeps by default: GTID sequence numbers grow within a domain.

Both refuse, with one line naming the setting, what the binlog no longer holds: a GTID in
purged files, or a time before the oldest binlog once older ones were purged.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Generator

import pymysql

from ..errors import ConfigError
from ..source.connection import binlog_sizes, current_position, gtid_position_at, query
from ..state.positions import GTID_TEXT, BinlogPosition, parse_gtid, parse_gtid_position
from .binlog import Transaction

# Reads the transactions ending after a position and at or before another (BinlogSource's).
Reader = Callable[[BinlogPosition, BinlogPosition], Generator[Transaction, None, None]]

FILE_START = 4  # the first event of a binlog file follows its 4-byte magic number


def logged_before(conn: pymysql.connections.Connection, file: str) -> dict[int, int] | None:
    """The GTID list ``file`` opens with: each domain's highest sequence logged before it
    (``{}`` for the first binlog ever, ``None`` on a server that writes no such list)."""
    for row in query(conn, "SHOW BINLOG EVENTS IN %s LIMIT 4", (file,)):
        if row[2] == "Gtid_list":
            before: dict[int, int] = {}
            for domain, _, seq in GTID_TEXT.findall(str(row[5])):
                before[int(domain)] = max(before.get(int(domain), 0), int(seq))
            return before
    return None


def after_gtid(conn: pymysql.connections.Connection, read: Reader, text: str, table: str) -> BinlogPosition:
    """The end of the transaction with the GTID ``text``; for a GTID position (one GTID per
    domain), the point of the binlog where the server's GTID position was exactly that."""
    gtids = parse_gtid_position(text)
    if len(gtids) == 1:
        return _after_one(conn, read, gtids[0], table)
    # The last of the transactions ends the point, if the position ever was one: then the
    # server's own GTID position there is the same set. A quiet domain's transaction may sit in
    # purged files (the position is still a point of the binlog): the others place it.
    oldest = logged_before(conn, next(iter(binlog_sizes(conn)))) or {}
    held = [g for g in gtids if oldest.get(parse_gtid(g)[0], 0) < parse_gtid(g)[2]]
    if not held:
        raise ConfigError(
            f"table {table}: start_gtid {text} is in binlogs the source has purged: start from a later GTID "
            "position, or use startup='initial'", table=table, setting="start_gtid")
    end = max(_after_one(conn, read, gtid, table) for gtid in held)
    there = gtid_position_at(conn, end)
    if there is None or set(there.split(",")) != set(gtids):
        raise ConfigError(
            f"table {table}: start_gtid {text} was never the source's GTID position (after the last of "
            f"its transactions, at {end}, it was {there or 'unknown'}): use a value of SELECT "
            "@@gtid_binlog_pos as the source printed it, or one GTID", table=table, setting="start_gtid")
    return end


def _after_one(conn: pymysql.connections.Connection, read: Reader, gtid: str, table: str) -> BinlogPosition:
    """The end of the transaction with ``gtid``."""
    domain, server, seq = parse_gtid(gtid)
    wanted = f"{domain}-{server}-{seq}"
    files = list(binlog_sizes(conn))
    head = current_position(conn)
    # The newest file opened before the GTID was logged holds it (sequences grow per domain).
    holder = next((f for f in reversed(files) if (logged_before(conn, f) or {}).get(domain, 0) < seq), None)
    if holder is None:
        raise ConfigError(
            f"table {table}: start_gtid {gtid} is in binlogs the source has purged (its oldest, {files[0]}, "
            "opens after it): start from a later GTID, or use startup='initial'", table=table, setting="start_gtid")
    with contextlib.closing(read(BinlogPosition(holder, FILE_START), head)) as transactions:
        for transaction in transactions:
            if transaction.gtid == wanted:
                return transaction.end
    logged = query(conn, "SELECT @@gtid_binlog_pos")[0][0]
    raise ConfigError(
        f"table {table}: start_gtid {gtid} is not in the source's binlog (it has logged up to {logged or 'nothing'}): "
        "use a GTID the source logged (SELECT @@gtid_binlog_pos), or startup='latest'",
        table=table, setting="start_gtid")


def at_time(conn: pymysql.connections.Connection, read: Reader, epoch_s: float, table: str) -> BinlogPosition:
    """The end of the last transaction dated before ``epoch_s`` (compared at the second); the
    source's position now when every transaction is older."""
    second = math.floor(epoch_s)
    files = list(binlog_sizes(conn))
    head = current_position(conn)
    newest = next((i for i in range(len(files) - 1, -1, -1) if _first_dated_before(read, files[i], head, second)),
                  None)
    start = files[max(newest - 1, 0)] if newest is not None else None
    if start is None:
        # Every binlog the source holds is from the time or later: complete only when none was purged.
        if logged_before(conn, files[0]) != {}:
            raise ConfigError(
                f"table {table}: start_timestamp is before the oldest binlog the source holds ({files[0]}); "
                "the changes since then were purged: use a later start_timestamp, or startup='initial'",
                table=table, setting="start_timestamp")
        start = files[0]
    previous = BinlogPosition(start, FILE_START)
    with contextlib.closing(read(previous, head)) as transactions:
        for transaction in transactions:
            if transaction.timestamp is not None and transaction.timestamp >= second:
                return previous
            previous = transaction.end
    return head


def _first_dated_before(read: Reader, file: str, head: BinlogPosition, second: int) -> bool:
    with contextlib.closing(read(BinlogPosition(file, FILE_START), head)) as transactions:
        first = next(transactions, None)
    return first is not None and first.timestamp is not None and first.timestamp < second
