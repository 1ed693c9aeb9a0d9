"""Wait for the source's binlog to move, blocked on a binlog dump socket instead of polling.

An idle ``follow`` used to ask the source for its binlog head once per interval (a query, a
cycle's bookkeeping, 2.5% of a core at the default 1 s and a busy loop at ``--interval 0``),
and a change waited for the next poll. Here an idle follow opens a dump from the head it saw
and sleeps in ``recv``: the server sends the next event as soon as it is written, and a
heartbeat event every ``heartbeat_s`` while it has none, which lets the waiter look at its stop
flag and deadline without a read timeout tearing the connection down.

Only each event's 19-byte header is looked at (its type, flags and end position): no row is
decoded and no table metadata is fetched. Events the server makes up for the dump itself (the
rotate to the requested file, its format description, MariaDB's GTID list and checkpoint, all
flagged artificial or at position 0) and heartbeats are not a change; anything else that ends
past the position waited from is. A rotation (FLUSH LOGS) counts: the head moved.
"""

from __future__ import annotations

import struct
import threading
import time
from dataclasses import dataclass
from typing import Any

import pymysql

from ..config.project import SourceProfile
from ..source.connection import connect
from ..state.positions import BinlogPosition

COM_BINLOG_DUMP = 0x12
ROTATE_EVENT = 4
HEARTBEAT_EVENTS = frozenset({27, 41})  # HEARTBEAT_LOG_EVENT; MySQL 8.0.26+: HEARTBEAT_LOG_EVENT_V2
LOG_EVENT_ARTIFICIAL_F = 0x20
_HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server id, size, end position, flags


@dataclass(frozen=True)
class EventHeader:
    kind: int
    end: int  # the event's end position in its file; 0 for events made up for the dump
    flags: int

    @classmethod
    def parse(cls, payload: bytes) -> EventHeader:
        """A binlog network packet: an OK byte, then the event (header first)."""
        _, kind, _, _, end, flags = _HEADER.unpack_from(payload, 1)
        return cls(kind, end, flags)

    def is_change(self, since: int) -> bool:
        """Whether the source wrote this event after position ``since`` of the dumped file."""
        if self.kind in HEARTBEAT_EVENTS or self.flags & LOG_EVENT_ARTIFICIAL_F or self.end == 0:
            return False
        return self.end > since or self.kind == ROTATE_EVENT


class HeadWatch:
    """Waits on a dump connection of its own, opened for a wait and closed after it: never left
    unread (the server's writes would pile up until it dropped the dump), and free of the
    server id for another reader of the same process between waits.

    ``hold``: a wait that ends without a change keeps the dump for the next wait from the same
    position (an idle ``follow`` waits again within moments, and opening a dump costs a login,
    three statements and the server's replay of the file's header events each time). Only a
    wait that saw a change, or :meth:`release`, closes it; a held dump that broke meanwhile (the
    server dropped it) is opened again once, quietly. The caller must not read the binlog with
    the same server id while a dump is held."""

    def __init__(self, profile: SourceProfile, server_id: int, heartbeat_s: float = 1.0, *, hold: bool = False):
        self._profile = profile
        self._server_id = server_id
        self._heartbeat_s = heartbeat_s
        self._hold = hold
        self._held: tuple[BinlogPosition, pymysql.connections.Connection] | None = None

    def wait_past(self, position: BinlogPosition, deadline: float, stop: threading.Event) -> bool:
        """True as soon as the source writes past ``position`` (a write since it, before the
        dump opened, included); False at ``deadline`` (``time.monotonic``) or once ``stop`` is
        set (seen within one heartbeat). Driver errors propagate: the caller polls instead."""
        held = self._take_held(position)
        if held is not None:
            try:
                return self._watched(held, position, deadline, stop)
            except pymysql.err.Error:
                pass  # dropped by the server while it went unread (and closed): a new dump below
        return self._watched(self._open(position), position, deadline, stop)

    def release(self) -> None:
        """Close a held dump (busy cycles follow, or the run ends)."""
        self._take_held(None)

    def _take_held(self, position: BinlogPosition | None) -> pymysql.connections.Connection | None:
        """The held dump when it waits from ``position``; any other is closed (``None``: all)."""
        held, self._held = self._held, None
        if held is None:
            return None
        if held[0] == position:
            return held[1]
        _close(held[1])
        return None

    def _watched(self, conn: pymysql.connections.Connection, position: BinlogPosition, deadline: float,
                 stop: threading.Event) -> bool:
        """Wait on ``conn``; then close it, or hold it when ``hold`` and nothing changed."""
        try:
            changed = False
            while not changed and not stop.is_set() and time.monotonic() < deadline:
                changed = _next(conn).is_change(position.offset)
        except BaseException:
            _close(conn)
            raise
        if changed or not self._hold:
            _close(conn)
        else:
            self._held = (position, conn)
        return changed

    def _open(self, position: BinlogPosition) -> pymysql.connections.Connection:
        # Several missed heartbeats before a read gives up: a stalled server is a lost connection.
        conn = connect(self._profile, read_timeout=max(5, int(self._heartbeat_s * 5)))
        try:
            with conn.cursor() as cur:
                # Declare that checksummed events are understood (else a server that writes
                # them refuses the dump), MariaDB's event capabilities, and the heartbeat.
                cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
                cur.execute("SET @mariadb_slave_capability = 4")
                cur.execute(f"SET @master_heartbeat_period = {int(self._heartbeat_s * 1e9)}")
            name = position.file.encode()
            body = struct.pack("<BIHI", COM_BINLOG_DUMP, position.offset, 0, self._server_id) + name
            wire: Any = conn  # pymysql's packet layer (untyped), as python-mysql-replication uses it
            wire._write_bytes(struct.pack("<I", len(body))[:3] + b"\x00" + body)  # sequence id 0
            wire._next_seq_id = 1
        except BaseException:
            conn.close()
            raise
        return conn


def _close(conn: pymysql.connections.Connection) -> None:
    try:
        conn.close()
    except Exception:  # a dump connection is closed from our side only: nothing to tell
        pass


def _next(conn: pymysql.connections.Connection) -> EventHeader:
    wire: Any = conn
    packet = wire._read_packet()  # raises the server's error (e.g. a purged binlog)
    return EventHeader.parse(packet.get_all_data())
