"""The fingerprint over Arrow (``arrowprint``) against transcriptions of the Spark and SQL
expressions it mirrors: buckets truncated toward zero, the exact binary spelling of doubles, the
CRC-32 of values read in place, the fold of many terms, and the text forms of dates, times and
decimals. (That the whole fingerprint equals the source's SQL for every column type is proven on a
real server in ``test_full_types`` and ``test_fingerprint_literals``.)"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import random
import struct
import zlib
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from lakehouse_engine.quality import arrowprint
from lakehouse_engine.quality.bucketing import Bucketing
from lakehouse_engine.quality.fingerprint import (
    INT_OFFSET,
    MIN_EXPONENT,
    MODULUS,
    NULL_VALUE,
    SIGNIFICAND_BITS,
    TERMS_PER_REDUCTION,
    column_weight,
)
from lakehouse_engine.source.introspect import ColumnInfo

ID = ColumnInfo("id", "int", "int(11)", False)


def spelled_as_sql(x: float) -> str:
    """``fingerprint._sql_binary_float`` transcribed: the exponent guessed by a logarithm, then
    corrected by one where the guess was off."""
    size = abs(x)
    if size == 0:
        return "0"
    guess = max(math.floor(math.log2(size)), MIN_EXPONENT)
    scaled = size / 2.0 ** (guess - SIGNIFICAND_BITS)
    high = scaled >= 2 ** (SIGNIFICAND_BITS + 1)
    low = scaled < 2 ** SIGNIFICAND_BITS and guess > MIN_EXPONENT
    significand = scaled * (0.5 if high else 2.0 if low else 1.0)
    exponent = guess + (1 if high else -1 if low else 0) - SIGNIFICAND_BITS
    return f"{'-' if x < 0 else ''}{int(significand)}p{exponent}"


def test_ranged_buckets_truncate_toward_zero_and_a_null_key_has_none():
    keys = [-25, -20, -11, -10, -9, -1, 0, 9, 10, 25, None]
    bucket, has = arrowprint.buckets(Bucketing((ID,), width=10), pa.table({"id": pa.array(keys, pa.int32())}))
    expected = [-2, -2, -1, -1, 0, 0, 0, 0, 1, 2]
    assert bucket[:-1].tolist() == expected and has.tolist() == [True] * 10 + [False]


def test_hash_buckets_are_the_crc_of_the_keys_hex_spelling_joined_by_bars():
    order = ColumnInfo("order_id", "bigint", "bigint(20) unsigned", False)
    sku = ColumnInfo("sku", "varchar", "varchar(32)", True)
    blob = ColumnInfo("b", "varbinary", "varbinary(8)", True)
    table = pa.table({"order_id": pa.array([Decimal(2**64 - 1), Decimal(7), None], pa.decimal128(20, 0)),
                      "sku": pa.array(["ab-1", None, "Grüße"]), "b": pa.array([b"\x00", None, b""], pa.binary())})
    def hexed(text: str) -> str:
        return text.encode().hex().upper()

    def md5(data: bytes) -> str:
        return hashlib.md5(data).hexdigest().upper()

    # Text and binary key columns are variable-length: their MD5; numbers: their text in hex.
    spelled = [f"{hexed('18446744073709551615')}|{md5(b'ab-1')}|{md5(bytes(1))}", f"{hexed('7')}|N|N",
               f"N|{md5('Grüße'.encode())}|{md5(b'')}"]
    key = (order, sku, blob)
    assert arrowprint.key_ids(key, table).to_pylist() == spelled
    bucket, has = arrowprint.buckets(Bucketing(key, count=64), table)
    assert bucket.tolist() == [zlib.crc32(s.encode()) % 64 for s in spelled] and has.all()
    when = ColumnInfo("d", "date", "date", True)
    dates = pa.table({"d": pa.array([None, dt.date(2024, 2, 29), dt.date(99, 1, 2)])}).slice(1)
    assert arrowprint.key_ids((when,), dates).to_pylist() == [hexed("2024-02-29"), hexed("0099-01-02")]


def test_a_double_is_spelled_exactly_as_the_sql_and_spark_expressions_spell_it():
    rng = random.Random(7)
    values = [0.0, -0.0, 1.0, -1.0, 0.1, 1e20, 5e-324, -5e-324, 2.2250738585072014e-308, 2.225073858507201e-308,
              1.7976931348623157e308, -1.7976931348623157e308, 3.4028234663852886e38, 1.401298464324817e-45]
    values += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(63)))[0] for _ in range(2000)]
    values += [rng.uniform(-1e6, 1e6) for _ in range(500)]
    values = [v for v in values if math.isfinite(v)]
    spelled = arrowprint.canonical_bytes(ColumnInfo("g", "double", "double", True), pa.array(values + [None]))
    assert spelled.to_pylist() == [spelled_as_sql(v) for v in values] + [None]


def test_a_float_is_widened_to_double_before_it_is_spelled():
    values = [np.float32(v) for v in (0.1, -3.4028235e38, 1.17549435e-38, 1e-45)]
    spelled = arrowprint.canonical_bytes(ColumnInfo("f", "float", "float", True), pa.array(values, pa.float32()))
    assert spelled.to_pylist() == [spelled_as_sql(float(v)) for v in values]


def test_crcs_are_read_in_place_from_a_sliced_array_with_nulls():
    texts = ["", "a", "Grüße €", None, "x" * 300, "ünïcødé ✓", None, "last"]
    whole = pa.array(["skipped"] + texts)
    sliced = whole.slice(1)
    crcs, valid = arrowprint.crc32s(sliced)
    assert valid.tolist() == [t is not None for t in texts]
    expected = [zlib.crc32(t.encode()) for t in texts if t is not None]
    assert [int(c) for c, v in zip(crcs, valid, strict=True) if v] == expected
    binary, _ = arrowprint.crc32s(pa.array([b"\x00\xff", b""], pa.binary()))
    assert binary.tolist() == [zlib.crc32(b"\x00\xff"), 0]


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary()])
def test_crcs_of_values_of_one_length_computed_together_are_zlibs(kind):
    rng = random.Random(5)
    # Lengths held by many values (CRC'd together, in several blocks for 16 bytes), by few
    # (zlib), over the longest CRC'd together, empty values and NULLs; distinct values (no
    # dictionary), read from a slice.
    lengths = ([16] * (arrowprint.TOGETHER_PER_STEP + 300) + [1, 3, 4, 5, 63, 64] * 70
               + [65, 200] * 80 + [0] * 100 + [7] * 10)
    values: list[bytes | None] = [rng.randbytes(n) for n in lengths] + [None] * 50
    rng.shuffle(values)
    crcs, valid = arrowprint.crc32s(pa.array([b"skipped"] + values, kind).slice(1))
    assert [int(c) if v else None for c, v in zip(crcs, valid, strict=True)] == [
        None if v is None else zlib.crc32(v) for v in values]


def test_crcs_of_text_of_one_length_are_zlibs_of_its_utf8():
    texts = [f"AAAAAAAA{i:08X}" for i in range(5000)] + ["Grüße €" * 3] * 1 + [f"ünï{i:05d}" for i in range(200)]
    for kind in (pa.string(), pa.large_string()):
        crcs, _ = arrowprint.crc32s(pa.array(texts, kind))
        assert crcs.tolist() == [zlib.crc32(t.encode()) for t in texts]


def test_crcs_of_a_column_of_repeats_are_each_values_own():
    rng = random.Random(11)
    words = [rng.randbytes(rng.randint(0, 40)) for _ in range(50)]
    values = [rng.choice(words + [None]) for _ in range(5000)]  # dictionary-encoded: few distinct
    crcs, valid = arrowprint.crc32s(pa.array(values, pa.binary()).slice(7))
    assert [int(c) if v else None for c, v in zip(crcs, valid, strict=True)] == [
        None if v is None else zlib.crc32(v) for v in values[7:]]
    _, valid = arrowprint.crc32s(pa.array([None] * 5000, pa.string()))  # an empty dictionary
    assert not valid.any()


def test_many_columns_fold_every_48_terms_modulo_the_prime_as_the_expressions_do():
    rng = random.Random(3)
    columns = [ColumnInfo(f"c{i}", "int", "int(11)", True) for i in range(TERMS_PER_REDUCTION * 2 + 5)]
    rows = [[rng.choice([None, rng.randint(-2**31, 2**31 - 1)]) for _ in columns] for _ in range(50)]
    table = pa.table({c.name: pa.array([r[i] for r in rows], pa.int32()) for i, c in enumerate(columns)})

    def expected(row: list[int | None]) -> int:
        terms = [(NULL_VALUE if v is None else v + INT_OFFSET) * column_weight(i) for i, v in enumerate(row)]
        total = None
        for start in range(0, len(terms), TERMS_PER_REDUCTION):
            chunk = terms[start:start + TERMS_PER_REDUCTION] + ([] if total is None else [total])
            assert sum(chunk) < 2**63  # the bound both sides rely on
            total = sum(chunk) % MODULUS
        return total

    assert arrowprint.row_hashes(columns, table).tolist() == [expected(r) for r in rows]


def test_a_bigint_is_weighed_by_its_two_halves_signed_or_unsigned():
    signed = ColumnInfo("i", "bigint", "bigint(20)", True)
    unsigned = ColumnInfo("u", "bigint", "bigint(20) unsigned", True)
    low, high = column_weight(0), column_weight(0, high_half=True)
    for col, array, numbers in (
            (signed, pa.array([-1, -2**63, 2**63 - 1, None], pa.int64()), [2**64 - 1, 2**63, 2**63 - 1, None]),
            (unsigned, pa.array([Decimal(2**64 - 1), Decimal(0), None], pa.decimal128(20, 0)), [2**64 - 1, 0, None])):
        terms = arrowprint.term(col, 0, array).tolist()
        assert terms == [NULL_VALUE * low if n is None else (n % 2**32) * low + (n >> 32) * high for n in numbers]


def test_dates_datetimes_timestamps_and_decimals_are_spelled_as_silvers_text_casts():
    dates = arrowprint.canonical_bytes(ColumnInfo("d", "date", "date", True),
                                       pa.array([dt.date(99, 1, 2), dt.date(9999, 12, 31), None]))
    assert dates.to_pylist() == ["0099-01-02", "9999-12-31", None]
    times = arrowprint.canonical_bytes(ColumnInfo("t", "datetime", "datetime(6)", True), pa.array(
        [dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.datetime(2024, 2, 29), None], pa.timestamp("us")))
    assert times.to_pylist() == ["1969-12-31 23:59:59.999999", "2024-02-29 00:00:00.000000", None]
    stamps = arrowprint.canonical_bytes(ColumnInfo("s", "timestamp", "timestamp(3)", True), pa.array(
        [dt.datetime(1971, 1, 1, 0, 0, 1, 500000, tzinfo=dt.UTC), None], pa.timestamp("us", "UTC")))
    assert stamps.to_pylist() == ["31536001500000", None]
    decimals = arrowprint.canonical_bytes(ColumnInfo("n", "decimal", "decimal(30,10)", True, 30, 10), pa.array(
        [Decimal("0.0000000001"), Decimal("-12345678901234567890.0123456789"), Decimal(0), None],
        pa.decimal128(30, 10)))
    assert decimals.to_pylist() == ["0.0000000001", "-12345678901234567890.0123456789", "0.0000000000", None]


def test_a_column_silver_holds_in_an_unexpected_type_is_refused_not_guessed():
    with pytest.raises(arrowprint.Unprintable):
        arrowprint.term(ColumnInfo("v", "varchar", "varchar(5)", True), 0, pa.array([1, 2]))
    with pytest.raises(arrowprint.Unprintable):
        arrowprint.term(ColumnInfo("n", "int", "int(11)", True), 0, pa.array(["1"]))


def test_text_read_as_dictionaries_has_the_fingerprints_of_its_values():
    # silver's repeating columns come from the files' dictionaries: one per file chunk, with NULLs
    # and a chunk holding nothing but NULLs (an empty dictionary).
    rng = random.Random(5)
    words = ["gold", "silver", "", "bronze", "Éclair"]
    parts = [[rng.choice([*words, None]) for _ in range(300)], [None] * 40, [rng.choice(words) for _ in range(90)]]
    columns = [ID, ColumnInfo("tier", "varchar", "varchar(10)", True),
               ColumnInfo("raw", "varbinary", "varbinary(9)", True)]
    flat = [v for part in parts for v in part]
    dense = pa.table({"id": pa.array(range(len(flat)), pa.int32()), "tier": pa.array(flat, pa.string()),
                      "raw": pa.array([None if v is None else v.encode() for v in flat], pa.binary())})
    encoded = dense.set_column(1, "tier", pa.chunked_array(
        [pa.array(p, pa.string()).dictionary_encode() for p in parts]))
    encoded = encoded.set_column(2, "raw", pa.chunked_array(
        [pa.array([None if v is None else v.encode() for v in p], pa.binary()).dictionary_encode() for p in parts]))
    assert pa.types.is_dictionary(encoded.schema.field("tier").type)
    assert arrowprint.row_hashes(columns, encoded).tolist() == arrowprint.row_hashes(columns, dense).tolist()
