"""The same row read by SELECT and decoded from the binlog must become the same values."""

import datetime as dt
import io
import struct
from decimal import Decimal
from types import SimpleNamespace

import pytest
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import RowsEvent
from pyspark.sql import types as T

from lakehouse_engine.source.canonical import ewkb
from lakehouse_engine.source.introspect import ColumnInfo, TableSchema
from lakehouse_engine.source.typemap import (
    binlog_converter,
    binlog_values,
    row_converter,
    select_converter,
    select_list,
    spark_type,
)


def col(data_type: str, column_type: str | None = None, **kw) -> ColumnInfo:
    name = kw.pop("name", "c")
    return ColumnInfo(name, data_type, column_type or data_type, kw.pop("nullable", True), **kw)


def same(column: ColumnInfo, selected, decoded):
    a, b = select_converter(column)(selected), binlog_converter(column)(decoded)
    assert a == b, (a, b)
    return a


def test_bigint_unsigned_is_an_exact_decimal():
    column = col("bigint", "bigint(20) unsigned")
    assert spark_type(column) == T.DecimalType(20, 0)
    assert same(column, 2**64 - 1, 2**64 - 1) == Decimal(2**64 - 1)


def test_wide_decimal_becomes_a_string():
    column = col("decimal", "decimal(65,2)", precision=65, scale=2)
    assert spark_type(column) == T.StringType()
    assert same(column, Decimal("1.50"), Decimal("1.50")) == "1.50"


def test_zero_dates_become_null_on_both_paths():
    assert same(col("date"), "0000-00-00", None) is None
    assert same(col("datetime"), "0000-00-00 00:00:00", None) is None
    assert same(col("timestamp"), "0000-00-00 00:00:00", dt.datetime(1970, 1, 1)) is None


def test_timestamps_are_utc_instants():
    column = col("timestamp")
    assert spark_type(column) == T.TimestampType()
    value = same(column, dt.datetime(2024, 5, 1, 12, 0), dt.datetime(2024, 5, 1, 12, 0))
    assert value.tzinfo == dt.UTC


def test_datetime_has_no_zone():
    assert spark_type(col("datetime")) == T.TimestampNTZType()
    assert same(col("datetime"), dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1)).tzinfo is None


def test_bit_strings_from_the_binlog_equal_bytes_from_select():
    assert same(col("bit", "bit(1)"), b"\x01", "1") is True
    assert same(col("bit", "bit(12)"), b"\x0a\x05", "101000000101") == b"\x0a\x05"


def test_set_members_keep_definition_order():
    column = col("set", "set('new','sale','eco')", nullable=False)
    assert same(column, "new,eco", {"eco", "new"}) == "new,eco"
    assert same(column, "", None) == ""


def test_year_zero_decodes_as_1900_in_the_binlog():
    assert same(col("year"), 0, 1900) == 0
    assert same(col("year"), 2024, 2024) == 2024


def test_time_is_a_signed_text():
    column = col("time")
    assert same(column, dt.timedelta(hours=-1, minutes=-30), dt.timedelta(hours=-1, minutes=-30)) == "-01:30:00"
    assert same(column, dt.timedelta(hours=838, microseconds=5), dt.timedelta(hours=838, microseconds=5)) == (
        "838:00:00.000005"
    )


def test_json_from_mysql_binlog_dicts_matches_select_text():
    assert same(col("json"), '{"a": [1, "x"]}', {b"a": [1, b"x"]}) == '{"a": [1, "x"]}'


def test_nulls_stay_null():
    for column in (col("int"), col("varchar"), col("json"), col("bit", "bit(3)")):
        assert same(column, None, None) is None


# --- empty SET in a nullable column ------------------------------------------------------

SET_COLUMN = col("set", "set('a','b')", nullable=True)


def test_an_empty_set_in_a_nullable_column_stays_an_empty_string_not_null():
    # What python-mysql-replication 1.0.x gives for '' and for NULL: None both times, told apart
    # only by the row's none_sources.
    empty = binlog_values({"c": None}, {"c": "empty set"})
    null = binlog_values({"c": None}, {"c": "null"})
    assert same(SET_COLUMN, "", empty["c"]) == ""
    assert same(SET_COLUMN, None, null["c"]) is None


def test_binlog_values_leaves_other_values_and_the_library_row_untouched():
    row = {"a": None, "b": {"x"}, "c": None}
    restored = binlog_values(row, {"a": "null", "c": "empty set"})
    assert restored == {"a": None, "b": {"x"}, "c": frozenset()}
    assert row["c"] is None


# --- negative TIME with fractions ----------------------------------------------------------


class _Packet:
    """Just enough of the library's packet reader to run its own TIME2 decoder on given bytes."""

    read_int_be_by_size = BinLogPacketWrapper.read_int_be_by_size
    read_int24_be = BinLogPacketWrapper.read_int24_be

    def __init__(self, data: bytes):
        self._data = io.BytesIO(data)

    def read(self, size) -> bytes:
        return self._data.read(int(size))


