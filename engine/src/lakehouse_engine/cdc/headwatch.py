"""Wait for the source's binlog to move, blocked on a binlog dump socket instead of polling.

An idle ``follow`` used to ask the source for its binlog head once per interval (a query, a
cycle's bookkeeping, 2.5% of a core at the default 1 s and a busy loop at ``--interval 0``),
and a change waited for the next poll. Here an idle follow opens a dump from the head it saw
and sleeps in ``select`` on its socket: the server sends the next event as soon as it is
written. The waiter wakes at its deadline, at once when the process gets a signal (a stop
request: ``signal.set_wakeup_fd``, main thread only) and at least every ``heartbeat_s`` to look
at its stop flag (set by another thread). The server also sends a heartbeat event every
``heartbeat_s`` while it has no event to send, but not reliably: beside a follow's binlog reader
(which opens short dumps every few seconds) a held dump got none for 50 s on MariaDB 10.11 at a
10 s period. So heartbeats are never waited for; one read is only the server's word that it
wrote nothing past the position (``heard``).
A connection that died without a word (a peer host gone) is found by TCP keepalive.

Only each event's 19-byte header is looked at (its type, flags and end position): no row is
decoded and no table metadata is fetched. Events the server makes up for the dump itself (the
rotate to the requested file, its format description, MariaDB's GTID list and checkpoint, all
flagged artificial or at position 0) and heartbeats are not a change; anything else that ends
past the position waited from is. A rotation (FLUSH LOGS) counts: the head moved.
"""

from __future__ import annotations

import select
import signal
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
# A dump connection's TCP keepalive: a peer that stopped answering is given up after about 90 s.
KEEPALIVE = {"TCP_KEEPIDLE": 60, "TCP_KEEPINTVL": 10, "TCP_KEEPCNT": 3}
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
        # Whether the last wait read anything from the server: its False then means that the
        # source wrote nothing past the position (else the server may only have been silent).
        self.heard = False

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
        self.heard = False
        try:
            changed = False
            with _signal_wakeup() as signalled:
                while not changed and not stop.is_set() and (left := deadline - time.monotonic()) > 0:
                    if _readable(conn, min(left, self._heartbeat_s), signalled):
                        changed = _next(conn).is_change(position.offset)
                        self.heard = True
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
            _keep_alive(wire._sock)
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


def _keep_alive(sock: socket.socket) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in KEEPALIVE.items():
        if hasattr(socket, name):  # Linux names; elsewhere the system's keepalive timing stands
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


@contextmanager
def _signal_wakeup() -> Iterator[socket.socket | None]:
    """A socket that turns readable when a signal reaches the process, for as long as the block
    runs; None outside the main thread, or when another wakeup fd is set (not ours to take)."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    ours, theirs = socket.socketpair()
    try:
        ours.setblocking(False)
        theirs.setblocking(False)
        previous = signal.set_wakeup_fd(theirs.fileno(), warn_on_full_buffer=False)
        if previous != -1:
            signal.set_wakeup_fd(previous)
            yield None
            return
        try:
            yield ours
        finally:
            signal.set_wakeup_fd(-1)
    finally:
        ours.close()
        theirs.close()


def _readable(conn: pymysql.connections.Connection, timeout_s: float, signalled: socket.socket | None) -> bool:
    """Whether the next packet has begun to arrive (in the driver's buffer or on the socket, or
    the connection ended), waiting up to ``timeout_s`` or until ``signalled`` turns readable."""
    wire: Any = conn
    sock = wire._sock
    sock.settimeout(0)  # a peek at what is there, never a wait
    try:
        if wire._rfile.peek(1):
            return True
    except (BlockingIOError, ssl.SSLWantReadError):  # nothing buffered or on the socket yet
        pass
    except OSError as exc:  # e.g. reset by the server: the driver's own error, as a read raises it
        raise pymysql.err.OperationalError(2013, f"Lost connection to server during query ({exc})") from exc
    finally:
        sock.settimeout(wire._read_timeout)
    ready, _, _ = select.select([sock] if signalled is None else [sock, signalled], [], [], timeout_s)
    if signalled is not None and signalled in ready:
        try:
            signalled.recv(64)  # the signals' numbers; the caller looks at its stop flag
        except BlockingIOError:
            pass
    return sock in ready


def _next(conn: pymysql.connections.Connection) -> EventHeader:
    wire: Any = conn
    packet = wire._read_packet()  # raises the server's error (e.g. a purged binlog)
    return EventHeader.parse(packet.get_all_data())
