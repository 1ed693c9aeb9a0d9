"""The fast row-image decoder, value by value, on bytes laid out as the server writes them.

The integration test ``test_binlog_decoding`` compares it with python-mysql-replication on a
real server's binlog; these pin each encoding, including the ones a plausible slip would break
(signedness, a length prefix's width, an odd fraction precision, a negative DECIMAL)."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from pymysqlreplication.constants import BINLOG, FIELD_TYPE

from lakehouse_engine.cdc import charsets, rowimage
from lakehouse_engine.cdc.rowimage import RowImageError, decode, every_column, plan_for


def col(kind: int, name: str = "c", **attrs: Any) -> SimpleNamespace:
    return SimpleNamespace(type=kind, name=name, unsigned=attrs.pop("unsigned", False),
                           character_set_name=attrs.pop("charset", "utf8mb4"), **attrs)


def read_one(column: SimpleNamespace, data: bytes) -> Any:
    """The value of a one-column, non-NULL row image holding ``data``."""
    plan = plan_for([column])
    assert plan is not None
    values, end = plan.image(b"\x00" + data, 0)
    assert end == 1 + len(data), "the value must use exactly its bytes"
    return values[0]


@pytest.mark.parametrize(("kind", "unsigned", "data", "value"), [
    (FIELD_TYPE.TINY, False, b"\x80", -128), (FIELD_TYPE.TINY, True, b"\xff", 255),
    (FIELD_TYPE.SHORT, False, b"\x00\x80", -32768), (FIELD_TYPE.SHORT, True, b"\xff\xff", 65535),
    (FIELD_TYPE.INT24, False, b"\x00\x00\x80", -8388608), (FIELD_TYPE.INT24, True, b"\xff\xff\xff", 16777215),
    (FIELD_TYPE.INT24, False, b"\x01\x02\x03", 0x030201),
    (FIELD_TYPE.LONG, False, b"\x00\x00\x00\x80", -(2**31)), (FIELD_TYPE.LONG, True, b"\xff" * 4, 2**32 - 1),
    (FIELD_TYPE.LONGLONG, False, b"\x00" * 7 + b"\x80", -(2**63)),
    (FIELD_TYPE.LONGLONG, True, b"\xff" * 8, 2**64 - 1),
    (FIELD_TYPE.YEAR, False, b"\x7c", 2024), (FIELD_TYPE.YEAR, False, b"\x00", 1900),  # the library's 1900
])
def test_integers_are_little_endian_and_signed_unless_unsigned(kind, unsigned, data, value):
    assert read_one(col(kind, unsigned=unsigned), data) == value


def test_float_and_double_keep_their_width():
    assert read_one(col(FIELD_TYPE.FLOAT), struct.pack("<f", 0.1)) == struct.unpack("<f", struct.pack("<f", 0.1))[0]
    assert read_one(col(FIELD_TYPE.DOUBLE), struct.pack("<d", 0.1)) == 0.1


@pytest.mark.parametrize(("max_length", "prefix"), [(255, b"\x03"), (256, b"\x03\x00")])
def test_a_string_length_prefix_is_two_bytes_only_above_255_bytes(max_length, prefix):
    assert read_one(col(FIELD_TYPE.VARCHAR, max_length=max_length), prefix + b"abc") == "abc"


def test_strings_decode_in_their_charset_as_the_library_names_it():
    emoji = "ñ😀".encode()
    assert read_one(col(FIELD_TYPE.STRING, max_length=20), bytes([len(emoji)]) + emoji) == "ñ😀"
    # latin1 is the server's cp1252: 0x80 is the euro sign
    assert read_one(col(FIELD_TYPE.STRING, max_length=20, charset="latin1"), b"\x01\x80") == "€"
    assert read_one(col(FIELD_TYPE.STRING, max_length=20, charset=None), b"\x02\xc3\xa4") == "ä"


def test_latin1_decodes_every_byte_as_the_server_with_the_c1_controls_cp1252_leaves_undefined():
    column = col(FIELD_TYPE.BLOB, length_size=2, charset="cp1252")  # how the library names latin1
    text = read_one(column, b"\x00\x01" + bytes(range(256)))
    assert len(text) == 256 and text[0x80] == "€" and text[0xFF] == "ÿ"
    assert [text[b] for b in (0x81, 0x8D, 0x8F, 0x90, 0x9D)] == ["\x81", "\x8d", "\x8f", "\x90", "\x9d"]


def test_enum_and_set_members_of_a_latin1_column_are_decoded_in_latin1():
    enum = SimpleNamespace(character_set_name="cp1252", enum_values=["", "\udce9", "\u00e9"])
    utf8 = SimpleNamespace(character_set_name="utf8", set_values=["\u00e9", "b"])
    charsets.mend_columns([enum, utf8])
    # b'\xe9' is 'é'; b'\xc3\xa9' (UTF-8 'é' as the library read it) is 'Ã©' in latin1
    assert enum.enum_values == ["", "é", "Ã©"] and enum.character_set_name == charsets.MYSQL_LATIN1
    assert utf8.set_values == ["é", "b"] and utf8.character_set_name == "utf8"


def test_binary_values_and_charsets_without_a_codec_stay_bytes():
    assert read_one(col(FIELD_TYPE.BLOB, length_size=2, charset="binary"), b"\x02\x00\xff\x00") == b"\xff\x00"
    assert read_one(col(FIELD_TYPE.STRING, max_length=4, charset="ucs2"), b"\x02\x00a") == b"\x00a"
    # ... except an empty one, which the library's decode turns into "" (Python skips the codec)
    assert read_one(col(FIELD_TYPE.BLOB, length_size=1, charset="binary"), b"\x00") == ""


def test_invalid_text_in_its_charset_raises_like_the_library():
    plan = plan_for([col(FIELD_TYPE.VARCHAR, max_length=10)])
    with pytest.raises(UnicodeDecodeError):
        plan.image(b"\x00\x01\xff", 0)
    lenient = plan_for([col(FIELD_TYPE.VARCHAR, max_length=10)], ignore_decode_errors=True)
    assert lenient.image(b"\x00\x02a\xff", 0)[0] == ("a",)


@pytest.mark.parametrize("length_size", [1, 2, 3, 4])
def test_blob_lengths_take_the_columns_length_size(length_size):
    data = (5).to_bytes(length_size, "little") + b"hello"
    assert read_one(col(FIELD_TYPE.BLOB, length_size=length_size), data) == "hello"


# DECIMAL(14,4) from MySQL's documentation of the binary format (decimal.c): 1234567890.1234
# is 81 0D FB 38 D2 04 D2; its negation inverts every bit.
@pytest.mark.parametrize(("data", "value"), [
    (bytes.fromhex("810DFB38D204D2"), Decimal("1234567890.1234")),
    (bytes.fromhex("7EF204C72DFB2D"), Decimal("-1234567890.1234")),
    (bytes.fromhex("80000000000000"), Decimal("0.0000")),
])
def test_decimals_decode_the_documented_binary_layout(data, value):
    got = read_one(col(FIELD_TYPE.NEWDECIMAL, precision=14, decimals=4), data)
    assert got == value and str(got) == str(value)


def encode_decimal(text: str, precision: int, scale: int) -> bytes:
    """MySQL's binary DECIMAL of ``text`` (the test's own encoder, from the format's definition)."""
    negative = text.startswith("-")
    whole, _, fraction = text.lstrip("-").partition(".")
    whole = whole.lstrip("0").rjust(precision - scale, "0")
    fraction = fraction.ljust(scale, "0")
    out = b""
    lead = len(whole) % 9
    if lead:
        out += int(whole[:lead]).to_bytes(rowimage.COMPRESSED_BYTES[lead], "big")
    for at in range(lead, len(whole), 9):
        out += int(whole[at:at + 9]).to_bytes(4, "big")
    for at in range(0, len(fraction) - len(fraction) % 9, 9):
        out += int(fraction[at:at + 9]).to_bytes(4, "big")
    if tail := len(fraction) % 9:
        out += int(fraction[-tail:]).to_bytes(rowimage.COMPRESSED_BYTES[tail], "big")
    raw = bytearray(out)
    raw[0] |= 0x80
    return bytes(b ^ 0xFF for b in raw) if negative else bytes(raw)


