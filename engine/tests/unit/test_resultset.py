"""The wire reader must give exactly the values a row-by-row parser gives, whatever the packet
layout, value lengths, NULLs and read boundaries; and stop on anything that does not add up."""

import random
import struct
import tracemalloc

import pymysql
import pytest

from lakehouse_engine.source.resultset import (
    MAX_PACKET,
    ProtocolError,
    TextResult,
    column_values,
    split_rows,
)


def lenenc(value: bytes | None) -> bytes:
    if value is None:
        return b"\xfb"
    n = len(value)
    if n < 251:
        head = bytes([n])
    elif n < 2**16:
        head = b"\xfc" + struct.pack("<H", n)
    elif n < 2**24:
        head = b"\xfd" + struct.pack("<I", n)[:3]
    else:
        head = b"\xfe" + struct.pack("<Q", n)
    return head + value


def packet(payload: bytes, seq: int) -> bytes:
    return struct.pack("<I", len(payload))[:3] + bytes([seq & 0xFF]) + payload


def packets(payload: bytes, seq: int) -> tuple[bytes, int]:
    """A payload as the server sends it: split at 16 MiB - 1, with an empty last packet when the
    length is an exact multiple."""
    out = b""
    while True:
        part, payload = payload[:MAX_PACKET], payload[MAX_PACKET:]
        out += packet(part, seq)
        seq += 1
        if len(part) < MAX_PACKET:
            return out, seq


EOF_PACKET = b"\xfe\x00\x00\x02\x00"
ERROR_PACKET = b"\xff" + struct.pack("<H", 1317) + b"#70100Query execution was interrupted"


def reference(rows_payloads: list[bytes], columns: int) -> list[list[bytes | None]]:
    """A plain row-by-row parser, the way pymysql reads values."""
    out: list[list[bytes | None]] = [[] for _ in range(columns)]
    for payload in rows_payloads:
        pos = 0
        for c in range(columns):
            first = payload[pos]
            if first == 0xFB:
                out[c].append(None)
                pos += 1
                continue
            width = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first, 0)
            n = int.from_bytes(payload[pos + 1 : pos + 1 + width], "little") if width else first
            pos += 1 + width
            out[c].append(payload[pos : pos + n])
            pos += n
    return out


def random_value(rng: random.Random) -> bytes | None:
    kind = rng.random()
    if kind < 0.15:
        return None
    if kind < 0.25:
        return b""
    if kind < 0.9:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
    return bytes(rng.randrange(256) for _ in range(rng.choice([250, 251, 252, 300, 65535, 65536, 70000])))


def random_rows(rng: random.Random, count: int, columns: int) -> list[bytes]:
    return [b"".join(lenenc(random_value(rng)) for _ in range(columns)) for _ in range(count)]


def stream(payloads: list[bytes], first_seq: int = 2, end: bytes = EOF_PACKET) -> bytes:
    seq = first_seq
    out = b""
    for payload in payloads:
        data, seq = packets(payload, seq)
        out += data
    return out + packet(end, seq)


def test_column_values_equal_a_row_by_row_parse_for_every_length_form():
    rng = random.Random(7)
    payloads = random_rows(rng, 300, 5)
    data = stream(payloads)
    split = split_rows(data, 0, 2)
    assert split.done and split.pos == len(data)
    arrays = column_values(data, split.starts, split.ends, 5)
    assert [a.to_pylist() for a in arrays] == reference(payloads, 5)


def test_a_block_being_read_is_parsed_in_place_and_left_as_it_was():
    payloads = random_rows(random.Random(11), 300, 5)
    data = stream(payloads)
    block = bytearray(data)
    split = split_rows(block, 0, 2)
    arrays = column_values(block, split.starts, split.ends, 5)
    assert [a.to_pylist() for a in arrays] == reference(payloads, 5)
    assert block == data  # nothing appended or changed: the reader goes on reading into it
    del block[:10]  # and no view of it is left behind that would stop it from being resized


def test_parsing_a_block_takes_under_three_times_its_size():
    # 5,000 rows of five 200-byte values, about 5 MiB. What is handed back is about the block's
    # size; the gather index of one column is built beside it. A copy of the block (padded) and
    # 64-bit gather indexes took five times the block's size.
    rng = random.Random(5)
    payloads = [b"".join(lenenc(rng.randbytes(200)) for _ in range(5)) for _ in range(5_000)]
    block = bytearray(stream(payloads))
    split = split_rows(block, 0, 2)
    tracemalloc.start()
    try:
        column_values(block, split.starts, split.ends, 5)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(block), (peak, len(block))


