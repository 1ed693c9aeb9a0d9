"""Binlog positions and the sequence number that totally orders every change.

Positions compare as ``(file number, offset)`` tuples: never as strings (``mysql-bin.000010``
sorts before ``mysql-bin.000009`` only by accident of padding) and never by timestamp.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

_FILE_NUMBER = re.compile(r"\.(\d+)$")
GTID_TEXT = re.compile(r"(\d+)-(\d+)-(\d+)")  # a MariaDB GTID: domain-server-sequence

# _seq = file_number * 10^22 + offset * 10^10 + row_index; fits DECIMAL(38,0).
_FILE_FACTOR = 10**22
_POS_FACTOR = 10**10
MAX_ROW_INDEX = _POS_FACTOR - 1


@dataclass(frozen=True)
class BinlogPosition:
    """A point in the binlog: everything that ends at or before ``offset`` in ``file``.

    A catch-up compares each row change's position with its table's start, so the comparisons
    are written out (no ``functools.total_ordering`` indirection) and two positions in one file,
    the common case, compare by offset alone."""

    file: str
    offset: int

    @property
    def file_number(self) -> int:
        return _file_number(self.file)

    @property
    def key(self) -> tuple[int, int]:
        return (self.file_number, self.offset)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, BinlogPosition):
            return NotImplemented
        if self.file == other.file:
            return self.offset < other.offset
        return self.key < other.key

    def __le__(self, other: object) -> bool:
        if not isinstance(other, BinlogPosition):
            return NotImplemented
        if self.file == other.file:
            return self.offset <= other.offset
        return self.key <= other.key

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, BinlogPosition):
            return NotImplemented
        if self.file == other.file:
            return self.offset > other.offset
        return self.key > other.key

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, BinlogPosition):
            return NotImplemented
        if self.file == other.file:
            return self.offset >= other.offset
        return self.key >= other.key

    def __str__(self) -> str:
        return f"{self.file}:{self.offset}"

    def to_json(self) -> list[object]:
        return [self.file, self.offset]

    @classmethod
    def from_json(cls, raw: list[Any]) -> BinlogPosition:
        file, offset = raw
        return cls(str(file), int(offset))

    @classmethod
    def parse(cls, text: str) -> BinlogPosition:
        """``mysql-bin.000003:1234`` (as printed by ``str`` and ``status``); ``ValueError`` else."""
        file, sep, offset = text.strip().rpartition(":")
        if not sep or not file or not offset.isdigit():
            raise ValueError(f"{text!r} is not a binlog position like mysql-bin.000003:1234")
        position = cls(file, int(offset))
        position.file_number  # noqa: B018 - raises ValueError for a name without a number
        return position


@lru_cache(maxsize=256)
def _file_number(file: str) -> int:
    """The number a binlog file name ends with (a run meets a handful of names, each many times)."""
    match = _FILE_NUMBER.search(file)
    if not match:
        raise ValueError(f"binlog file name {file!r} has no numeric suffix")
    return int(match.group(1))


def sequence(position: BinlogPosition, row_index: int = 0) -> Decimal:
    """The ``_seq`` of a change: snapshot rows use their chunk's watermark with row index 0,
    binlog rows the end of their event with a row index from 1, so a binlog change that
    follows a snapshot read always sorts after it."""
    if not 0 <= row_index <= MAX_ROW_INDEX:
        raise ValueError(f"row index {row_index} out of range")
    if position.offset >= _FILE_FACTOR // _POS_FACTOR:
        raise ValueError(f"binlog offset {position.offset} out of range")
    return Decimal(position.file_number * _FILE_FACTOR + position.offset * _POS_FACTOR + row_index)


def bytes_behind(position: BinlogPosition, head: BinlogPosition, sizes: Mapping[str, int]) -> int:
    """Binlog bytes from ``position`` to ``head`` (the source's current position): the rest of
    ``position``'s file, every file between, and ``head``'s offset. ``sizes`` maps binlog file
    names to their sizes (``SHOW BINARY LOGS``); it is only needed when the files differ. A file
    missing from it (purged) counts as empty."""
    if position >= head:
        return 0
    if position.file_number == head.file_number:
        return head.offset - position.offset
    behind = max(sizes.get(position.file, position.offset) - position.offset, 0) + head.offset
    for name, size in sizes.items():
        if position.file_number < BinlogPosition(name, 0).file_number < head.file_number:
            behind += size
    return behind


def parse_gtid(text: str) -> tuple[int, int, int]:
    """``(domain, server, seq)`` of one MariaDB GTID; raises ValueError for anything else."""
    found = GTID_TEXT.fullmatch(text.strip())
    if found is None:
        raise ValueError(f"{text!r} is not a MariaDB GTID (domain-server-sequence, e.g. '0-1-1234')")
    domain, server, seq = (int(part) for part in found.groups())
    return domain, server, seq


def parse_gtid_position(text: str) -> tuple[str, ...]:
    """The GTIDs of a MariaDB GTID position (``0-1-100,7-1-3``: at most one per replication
    domain), each as ``domain-server-seq``; raises ValueError for anything else."""
    gtids = tuple(part.strip() for part in text.split(","))
    domains = [parse_gtid(g)[0] for g in gtids]
    if len(set(domains)) != len(domains):
        raise ValueError(f"{text!r} names a replication domain twice (one GTID per domain, e.g. '0-1-1234,7-1-5')")
    return tuple("-".join(map(str, parse_gtid(g))) for g in gtids)


def after_transaction(gtid_position: str | None, gtid: str | None) -> str | None:
    """The server's GTID position (the last GTID of each replication domain, as
    ``BINLOG_GTID_POS()`` writes it) once the transaction ``gtid`` is logged: its domain's entry
    replaced, or added. An unknown position (None) stays unknown: guessing the other domains'
    entries would name a point that never existed. A transaction without a GTID changes nothing."""
    if gtid_position is None or gtid is None:
        return gtid_position
    domain = parse_gtid(gtid)[0]
    entries = [e for e in gtid_position.split(",") if e.strip()]
    for i, entry in enumerate(entries):
        if parse_gtid(entry)[0] == domain:
            entries[i] = gtid
            break
    else:
        entries.append(gtid)
    return ",".join(entries)