@pytest.mark.parametrize(("precision", "scale", "text"), [
    (10, 2, "-99999999.99"), (10, 2, "12.50"), (10, 2, "0.00"),
    (38, 10, "9999999999999999999999999999.9999999999"), (38, 10, "-0.0000000001"),
    (65, 30, "12345678901234567890123456789012345.123456789012345678901234567891"),
    (65, 30, "-99999999999999999999999999999999999.999999999999999999999999999999"),
    (65, 0, "1" + "0" * 64), (18, 9, "-123456789.000000001"),
    (5, 5, "0.50000"), (5, 5, "-0.00001"), (9, 0, "-999999999"), (1, 0, "7"),
])
def test_decimals_of_every_group_layout_round_trip(precision, scale, text):
    got = read_one(col(FIELD_TYPE.NEWDECIMAL, precision=precision, decimals=scale),
                   encode_decimal(text, precision, scale))
    assert got == Decimal(text) and got.as_tuple().exponent == -scale


def packed_date(year: int, month: int, day: int) -> bytes:
    return (year << 9 | month << 5 | day).to_bytes(3, "little")


def test_dates_and_zero_dates():
    assert read_one(col(FIELD_TYPE.DATE), packed_date(2024, 2, 29)) == dt.date(2024, 2, 29)
    assert read_one(col(FIELD_TYPE.DATE), packed_date(9999, 12, 31)) == dt.date(9999, 12, 31)
    assert read_one(col(FIELD_TYPE.DATE), packed_date(0, 0, 0)) is None
    assert read_one(col(FIELD_TYPE.DATE), packed_date(2024, 0, 10)) is None


