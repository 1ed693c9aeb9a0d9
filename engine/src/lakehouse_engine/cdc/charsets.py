"""Text in the binlog decoded exactly as the server decodes it.

The binlog carries a text column's bytes in the column's own charset; SELECT (on the engine's
utf8mb4 connections) carries the server's conversion of them. The two must give the same text:

- **latin1.** MySQL and MariaDB call ``latin1`` what is Windows cp1252, except that the five
  bytes cp1252 leaves undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D) are the C1 control characters
  U+0081... (the server stores them and SELECT returns them). pymysql and python-mysql-replication
  decode latin1 with Python's ``cp1252``, which refuses those bytes, so a row holding one stopped
  the table on the binlog path. :data:`MYSQL_LATIN1` is the server's table, registered as a
  Python codec so that the library (through the column's charset name) and :mod:`.rowimage`
  decode with it alike.
- **ENUM and SET members of a non-UTF-8 column.** The table map carries each member's bytes in
  the column's charset; python-mysql-replication 1.0.x decodes them as UTF-8 and turns a member
  it cannot decode into ``""`` (a latin1 ``ENUM('é')`` value read as the empty string, silently).
  :func:`install` makes it keep the bytes (UTF-8 with ``surrogateescape``, so nothing is lost)
  and then decodes each member in its column's charset.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from functools import cache
from typing import Any

from pymysql.charset import charset_by_name
from pymysqlreplication.row_event import TableMapEvent

MYSQL_LATIN1 = "mysql_latin1"
# How pymysql and the library name the Python codec of a MySQL charset they know.
_PYTHON_LATIN1 = "cp1252"
UTF8_NAMES = frozenset({"utf8", "utf8mb4", "utf8mb3", "utf-8"})


def _latin1_table() -> str:
    """The 256 characters of the server's latin1: cp1252, with its undefined bytes as C1 controls."""
    chars = []
    for byte in range(256):
        try:
            chars.append(bytes([byte]).decode(_PYTHON_LATIN1))
        except UnicodeDecodeError:
            chars.append(chr(byte))  # 0x81 -> U+0081, as the server maps it
    return "".join(chars)


_DECODING_TABLE = _latin1_table()
_ENCODING_TABLE = codecs.charmap_build(_DECODING_TABLE)


def _encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
    return codecs.charmap_encode(text, errors, _ENCODING_TABLE)


def _decode(data: Any, errors: str = "strict") -> tuple[str, int]:  # data: any bytes-like object
    return codecs.charmap_decode(data, errors, _DECODING_TABLE)


def _search(name: str) -> codecs.CodecInfo | None:
    if name != MYSQL_LATIN1:
        return None
    return codecs.CodecInfo(_encode, _decode, name=MYSQL_LATIN1)


codecs.register(_search)


@cache
def python_encoding(name: str | None) -> str | None:
    """The Python codec of a charset as the library names a column's (``utf8mb4`` is ``utf8``,
    ``latin1`` is ``cp1252``, an unknown one keeps its own name), decoding as the server does;
    None: Python has no such codec (the value stays bytes, as the library leaves it)."""
    if name is None:
        return "utf-8"  # no charset in the table map: the library decodes UTF-8
    charset: Any = charset_by_name(name)  # None for a charset pymysql does not know
    encoding = charset.encoding if charset is not None else name
    if encoding in (_PYTHON_LATIN1, "latin1"):
        return MYSQL_LATIN1
    try:
        codecs.lookup(encoding)
    except LookupError:
        return None
    return encoding


def member_text(member: str, encoding: str | None) -> str:
    """An ENUM/SET member kept by :func:`_read_type_values` (its bytes as UTF-8 with
    ``surrogateescape``) as text of ``encoding``, the column's charset. A member that cannot be
    decoded is ``""``, as the library gives it."""
    raw = member.encode("utf-8", "surrogateescape")
    try:
        return raw.decode(encoding or "utf-8")
    except (UnicodeDecodeError, LookupError):
        return ""


def mend_columns(columns: Sequence[Any]) -> None:
    """Give a table map's columns the server's decoding: the charset name of the codec that
    decodes like the server, and ENUM/SET members decoded in the column's charset."""
    for column in columns:
        name = getattr(column, "character_set_name", None)
        encoding = python_encoding(name) if name is not None else None
        if encoding is not None and encoding not in UTF8_NAMES:
            column.character_set_name = encoding  # the library looks the codec up by this name
        for attribute in ("enum_values", "set_values"):
            members = getattr(column, attribute, None)
            if members:
                setattr(column, attribute, [member_text(m, encoding) for m in members])


def _read_type_values(self: Any, length: int) -> list[list[str]] | None:
    """python-mysql-replication 1.0.x's ``TableMapEvent._read_type_values``, keeping every
    member's bytes (UTF-8 with ``surrogateescape``) where the library drops a member that is not
    UTF-8; :func:`mend_columns` decodes them in the column's charset."""
    result: list[list[str]] = []
    read_until = self.packet.read_bytes + length
    if self.packet.read_bytes >= read_until:
        return None
    while self.packet.read_bytes < read_until:
        count = self.packet.read_length_coded_binary()
        result.append([self.packet.read_variable_length_string().decode("utf-8", "surrogateescape")
                       for _ in range(count)])
    return result


_LIBRARY_SYNC = TableMapEvent._sync_column_info


def _sync_column_info(self: Any) -> None:
    _LIBRARY_SYNC(self)
    mend_columns(self.columns)


def install() -> None:
    """Make python-mysql-replication decode table maps as the server does (idempotent). The
    library has no hook for this: its table map class is patched, once per process."""
    if TableMapEvent._sync_column_info is not _sync_column_info:
        TableMapEvent._read_type_values = _read_type_values
        TableMapEvent._sync_column_info = _sync_column_info


install()