def library_time2(raw: bytes, fsp: int) -> dt.timedelta:
    """What python-mysql-replication returns for a TIME(fsp) value stored as ``raw``."""
    event = object.__new__(RowsEvent)
    event.packet = _Packet(raw)
    return event._RowsEvent__read_time2(SimpleNamespace(fsp=fsp))


def time2_bytes(negative: bool, hours: int, minutes: int, seconds: int, micros: int, fsp: int) -> bytes:
    """The server's TIME2 encoding (MySQL 5.6+/MariaDB 10.1+, my_time_packed_to_binary): the
    packed integer part (hh:10 bits, mm:6, ss:6) and the fraction (1 byte of 1/100 s for fsp 1-2,
    2 bytes of 1/10000 s for 3-4, 3 bytes of µs for 5-6) form one number, negated in two's
    complement when the time is negative, stored big-endian with the sign bit offset."""
    frac_bytes = (fsp + 1) // 2
    fraction = micros // 10 ** (6 - 2 * frac_bytes)
    magnitude = ((hours << 12 | minutes << 6 | seconds) << 8 * frac_bytes) | fraction
    width = 3 + frac_bytes
    return ((-magnitude if negative else magnitude) + (1 << (8 * width - 1))).to_bytes(width, "big")


def _time_cases():
    wholes = [(0, 0, 0), (0, 0, 1), (0, 0, 59), (1, 59, 59), (838, 59, 59)]
    for fsp in range(7):
        unit = 10 ** (6 - fsp)
        fractions = sorted({0, 500_000 // unit * unit, 250_000 // unit * unit, 999_999 // unit * unit}
                           | ({unit} if fsp else set()))
        for negative in (False, True):
            for hours, minutes, seconds in wholes:
                for micros in fractions:
                    if negative and (hours, minutes, seconds, micros) == (0, 0, 0, 0):
                        continue  # there is no negative zero
                    yield pytest.param(negative, hours, minutes, seconds, micros, fsp,
                                       id=f"time({fsp}){'-' if negative else '+'}{hours}:{minutes}:{seconds}.{micros}")


@pytest.mark.parametrize(("negative", "hours", "minutes", "seconds", "micros", "fsp"), list(_time_cases()))
def test_time_from_the_binlog_equals_select_for_every_sign_and_precision(
    negative, hours, minutes, seconds, micros, fsp
):
    column = col("time", f"time({fsp})" if fsp else "time")
    true_value = dt.timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=micros)
    selected = -true_value if negative else true_value  # what pymysql returns
    decoded = library_time2(time2_bytes(negative, hours, minutes, seconds, micros, fsp), fsp)
    text = f"{'-' if negative else ''}{hours:02d}:{minutes:02d}:{seconds:02d}" + (f".{micros:06d}" if micros else "")
    assert same(column, selected, decoded) == text


def test_the_pinned_library_still_misdecodes_negative_fractional_time():
    """Our correction assumes the library's bug; a fixed library would be corrected twice."""
    decoded = library_time2(time2_bytes(True, 0, 0, 1, 250_000, 3), 3)
    assert decoded == -dt.timedelta(seconds=1, microseconds=750_000)
    assert binlog_converter(col("time", "time(3)"))(decoded) == "-00:00:01.250000"


# --- FLOAT, wide DECIMAL ---------------------------------------------------------------------