def packed_datetime(value: dt.datetime, fsp: int, *, month: int | None = None) -> bytes:
    year_month = value.year * 13 + (value.month if month is None else month)
    packed = 1 << 39 | year_month << 22 | value.day << 17 | value.hour << 12 | value.minute << 6 | value.second
    return packed.to_bytes(5, "big") + fraction(value.microsecond, fsp)


def fraction(micros: int, fsp: int) -> bytes:
    """The stored fraction: an odd precision keeps one more digit, as the server writes it."""
    size = (fsp + 1) // 2
    digits = micros // 10 ** (6 - size * 2) if size else 0
    return digits.to_bytes(size, "big") if size else b""


@pytest.mark.parametrize("fsp", range(7))
def test_datetimes_of_every_fraction_precision(fsp):
    value = dt.datetime(2024, 2, 29, 23, 59, 58, 123456)
    kept = value.replace(microsecond=value.microsecond - value.microsecond % 10 ** (6 - fsp))
    assert read_one(col(FIELD_TYPE.DATETIME2, fsp=fsp), packed_datetime(kept, fsp)) == kept


def test_a_zero_datetime_is_none_and_its_fraction_is_still_read():
    zero = dt.datetime(2024, 1, 10)
    assert read_one(col(FIELD_TYPE.DATETIME2, fsp=6), packed_datetime(zero, 6, month=0)) is None
    assert read_one(col(FIELD_TYPE.DATETIME2, fsp=0), (1 << 39).to_bytes(5, "big")) is None


@pytest.mark.parametrize("fsp", range(7))
def test_timestamps_are_naive_utc_with_their_fraction(fsp):
    micros = 999_999 - 999_999 % 10 ** (6 - fsp)
    data = struct.pack(">i", 2**31 - 1) + fraction(micros, fsp)
    assert read_one(col(FIELD_TYPE.TIMESTAMP2, fsp=fsp), data) == dt.datetime(2038, 1, 19, 3, 14, 7, micros)
    assert read_one(col(FIELD_TYPE.TIMESTAMP2, fsp=fsp), b"\x00" * len(data)) == dt.datetime(1970, 1, 1)


def test_enums_pick_their_member_by_index_and_index_zero_is_the_empty_string():
    members = ["", "x", "y", "ä"]  # the library puts the invalid value's "" first
    assert read_one(col(FIELD_TYPE.ENUM, size=1, enum_values=members), b"\x03") == "ä"
    assert read_one(col(FIELD_TYPE.ENUM, size=1, enum_values=members), b"\x00") == ""
    assert read_one(col(FIELD_TYPE.ENUM, size=2, enum_values=members), b"\x02\x00") == "y"
    assert read_one(col(FIELD_TYPE.ENUM, size=1, enum_values=None), b"\x01") is None  # no members known


