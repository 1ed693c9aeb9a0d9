"""Each kind of value in its one canonical form, from SELECT's form or the binlog's.

One small function per kind of value (a DECIMAL wider than Spark's, a TIME, a BIT(n), a spatial
value, MariaDB's UUID/INET6...); :mod:`typemap` picks, once per column, which of them its
SELECT and binlog converters apply. Both paths must give the same value: the pitfalls of each
are noted where they are handled.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import struct
import uuid
from collections.abc import Callable
from decimal import Context, Decimal
from typing import Any, Literal, cast

MAX_DECIMAL_DIGITS = 65 + 30  # MySQL's DECIMAL(65,30) at most, with room to spare
SRID_BYTES = 4
WKB_HEADER_BYTES = 5  # the byte-order byte and the 4-byte geometry type
EWKB_SRID_FLAG = 0x20000000  # in an EWKB geometry type: an SRID follows the type


def as_text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def decimal_text(scale: int, value: Any) -> str:
    """DECIMAL wider than Spark's as positional text with the column's scale, like the server
    prints it: ``str(Decimal)`` would give ``'0E-30'`` or ``'-1E-30'``."""
    exact = Context(prec=MAX_DECIMAL_DIGITS)
    number = Decimal(value).quantize(Decimal(1).scaleb(-scale), context=exact)
    if number.is_zero():
        number = number.copy_abs()  # never '-0.00'
    return format(number, "f")


def unsigned_bigint(value: Any) -> Decimal:
    return Decimal(int(value))


def float32(value: Any) -> float:
    """The float32 nearest to ``value``: exact for the binlog's bits and for SELECT's DOUBLE."""
    return cast(float, struct.unpack("<f", struct.pack("<f", value))[0])  # per value: no conversion


def time_text(value: Any) -> str:
    """TIME as ``[-]H:MM:SS[.ffffff]``, from the timedelta both paths give."""
    if isinstance(value, (str, bytes)):
        return as_text(value)
    total_us = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if total_us < 0 else ""
    total_us = abs(total_us)
    seconds, micros = divmod(total_us, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{text}.{micros:06d}" if micros else text


def time2_from_binlog(value: dt.timedelta) -> dt.timedelta:
    """Undo python-mysql-replication 1.0.x's decoding of a negative TIME with a fraction.

    TIME2 stores ``-(whole + fraction)`` as one two's-complement number over the 3 integer
    bytes and the 1-3 fraction bytes. The library negates only the integer bytes, which (as the
    fraction is not zero) hold the floor, ``whole + 1`` second, and reads the fraction bytes as
    a signed ``-fraction``: it returns ``-(whole + 1 s - fraction)``, e.g. ``-00:00:01.250``
    as ``-00:00:01.750``. So for a negative value with a fraction, the true magnitude has the
    same whole seconds and the complementary fraction. Values without a fraction, and all
    non-negative ones, are decoded correctly and pass unchanged.
    """
    if value >= dt.timedelta(0):
        return value
    magnitude = -value
    if not magnitude.microseconds:
        return value
    whole = magnitude - dt.timedelta(microseconds=magnitude.microseconds)
    return -(whole + dt.timedelta(microseconds=1_000_000 - magnitude.microseconds))


def time_from_binlog(value: Any) -> str:
    if isinstance(value, dt.timedelta):
        value = time2_from_binlog(value)
    return time_text(value)


def zero_date_to_none(value: Any) -> Any:
    """SELECT returns zero/invalid dates as strings like '0000-00-00'; the binlog as None."""
    return None if isinstance(value, (str, bytes)) else value


def timestamp_utc(value: Any) -> Any:
    if isinstance(value, (str, bytes)):
        return None
    return value.replace(tzinfo=dt.UTC)


def bits_from_bytes(width: int, value: bytes) -> Any:
    return bool(int.from_bytes(value, "big")) if width == 1 else bytes(value)


def bits_from_string(width: int, value: Any) -> Any:
    """The binlog decodes BIT(n) as a string of '0'/'1'; SELECT gives big-endian bytes."""
    if isinstance(value, bytes):
        return bits_from_bytes(width, value)
    number = int(value, 2) if value else 0
    if width == 1:
        return bool(number)
    return number.to_bytes((width + 7) // 8, "big")


def set_from_binlog(members: tuple[str, ...], value: Any) -> str:
    """The binlog gives a Python set; SELECT gives members joined by ',' in definition order."""
    if isinstance(value, str):
        return value
    return ",".join(m for m in members if m in value)


def json_text(value: Any) -> str:
    """MariaDB stores JSON as text; MySQL's binlog gives dicts with bytes keys."""
    if isinstance(value, (str, bytes)):
        return as_text(value)
    return json.dumps(_plain_json(value), ensure_ascii=False)


