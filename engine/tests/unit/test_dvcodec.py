"""Deletion vector bytes: Delta's own output read back and reproduced byte for byte, containers
laid out by hand from the Roaring format specification, and every corruption refused."""

from __future__ import annotations

import struct
import uuid
import zlib

import numpy as np
import pytest

from lakehouse_engine.sink import dvcodec
from lakehouse_engine.sink.dvcodec import DeletionVectorError, deserialize, serialize

# Written by Delta 4.4 (Spark's MERGE) for rows 0..3499 of a file: one run container.
DELTA_ROWS_0_TO_3499 = bytes.fromhex("d1d339640100000000000000000000003b300000010000ab0d01000000ab0d")


def _head(buckets: int) -> bytes:
    return struct.pack("<IQ", 1681511377, buckets)


def test_a_vector_delta_wrote_reads_as_its_rows_and_is_written_back_identically():
    assert deserialize(DELTA_ROWS_0_TO_3499).tolist() == list(range(3500))
    assert serialize(np.arange(3500)) == DELTA_ROWS_0_TO_3499


def test_scattered_rows_are_array_containers_under_their_16_bit_keys():
    expected = (_head(1) + struct.pack("<I", 0)  # bucket 0
                + struct.pack("<II", 12346, 2)  # no runs, two containers
                + struct.pack("<HHHH", 0, 1, 1, 0)  # key 0 holds 2 values, key 1 holds 1
                + struct.pack("<II", 24, 28)  # where each container starts
                + struct.pack("<HH", 1, 5) + struct.pack("<H", 70000 - 65536))
    assert serialize(np.array([70000, 5, 1, 5])) == expected
    assert deserialize(expected).tolist() == [1, 5, 70000]


def test_more_than_4096_scattered_rows_are_a_bitset():
    rows = np.arange(0, 20000, 2)  # 10,000 values, none consecutive: runs would be larger
    data = serialize(rows)
    assert struct.unpack_from("<IIHH", data, 16) == (12346, 1, 0, 9999)
    bitset = np.unpackbits(np.frombuffer(data[-8192:], dtype=np.uint8), bitorder="little")
    assert np.flatnonzero(bitset).tolist() == rows.tolist()
    assert deserialize(data).tolist() == rows.tolist()


def test_runs_in_four_or_more_containers_carry_the_offset_header():
    rows = np.concatenate([np.arange(k << 16, (k << 16) + 300) for k in range(4)])
    data = serialize(rows)
    cookie, = struct.unpack_from("<I", data, 16)
    assert cookie == 12347 | (3 << 16)  # runs, four containers
    # cookie, 1 byte of run flags, 4 key/cardinality pairs, then 4 offsets of 4 bytes
    first_offset, = struct.unpack_from("<I", data, 16 + 4 + 1 + 16)
    assert first_offset == 4 + 1 + 16 + 16
    assert deserialize(data).tolist() == rows.tolist()
    fewer = serialize(rows[:900])  # three containers: no offsets, each run is 2 + 4 bytes
    assert len(fewer) == 16 + 4 + 1 + 12 + 3 * 6 and deserialize(fewer).tolist() == rows[:900].tolist()


def test_4096_scattered_rows_are_still_an_array():
    rows = np.arange(0, 8192, 2)
    data = serialize(rows)
    assert np.frombuffer(data[-8192:], dtype="<u2").tolist() == rows.tolist()
    assert deserialize(data).tolist() == rows.tolist()


def test_positions_past_32_bits_go_to_their_own_bucket():
    data = serialize(np.array([7, (1 << 32) + 3]))
    assert struct.unpack_from("<Q", data, 4) == (2,)
    assert deserialize(data).tolist() == [7, (1 << 32) + 3]


def test_a_position_delta_would_read_as_negative_is_refused():
    with pytest.raises(DeletionVectorError):
        serialize(np.array([1 << 63], dtype=np.uint64))


def test_no_rows_is_an_empty_vector():
    assert serialize(np.array([], dtype=np.uint64)) == _head(0)
    assert deserialize(_head(0)).tolist() == []