def test_sets_are_the_members_of_their_bits_and_an_empty_set_is_not_null():
    members = ["a", "b", "ç"]
    assert read_one(col(FIELD_TYPE.SET, size=1, set_values=members), b"\x05") == {"a", "ç"}
    empty = read_one(col(FIELD_TYPE.SET, size=1, set_values=members), b"\x00")
    assert type(empty) is frozenset and not empty  # what binlog_values makes of the library's None
    wide = [f"m{i}" for i in range(64)]
    assert read_one(col(FIELD_TYPE.SET, size=8, set_values=wide), (1 << 63 | 2).to_bytes(8, "little")) == {"m1", "m63"}


def test_the_null_bitmap_marks_columns_by_position_across_bytes():
    columns = [col(FIELD_TYPE.TINY, f"c{i}") for i in range(10)]
    plan = plan_for(columns)
    # NULL in columns 1 and 8: bit 1 of the first byte, bit 0 of the second; eight values follow.
    image = bytes([0b10, 0b1]) + bytes(range(8))
    values, end = plan.image(image, 0)
    assert end == len(image)
    assert plan.names == tuple(f"c{i}" for i in range(10))
    assert values == (0, None, 1, 2, 3, 4, 5, 6, None, 7)


def test_column_names_a_python_source_would_misread_come_back_exactly():
    names = ["it's", 'say "hi"', "back\\slash", "new\nline", "}, pos", "ünï"]
    columns = [col(FIELD_TYPE.VARCHAR, n, max_length=300) for n in names]
    data = b"\x00" + b"".join(len(n.encode()).to_bytes(2, "little") + n.encode() for n in names)
    plan = plan_for(columns)
    values, end = plan.image(data, 0)
    assert plan.names == tuple(names) and values == tuple(names) and end == len(data)


def test_a_two_byte_string_length_cut_short_is_an_error_not_a_shorter_value():
    plan = plan_for([col(FIELD_TYPE.VARCHAR, "c", max_length=300)])
    with pytest.raises(IndexError):
        plan.image(b"\x00\x05", 0)  # the length's second byte is missing
    with pytest.raises(IndexError):
        plan.image(b"\x00\x05\x00abc", 0)  # five bytes announced, three there


def test_a_plan_is_kept_per_column_layout_and_another_layout_gets_its_own():
    latin = [col(FIELD_TYPE.LONG, "id"), col(FIELD_TYPE.VARCHAR, "t", max_length=40, charset="latin1")]
    again = [col(FIELD_TYPE.LONG, "id"), col(FIELD_TYPE.VARCHAR, "t", max_length=40, charset="latin1")]
    utf8 = [col(FIELD_TYPE.LONG, "id"), col(FIELD_TYPE.VARCHAR, "t", max_length=40, charset="utf8mb4")]
    assert plan_for(latin) is plan_for(again)  # the server's next table map: compiled once
    data = b"\x00" + struct.pack("<i", 1) + b"\x02" + "é".encode()
    assert plan_for(latin).image(data, 0)[0][1] == "Ã©"
    assert plan_for(utf8).image(data, 0)[0][1] == "é"
    assert plan_for(utf8, ignore_decode_errors=True) is not plan_for(utf8)


@pytest.mark.parametrize("kind", [FIELD_TYPE.BIT, FIELD_TYPE.JSON, FIELD_TYPE.TIME2,
                                  FIELD_TYPE.GEOMETRY, FIELD_TYPE.DATETIME, FIELD_TYPE.TIMESTAMP])
def test_a_table_with_a_type_not_decoded_here_goes_to_the_library(kind):
    assert plan_for([col(FIELD_TYPE.LONG, "id"), col(kind, "x")]) is None


def test_a_column_without_a_name_goes_to_the_library():
    assert plan_for([col(FIELD_TYPE.LONG, None)]) is None


class Packet:
    def __init__(self, data: bytes):
        self.data, self.read_bytes = data, 0

    def read(self, size: int) -> bytes:
        chunk = self.data[self.read_bytes:self.read_bytes + size]
        self.read_bytes += size
        return chunk


def event(kind: int, images: list[bytes], columns: list[SimpleNamespace]):
    bitmap = bytes([(1 << len(columns)) - 1])
    body = b"".join(images)
    return SimpleNamespace(event_type=kind, complete=True, columns=columns, number_of_columns=len(columns),
                           columns_present_bitmap=bitmap, columns_present_bitmap2=bitmap, packet=Packet(body),
                           event_size=len(body), schema="db", table="t", _ignore_decode_errors=False)


