"""Read a SELECT's rows straight off the wire into Arrow columns, many rows at a time.

pymysql decodes every value in Python: about 16 us per row of 18 columns, which made it the
snapshot's bottleneck (a plain pymysql scan reads ~63k rows/s here). This module keeps pymysql
for everything but the rows: pymysql sends the query and reads the column definitions; the row
packets are then read here in large blocks. Python only walks the packet headers, one step per
row; the values of each column are located for all rows of a block at once with numpy and
gathered into an Arrow binary array. Turning those bytes into typed values is
:mod:`textcolumns`' job.

The text protocol, as pymysql 1.x speaks it (no ``CLIENT_DEPRECATE_EOF``): after the column
definitions and an EOF packet, each row is one packet (or, at 16 MiB and more, a packet and its
continuations) of length-encoded strings, ``0xFB`` standing for NULL; an EOF packet (``0xFE``,
shorter than 9 bytes) ends the rows, an error packet (``0xFF``) aborts them. Anything else that
does not add up (a wrong sequence number, a row whose values do not end where its packet ends)
is a protocol error: the read stops instead of guessing.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pymysql
from pymysql.connections import MySQLResult
from pymysql.constants import COMMAND, CR

MAX_PACKET = 0xFFFFFF  # a payload this long continues in the next packet
HEADER = 4
NULL = 0xFB
EOF = 0xFE
ERROR = 0xFF
BLOCK_BYTES = 4 << 20


class ProtocolError(pymysql.err.InternalError):
    """The server's bytes do not follow the protocol as this reader knows it."""


@dataclass(frozen=True)
class ResultColumn:
    """One column of the result, with what pymysql would use to decode its text."""

    name: str
    type_code: int
    charsetnr: int
    encoding: str | None  # None: binary, kept as bytes
    converter: Any  # pymysql's decoder for the type, or None


@dataclass
class Split:
    """The rows found in ``buf[start:]``: payload start/end offsets and where to go on."""

    starts: list[int]
    ends: list[int]
    pos: int  # first byte not consumed
    seq: int  # sequence number the next packet must carry
    done: bool = False  # the EOF packet was read
    error: bytes | None = None  # the payload of an error packet
    oversized: bool = False  # the packet at ``pos`` continues in the next one


def split_rows(buf: bytes | bytearray, start: int, seq: int) -> Split:
    """Walk the complete packets in ``buf[start:]``: one Python step per row."""
    starts: list[int] = []
    ends: list[int] = []
    size = len(buf)
    pos = start
    while size - pos >= HEADER:
        length = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
        if buf[pos + 3] != seq:
            raise ProtocolError(f"packet sequence number {buf[pos + 3]} where {seq} was expected")
        if length == MAX_PACKET:
            return Split(starts, ends, pos, seq, oversized=True)
        end = pos + HEADER + length
        if end > size:
            break
        first = buf[pos + HEADER] if length else -1
        if first == EOF and length < 9:
            return Split(starts, ends, end, (seq + 1) & 0xFF, done=True)
        if first == ERROR:
            return Split(starts, ends, end, (seq + 1) & 0xFF, error=bytes(buf[pos + HEADER:end]))
        starts.append(pos + HEADER)
        ends.append(end)
        seq = (seq + 1) & 0xFF
        pos = end
    return Split(starts, ends, pos, seq)


def column_values(buf: bytes | bytearray, starts: Sequence[int], ends: Sequence[int],
                  columns: int) -> list[pa.BinaryArray]:
    """The raw values of every column of the rows at ``starts``, as Arrow binary arrays.

    Value ``k`` of every row is located at once: read the length prefix at each row's cursor
    (1 byte below 251, else 0xFB NULL, 0xFC 2-byte, 0xFD 3-byte, 0xFE 8-byte length), then
    gather the bytes of all rows into one buffer with its offsets.

    The block is read where it is, never copied (a padded copy of a 4 MiB block was 8 MiB more
    of a Spark task's peak memory): reads that a row's own bytes do not need (a length prefix
    past the last row, a wide length's bytes for a row whose length is narrow) are clamped to
    the block's last byte, and no value is gathered before its row is known to hold it."""
    data = np.frombuffer(buf, dtype=np.uint8)
    last = len(data) - 1
    cursor = np.asarray(starts, dtype=np.int64)
    row_ends = np.asarray(ends, dtype=np.int64)
    rows = len(cursor)
    short = f"rows do not hold the {columns} values the result announced"
    out: list[pa.BinaryArray] = []
    for _ in range(columns):
        prefix = data[np.minimum(cursor, last)].astype(np.int64)
        length = np.where(prefix < NULL, prefix, 0)
        header = np.ones(rows, dtype=np.int64)
        for code, width in ((0xFC, 2), (0xFD, 3), (0xFE, 8)):
            wide = prefix == code
            if wide.any():
                length = np.where(wide, _little_endian(data, cursor + 1, width, last), length)
                header = np.where(wide, 1 + width, header)
        if (prefix == ERROR).any():
            raise ProtocolError("a row value starts with 0xFF")
        valid = prefix != NULL
        begin = cursor + header
        cursor = begin + length
        if (cursor > row_ends).any():
            raise ProtocolError(short)
        out.append(_binary_array(data, begin, length, valid))
    if not np.array_equal(cursor, row_ends):
        raise ProtocolError(short)
    return out


