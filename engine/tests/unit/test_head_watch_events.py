"""Which binlog events wake an idle follow: only what the source wrote past the waited-for head;
and a dump reset while waited on fails as the driver's lost connection."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pymysql
import pytest

from lakehouse_engine.cdc import headwatch
from lakehouse_engine.cdc.headwatch import LOG_EVENT_ARTIFICIAL_F, EventHeader

XID, QUERY, ROTATE, FORMAT, HEARTBEAT, HEARTBEAT_V2, GTID_LIST = 16, 2, 4, 15, 27, 41, 163


def packet(kind: int, end: int, flags: int = 0) -> bytes:
    return b"\x00" + struct.pack("<IBIIIH", 1_700_000_000, kind, 1, 40, end, flags) + b"body"


def test_a_header_reads_type_end_position_and_flags_after_the_ok_byte():
    assert EventHeader.parse(packet(XID, 1234, 0x8)) == EventHeader(XID, 1234, 0x8)


@pytest.mark.parametrize(("kind", "end", "flags", "change"), [
    (XID, 5000, 0, True),  # a commit past the head
    (QUERY, 5000, 0, True),  # DDL
    (XID, 4000, 0, False),  # at the head: already read
    (HEARTBEAT, 9000, 0, False),
    (HEARTBEAT_V2, 9000, 0, False),  # MySQL 8.0.26+
    (GTID_LIST, 9000, LOG_EVENT_ARTIFICIAL_F, False),  # made up for the dump
    (FORMAT, 0, 0, False),  # the file's format description, resent at the dump's start
    (ROTATE, 0, LOG_EVENT_ARTIFICIAL_F, False),  # the rotate to the requested file
    (ROTATE, 4000, 0, True),  # FLUSH LOGS: the head moved to a new file
])
def test_only_events_written_past_the_head_are_a_change(kind, end, flags, change):
    assert EventHeader.parse(packet(kind, end, flags)).is_change(4000) is change


class _ResetSocket:
    def settimeout(self, value: float | None) -> None:
        pass


class _ResetBuffer:
    def peek(self, size: int) -> bytes:
        raise ConnectionResetError(104, "Connection reset by peer")


def test_a_connection_reset_while_waiting_is_the_drivers_lost_connection_error():
    # A held dump that raises the driver's error is opened again quietly; an OSError would not be.
    conn = SimpleNamespace(_sock=_ResetSocket(), _rfile=_ResetBuffer(), _read_timeout=50)
    with pytest.raises(pymysql.err.OperationalError, match="Lost connection"):
        headwatch._readable(conn, 0.1, None)  # type: ignore[arg-type]