ID_NAME = [col(FIELD_TYPE.LONG, "id"), col(FIELD_TYPE.VARCHAR, "name", max_length=40)]


def image(key: int, name: str | None) -> bytes:
    if name is None:
        return b"\x02" + struct.pack("<i", key)
    return b"\x00" + struct.pack("<i", key) + bytes([len(name)]) + name.encode()


def test_an_update_event_yields_before_and_after_images_in_order():
    got = decode(event(BINLOG.UPDATE_ROWS_EVENT_V1, [image(1, "a"), image(1, "b"), image(2, None), image(3, "c")],
                       ID_NAME))
    assert got == (("id", "name"), [(1, "a"), (1, "b"), (2, None), (3, "c")], ("name",))


def test_write_and_delete_events_of_both_versions_decode():
    for kind in (BINLOG.WRITE_ROWS_EVENT_V1, BINLOG.WRITE_ROWS_EVENT_V2, BINLOG.DELETE_ROWS_EVENT_V1,
                 BINLOG.DELETE_ROWS_EVENT_V2):
        assert decode(event(kind, [image(1, "a"), image(2, "bb")], ID_NAME)) == (
            ("id", "name"), [(1, "a"), (2, "bb")], ("name",))


def test_bytes_left_after_the_last_image_stop_the_read():
    with pytest.raises(RowImageError, match=r"^a rows event of db\.t could not be decoded \(a value runs past"):
        decode(event(BINLOG.WRITE_ROWS_EVENT_V1, [image(1, "a"), b"\x00\x01"], ID_NAME))


def test_an_image_cut_short_stops_the_read():
    with pytest.raises(RowImageError, match="could not be decoded"):
        decode(event(BINLOG.WRITE_ROWS_EVENT_V1, [image(1, "abc")[:-1]], ID_NAME))


def test_an_update_with_an_odd_number_of_images_stops_the_read():
    with pytest.raises(RowImageError):
        decode(event(BINLOG.UPDATE_ROWS_EVENT_V1, [image(1, "a"), image(1, "b"), image(2, "c")], ID_NAME))


def test_events_the_library_must_decode_are_left_unread():
    cases = [
        event(BINLOG.PARTIAL_UPDATE_ROWS_EVENT, [image(1, "a"), image(1, "b")], ID_NAME),
        event(BINLOG.WRITE_ROWS_EVENT_V1, [image(1, "a")], [ID_NAME[0], col(FIELD_TYPE.JSON, "doc")]),
    ]
    for case in cases:
        assert decode(case) is None
        assert case.packet.read_bytes == 0


@pytest.mark.parametrize(("bitmap", "count", "full"), [
    (b"\x03", 2, True), (b"\xff", 8, True), (b"\xff\x01", 9, True), (b"\xff\xff", 16, True),
    (b"\x01", 2, False),  # a minimal image: the second column is missing
    (b"\xfe\x01", 9, False),  # the first column is missing
    (b"\x07", 2, False),  # a spare bit set must not stand in for a missing column
    (b"\xfd\x03", 9, False),  # as many bits as columns, but not the columns'
])
def test_every_column_means_exactly_the_bits_of_the_columns(bitmap, count, full):
    assert every_column(bitmap, count) is full


def test_a_plan_vouches_for_text_only_where_every_value_decodes_to_str():
    columns = [col(FIELD_TYPE.LONG, "id"), col(FIELD_TYPE.VARCHAR, "short", max_length=40),
               col(FIELD_TYPE.VARCHAR, "wide", max_length=400),
               col(FIELD_TYPE.STRING, "latin", max_length=4, charset="latin1"),
               col(FIELD_TYPE.BLOB, "long", length_size=4),
               col(FIELD_TYPE.BLOB, "raw", length_size=2, charset="binary"),
               col(FIELD_TYPE.STRING, "ucs", max_length=4, charset="ucs2"),
               col(FIELD_TYPE.ENUM, "kind", size=1, enum_values=["", "a"])]
    plan = plan_for(columns)
    assert plan is not None
    # binary and codec-less text stay bytes, an ENUM's members are the table map's: not vouched for
    assert plan.texts == ("short", "wide", "latin", "long")