def _little_endian(data: np.ndarray, at: np.ndarray, width: int, last: int) -> np.ndarray:
    value = np.zeros(len(at), dtype=np.int64)
    for i in range(width):
        value |= data[np.minimum(at + i, last)].astype(np.int64) << (8 * i)
    return value


def _binary_array(data: np.ndarray, begin: np.ndarray, length: np.ndarray,
                  valid: np.ndarray) -> pa.BinaryArray:
    offsets = np.zeros(len(begin) + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    total = int(offsets[-1])
    # Index of every byte to gather: each value's begin, shifted to its place in the output. It
    # holds a number per byte: 32-bit ones where they reach (a block is a few MiB) halve the
    # memory and the time of building it.
    kind_of_index = np.int32 if len(data) < 2**31 else np.int64
    index = np.repeat((begin - offsets[:-1]).astype(kind_of_index), length)
    index += np.arange(total, dtype=kind_of_index)
    values = data[index]
    bitmap = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    kind = pa.binary() if total < 2**31 else pa.large_binary()
    offset_type = np.int32 if kind == pa.binary() else np.int64
    array = pa.Array.from_buffers(
        kind, len(begin), [bitmap, pa.py_buffer(offsets.astype(offset_type)), pa.py_buffer(values)]
    )
    return array


class TextResult:
    """Runs one SELECT on ``conn`` and yields its rows as blocks of raw column values."""

    def __init__(self, conn: pymysql.connections.Connection, sql: str, args: Any = None,
                 block_bytes: int = BLOCK_BYTES):
        # Any: this reads pymysql's private protocol state (``_sock``, ``_next_seq_id``,
        # ``MySQLResult.fields``...), which its type stubs do not declare.
        wire: Any = conn
        self._conn = wire
        self._block = block_bytes
        query = sql if args is None else sql % tuple(conn.literal(arg) for arg in args)
        wire._execute_command(COMMAND.COM_QUERY, query)
        result: Any = MySQLResult(conn)
        result.init_unbuffered_query()  # server errors and the column definitions, by pymysql
        wire._result = result
        self._result = result
        if not result.unbuffered_active:
            raise ProtocolError("the statement returned no rows to read")
        self.columns = tuple(
            ResultColumn(f.name, f.type_code, f.charsetnr, encoding, converter)
            for f, (encoding, converter) in zip(result.fields, result.converters, strict=True)
        )

    def blocks(self) -> Iterator[list[pa.BinaryArray]]:
        """Blocks of rows (about ``block_bytes`` each) until the result ends."""
        conn = self._conn
        if conn._current_timeout != conn._read_timeout:
            conn._sock.settimeout(conn._read_timeout)
            conn._current_timeout = conn._read_timeout
        buf = bytearray()
        pos = 0
        seq = conn._next_seq_id
        starts: list[int] = []
        ends: list[int] = []
        try:
            while True:
                split = split_rows(buf, pos, seq)
                starts += split.starts
                ends += split.ends
                pos, seq = split.pos, split.seq
                finished = split.done or split.error is not None
                if starts and (finished or split.oversized or ends[-1] >= self._block):
                    yield column_values(buf, starts, ends, len(self.columns))
                    starts, ends = [], []
                    del buf[:pos]
                    pos = 0
                if split.error is not None:
                    pymysql.err.raise_mysql_exception(split.error)
                if split.done:
                    if pos != len(buf):
                        raise ProtocolError("bytes follow the end of the result")
                    return
                if split.oversized:
                    row, pos, seq = self._long_row(buf, pos, seq)
                    del buf[:pos]
                    pos = 0
                    yield column_values(row, [0], [len(row)], len(self.columns))
                    continue
                if not starts:
                    del buf[:pos]
                    pos = 0
                buf += self._read()
        finally:
            conn._next_seq_id = seq
            self._result.unbuffered_active = False
            self._result.connection = None

    def _long_row(self, buf: bytearray, pos: int, seq: int) -> tuple[bytes, int, int]:
        """A row of 16 MiB or more: its packet and continuations, joined."""
        parts: list[bytes] = []
        while True:
            while len(buf) - pos < HEADER:
                buf += self._read()
            length = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
            if buf[pos + 3] != seq:
                raise ProtocolError(f"packet sequence number {buf[pos + 3]} where {seq} was expected")
            while len(buf) - pos < HEADER + length:
                buf += self._read()
            parts.append(bytes(buf[pos + HEADER : pos + HEADER + length]))
            pos += HEADER + length
            seq = (seq + 1) & 0xFF
            if length < MAX_PACKET:
                return b"".join(parts), pos, seq

    def _read(self) -> bytes:
        conn = self._conn
        try:
            chunk = conn._rfile.read1(self._block)
        except OSError as exc:
            if exc.errno == errno.EINTR:
                return b""
            conn._force_close()
            raise pymysql.err.OperationalError(
                CR.CR_SERVER_LOST, f"Lost connection to MySQL server during query ({exc})") from None
        if not chunk:
            conn._force_close()
            raise pymysql.err.OperationalError(CR.CR_SERVER_LOST, "Lost connection to MySQL server during query")
        return cast(bytes, chunk)  # a hot path: no copy