def float32_bits(value: float) -> float:
    """What the binlog gives for a FLOAT: the stored float32, widened."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def test_float_is_read_exactly_by_select_and_equals_the_binlog_float32():
    columns = (col("int", name="id"), col("float", name="f`1"), col("double", name="d"))
    assert select_list(TableSchema("db", "t", columns, ("id",))) == "`id`, CAST(`f``1` AS DOUBLE) AS `f``1`, `d`"
    column = col("float")
    # The server prints FLOAT 1234567 as 1234570 and 3.14159265 as 3.14159; CAST AS DOUBLE
    # gives the stored float32 exactly, as the binlog does.
    for stored in (1234567.0, 3.14159265, 16777216.0, -3.4028234663852886e38, 1.401298464324817e-45):
        exact = float32_bits(stored)
        assert same(column, exact, exact) == exact


def test_wide_decimal_text_is_positional_with_the_column_scale_on_both_paths():
    column = col("decimal", "decimal(65,30)", precision=65, scale=30)
    tiny = "-0." + "0" * 29 + "1"
    assert same(column, Decimal(tiny), Decimal("-1E-30")) == tiny
    assert same(column, Decimal("0E-30"), Decimal("0." + "0" * 30)) == "0." + "0" * 30
    big = "9" * 35 + "." + "9" * 30
    assert same(column, Decimal(big), Decimal(big)) == big
    integral = col("decimal", "decimal(65,0)", precision=65, scale=0)
    assert same(integral, Decimal("1E+64"), Decimal("1" + "0" * 64)) == "1" + "0" * 64


# --- spatial and MariaDB's binary-backed text types --------------------------------------------


WKB_POINT = bytes.fromhex("0101000000000000000000f03f0000000000000040")  # POINT(1 2)
SPATIAL = ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
           "geometrycollection")


# PostGIS's ST_AsEWKB('SRID=4326;POINT(1 2)'): the type 1 with the SRID flag, then SRID 4326
EWKB_POINT_4326 = bytes.fromhex("0101000020e6100000000000000000f03f0000000000000040")


@pytest.mark.parametrize("kind", SPATIAL)
def test_spatial_values_without_an_srid_are_standard_wkb_on_both_paths(kind):
    column = col(kind)
    assert spark_type(column) == T.BinaryType()
    internal = struct.pack("<I", 0) + WKB_POINT  # MySQL's value: SRID, then WKB
    assert same(column, internal, internal) == WKB_POINT


@pytest.mark.parametrize("kind", SPATIAL)
def test_spatial_values_with_an_srid_keep_it_as_ewkb_on_both_paths(kind):
    internal = struct.pack("<I", 4326) + WKB_POINT
    assert same(col(kind), internal, internal) == EWKB_POINT_4326


def test_ewkb_writes_the_srid_in_the_wkb_own_byte_order():
    big_endian_point = bytes.fromhex("00000000013ff00000000000004000000000000000")  # POINT(1 2), XDR
    assert ewkb(big_endian_point, 4326) == bytes.fromhex("0020000001000010e63ff00000000000004000000000000000")
    assert ewkb(big_endian_point, 0) == big_endian_point


def test_a_multipolygon_with_non_utf8_bytes_is_not_decoded_as_text():
    wkb = bytes.fromhex("0106000000") + b"\x02\x00\x00\x00" + b"\xff\xfe\x80" * 5
    assert same(col("multipolygon"), b"\0\0\0\0" + wkb, b"\0\0\0\0" + wkb) == wkb


@pytest.mark.parametrize(
    ("kind", "text", "raw"),
    [
        ("uuid", "123e4567-e89b-12d3-a456-426614174000", bytes.fromhex("123e4567e89b12d3a456426614174000")),
        ("inet4", "10.0.0.0", bytes([10])),
        ("inet6", "fe80::1:0:0:0", bytes.fromhex("fe800000000000000001")),
        ("inet6", "1::2:3:4:5:6:7", bytes.fromhex("00010000000200030004000500060007")),
        ("inet6", "::", b""),
        ("inet6", "::2", bytes(15) + b"\x02"),
        ("inet6", "::1.2.3.4", bytes(12) + bytes([1, 2, 3, 4])),
        ("inet6", "::ffff:0.0.0.0", bytes(10) + b"\xff\xff"),
        ("inet6", "::1:0:0", bytes(10) + b"\x00\x01"),
        ("inet6", "::fffe:102:304", bytes(10) + b"\xff\xfe\x01\x02\x03\x04"),
        ("inet6", "abcd::", b"\xab\xcd"),
    ],
)
def test_mariadb_uuid_and_inet_bytes_from_the_binlog_read_like_select(kind, text, raw):
    # The binlog gives the stored bytes with trailing zero bytes stripped; SELECT the text.
    assert same(col(kind), text, raw) == text



def test_a_binlog_row_converts_as_each_columns_own_converter_does():
    # row_converter skips the columns whose values pass as they are and takes text in one call:
    # its rows must be exactly those of the columns' converters, NULLs and undecoded bytes included.
    columns = (col("int", name="i"), col("bigint", "bigint(20) unsigned", name="u"), col("varchar", name="v"),
               col("char", name="c"), col("double", name="d"), col("float", name="f"),
               col("decimal", "decimal(10,2)", name="m", precision=10, scale=2), col("date", name="dt"),
               col("timestamp", name="ts"), col("set", "set('a','b')", name="s", nullable=False),
               col("json", name="j"), col("bit", "bit(3)", name="b"))
    table = TableSchema("db", "t", columns, ("i",))
    rows = [
        {"i": 5, "u": 2**63 + 1, "v": "text", "c": b"caf\xc3\xa9", "d": 1.5, "f": 0.1, "m": Decimal("1.20"),
         "dt": dt.date(2024, 2, 29), "ts": dt.datetime(2024, 1, 1, 12), "s": None, "j": {"k": [1]}, "b": "101"},
        dict.fromkeys((c.name for c in columns), None),
    ]
    convert = row_converter(table, "binlog")
    for row in rows:
        assert convert(row) == tuple(binlog_converter(c)(row[c.name]) for c in columns)