@pytest.mark.parametrize("data", [
    b"\x00" * 12,  # wrong magic number
    DELTA_ROWS_0_TO_3499[:-2],  # cut short
    DELTA_ROWS_0_TO_3499 + b"\x00",  # bytes after the last bucket
    DELTA_ROWS_0_TO_3499.replace(bytes.fromhex("3b30"), bytes.fromhex("3c30")),  # unknown cookie
])
def test_malformed_vectors_are_refused(data: bytes):
    with pytest.raises(DeletionVectorError):
        deserialize(data)


def test_vectors_written_to_one_file_read_back_by_their_descriptors(tmp_path):
    first, second = serialize(np.array([1, 2, 3])), serialize(np.arange(10, 5000))
    stored = dvcodec.write_file(tmp_path, [first, second])
    file = tmp_path / f"deletion_vector_{stored[0].file_id}.bin"
    raw = file.read_bytes()
    assert raw[0] == 1 and stored[0].offset == 1 and stored[1].offset == 1 + 4 + len(first) + 4
    assert raw[1:5] == struct.pack(">I", len(first)) and raw[5 + len(first):9 + len(first)] == \
        struct.pack(">I", zlib.crc32(first))
    assert [s.cardinality for s in stored] == [3, 4990]
    assert dvcodec.read(tmp_path, stored[0].descriptor()).tolist() == [1, 2, 3]
    assert dvcodec.read(tmp_path, stored[1].descriptor()).tolist() == list(range(10, 5000))


def test_a_checksum_or_cardinality_that_does_not_match_is_refused(tmp_path):
    [stored] = dvcodec.write_file(tmp_path, [serialize(np.array([4, 8]))])
    descriptor = stored.descriptor()
    with pytest.raises(DeletionVectorError, match="holds 2 row"):
        dvcodec.read(tmp_path, {**descriptor, "cardinality": 3})
    file = tmp_path / f"deletion_vector_{stored.file_id}.bin"
    raw = bytearray(file.read_bytes())
    raw[-6] ^= 0xFF  # a bit of the bitmap
    file.write_bytes(bytes(raw))
    with pytest.raises(DeletionVectorError, match="checksum"):
        dvcodec.read(tmp_path, descriptor)


def test_a_descriptor_names_its_file_by_the_z85_of_its_uuid_after_any_prefix(tmp_path):
    # ZeroMQ's Z85 reference vector
    assert dvcodec.z85_encode(bytes.fromhex("864FD26FB559F75B")) == "HelloWorld"
    assert dvcodec.z85_decode("HelloWorld") == bytes.fromhex("864FD26FB559F75B")
    file_id = uuid.uuid4()
    (tmp_path / "ab").mkdir()
    data = serialize(np.array([9]))
    (tmp_path / "ab" / f"deletion_vector_{file_id}.bin").write_bytes(
        b"\x01" + struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data)))
    descriptor = {"storageType": "u", "pathOrInlineDv": "ab" + dvcodec.z85_encode(file_id.bytes), "offset": 1,
                  "sizeInBytes": len(data), "cardinality": 1}
    assert dvcodec.read(tmp_path, descriptor).tolist() == [9]


def test_an_inline_vector_is_read_from_its_descriptor(tmp_path):
    data = serialize(np.array([0, 1, 2, 3]))  # 4-byte multiple, as Z85 requires
    padded = data + b"\x00" * (-len(data) % 4)
    descriptor = {"storageType": "i", "pathOrInlineDv": dvcodec.z85_encode(padded), "sizeInBytes": len(data),
                  "cardinality": 4}
    assert dvcodec.read(tmp_path, descriptor).tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("values", [[], [7], [3, 1, 3, 2, 1], list(range(1000, 0, -1)) * 2, [0, 2**63, 5, 2**63]])
def test_sorted_unique_is_numpys_unique(values):
    array = np.asarray(values, dtype=np.uint64)
    assert dvcodec.sorted_unique(array).tolist() == np.unique(array).tolist()