def test_rows_whose_lengths_point_past_their_end_are_refused_before_any_value_is_gathered():
    # An 8-byte length of 2**40 in a 10-byte row: gathering it first would need terabytes.
    payload = b"\xfe" + struct.pack("<Q", 2**40) + b"x"
    data = stream([payload])
    split = split_rows(data, 0, 2)
    with pytest.raises(ProtocolError, match="values"):
        column_values(data, split.starts, split.ends, 1)


def test_split_stops_at_an_incomplete_packet_and_resumes_there():
    payloads = random_rows(random.Random(1), 10, 3)
    data = stream(payloads)
    cut = len(data) - 30
    first = split_rows(data[:cut], 0, 2)
    assert not first.done and first.pos < cut
    rest = split_rows(data, first.pos, first.seq)
    assert rest.done
    assert len(first.starts) + len(rest.starts) == 10


def test_a_wrong_sequence_number_is_a_protocol_error():
    data = packet(lenenc(b"a"), 2) + packet(lenenc(b"b"), 4)
    with pytest.raises(ProtocolError, match="sequence"):
        split_rows(data, 0, 2)


def test_rows_that_do_not_hold_the_announced_columns_are_refused():
    payloads = [lenenc(b"1") + lenenc(b"2")]
    data = stream(payloads)
    split = split_rows(data, 0, 2)
    with pytest.raises(ProtocolError, match="values"):
        column_values(data, split.starts, split.ends, 3)
    with pytest.raises(ProtocolError, match="values"):
        column_values(data, split.starts, split.ends, 1)


def test_an_error_packet_ends_the_split_with_its_payload():
    data = stream([lenenc(b"1")], end=ERROR_PACKET)
    split = split_rows(data, 0, 2)
    assert split.error == ERROR_PACKET and len(split.starts) == 1


class FakeFile:
    def __init__(self, data: bytes, rng: random.Random):
        self.data, self.pos, self.rng = data, 0, rng

    def read1(self, size: int) -> bytes:
        n = min(size, self.rng.choice([1, 3, 7, 100, 5000, 1 << 20]))
        chunk = self.data[self.pos : self.pos + n]
        self.pos += len(chunk)
        return chunk


class FakeConnection:
    def __init__(self, data: bytes, rng: random.Random):
        self._rfile = FakeFile(data, rng)
        self._next_seq_id = 2
        self._read_timeout = self._current_timeout = None
        self.closed = False

    def _force_close(self):
        self.closed = True


class FakeResult:
    unbuffered_active = True
    connection = None


def reader(data: bytes, columns: int, seed: int = 3, block: int = 4096) -> TextResult:
    """A TextResult past its column definitions, reading ``data`` in odd-sized pieces."""
    result = TextResult.__new__(TextResult)
    result._conn = FakeConnection(data, random.Random(seed))
    result._block = block
    result._result = FakeResult()
    result.columns = tuple(range(columns))
    return result


def collect(result: TextResult, columns: int) -> list[list[bytes | None]]:
    out: list[list[bytes | None]] = [[] for _ in range(columns)]
    for block in result.blocks():
        for c, array in enumerate(block):
            out[c].extend(array.to_pylist())
    return out


@pytest.mark.parametrize("seed", range(4))
def test_blocks_give_every_row_once_across_arbitrary_read_boundaries(seed):
    payloads = random_rows(random.Random(seed), 500, 4)
    result = reader(stream(payloads), 4, seed)
    assert collect(result, 4) == reference(payloads, 4)
    assert result._conn._next_seq_id == (2 + 500 + 1) & 0xFF


def test_a_row_of_16_mib_and_more_is_joined_from_its_continuation_packets():
    big = bytes(range(256)) * (MAX_PACKET // 256 + 10)  # longer than one packet
    exact = b"x" * (MAX_PACKET - 2 - 4)  # with its prefixes exactly 16 MiB - 1: an empty tail packet
    small = [lenenc(str(i).encode()) + lenenc(b"v") for i in range(3)]
    payloads = [small[0], lenenc(b"1") + lenenc(big), small[1], lenenc(b"2") + lenenc(exact), small[2]]
    assert len(payloads[3]) == MAX_PACKET
    result = reader(stream(payloads), 2)
    assert collect(result, 2) == reference(payloads, 2)


def test_an_error_packet_mid_result_raises_the_server_error():
    result = reader(stream(random_rows(random.Random(2), 50, 2), end=ERROR_PACKET), 2)
    with pytest.raises(pymysql.err.OperationalError, match="interrupted"):
        collect(result, 2)


def test_a_connection_closed_mid_result_is_a_lost_connection_not_a_short_result():
    data = stream(random_rows(random.Random(2), 50, 2))
    result = reader(data[: len(data) // 2], 2)
    with pytest.raises(pymysql.err.OperationalError, match="Lost connection"):
        collect(result, 2)
    assert result._conn.closed