def _plain_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {as_text(k): _plain_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_json(v) for v in value]
    if isinstance(value, bytes):
        return as_text(value)
    return value


def year_from_binlog(value: int) -> int:
    return 0 if value == 1900 else int(value)  # YEAR 0000 decodes as 1900 in the binlog


def timestamp_from_binlog(value: Any) -> Any:
    if value == dt.datetime(1970, 1, 1):  # zero TIMESTAMP is stored as epoch 0
        return None
    return timestamp_utc(value)


def pad_binary(width: int, value: Any) -> bytes:
    """The binlog strips BINARY(n)'s trailing zero bytes; SELECT keeps all n."""
    return as_bytes(value).ljust(width, b"\x00")


def as_bytes(value: Any) -> bytes:
    """Bytes as stored. The binlog gives binary strings as bytes, except the empty one as ''."""
    return value if isinstance(value, bytes) else as_text(value).encode("utf-8", "surrogateescape")


def spatial_wkb(value: Any) -> bytes:
    """Spatial values as WKB that keeps the SRID. Both paths give MySQL's internal form, a 4-byte
    SRID (little-endian) followed by standard WKB. SRID 0 (none) gives that standard WKB as is;
    any other SRID gives EWKB (PostGIS's extended WKB: the geometry type with its SRID flag
    ``0x20000000`` and the SRID after it), which GEOS/Shapely, JTS/Sedona and PostGIS read with
    its SRID, so that SRID 4326 and SRID 0 never look alike in the lake."""
    raw = as_bytes(value)
    srid, wkb = int.from_bytes(raw[:SRID_BYTES], "little"), raw[SRID_BYTES:]
    return ewkb(wkb, srid)


def ewkb(wkb: bytes, srid: int) -> bytes:
    """``wkb`` (standard WKB) with ``srid`` written into it as EWKB; ``wkb`` itself for SRID 0."""
    if not srid or len(wkb) < WKB_HEADER_BYTES:
        return wkb
    order: Literal["little", "big"] = "little" if wkb[0] == 1 else "big"  # the WKB's own (MySQL: little)
    kind = int.from_bytes(wkb[1:WKB_HEADER_BYTES], order) | EWKB_SRID_FLAG
    return wkb[:1] + kind.to_bytes(4, order) + srid.to_bytes(SRID_BYTES, order) + wkb[WKB_HEADER_BYTES:]


def uuid_text(raw: bytes) -> str:
    return str(uuid.UUID(bytes=raw))


def inet4_text(raw: bytes) -> str:
    return str(ipaddress.IPv4Address(raw))


def inet6_text(raw: bytes) -> str:
    """INET6 text exactly as MariaDB prints it (MySQL's INET6_NTOA rules), which differ from
    Python's: a lone zero group is compressed too, and '::a.b.c.d' / '::ffff:a.b.c.d' keep the
    dotted IPv4 tail."""
    words = struct.unpack(">8H", raw)
    gap_start, gap_length = _longest_zero_run(words)
    parts: list[str] = []
    index = 0
    while index < len(words):
        if index == gap_start:
            parts.append("" if index else ":")
            index += gap_length
            if index == len(words):
                parts.append("")
            continue
        ipv4_tail = gap_start == 0 and (gap_length == 6 or (gap_length == 5 and words[5] == 0xFFFF))
        if index == 6 and ipv4_tail:
            parts.append(str(ipaddress.IPv4Address(raw[12:])))
            break
        parts.append(f"{words[index]:x}")
        index += 1
    return ":".join(parts)


def _longest_zero_run(words: tuple[int, ...]) -> tuple[int, int]:
    """Start and length of the first longest run of zero words; (-1, 0) when there is none."""
    best = (-1, 0)
    start = -1
    for index, word in enumerate((*words, 1)):  # the sentinel closes a trailing run
        if word == 0 and start < 0:
            start = index
        elif word != 0 and start >= 0:
            if index - start > best[1]:
                best = (start, index - start)
            start = -1
    return best


def mariadb_binary_text(width: int, to_text: Callable[[bytes], str], value: Any) -> str:
    """UUID/INET4/INET6 from the binlog: raw bytes without trailing zero bytes."""
    return to_text(pad_binary(width, value))


def identity(value: Any) -> Any:
    return value
