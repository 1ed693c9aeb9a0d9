"""Keys compared as the source compares them: which chunk a binlog change's key falls in.

A key from a binlog row image is first made what SELECT returns (:func:`selected_key`), then
compared with chunk bounds in the database's own collation, through ``WEIGHT_STRING()`` sort
keys the server computes (:class:`SortKeys`). Python's ``<`` on strings is never used
(``'aaaa' < 'ZZZZ'`` and ``'E' = 'e'`` in ``utf8mb4_general_ci``).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from typing import Any

import pymysql

from ..state.chunks import Chunk, KeyValue
from .canonical import pad_binary
from .connection import query
from .introspect import ColumnInfo

_NAME = re.compile(r"^[A-Za-z0-9_]+$")  # charset/collation names are spliced into SQL


def selected_key(columns: Sequence[ColumnInfo], key: KeyValue) -> KeyValue:
    """A key from a binlog row image as SELECT returns it, so it compares with chunk bounds:
    the binlog strips BINARY(n)'s trailing zero bytes, SELECT keeps all n."""
    if all(col.data_type != "binary" for col in columns):
        return key  # the common case, once per binlog change: nothing to pad
    return tuple(pad_binary(col.display_width or 0, value) if col.data_type == "binary" and value is not None
                 else value for col, value in zip(columns, key, strict=True))


class SortKeys:
    """Byte-comparable sort keys for key tuples, computed by the server for collated strings.

    Numbers, dates and binary strings already compare correctly in Python; a collated string is
    replaced by its ``WEIGHT_STRING()`` in its own collation. Results are cached.
    """

    def __init__(self, conn: pymysql.connections.Connection, key_columns: Sequence[ColumnInfo]):
        self._conn = conn
        self._columns = tuple(key_columns)
        self._cache: dict[tuple[int, Any], bytes] = {}

    def of(self, keys: Sequence[KeyValue]) -> list[tuple[Any, ...]]:
        self._fetch_missing(keys)
        return [
            tuple(
                self._cache[(i, v)] if col.is_collated_string else v
                for i, (col, v) in enumerate(zip(self._columns, key, strict=True))
            )
            for key in keys
        ]

    def _fetch_missing(self, keys: Sequence[KeyValue]) -> None:
        for i, col in enumerate(self._columns):
            if not col.is_collated_string:
                continue
            missing = sorted({k[i] for k in keys if (i, k[i]) not in self._cache}, key=repr)
            for start in range(0, len(missing), 500):
                batch = missing[start : start + 500]
                self._cache.update(zip(((i, v) for v in batch), self._weights(col, batch), strict=False))

    def _weights(self, col: ColumnInfo, values: list[Any]) -> list[bytes]:
        charset = col.charset or "utf8mb4"
        collation = col.collation or f"{charset}_general_ci"
        if not (_NAME.match(charset) and _NAME.match(collation)):
            raise ValueError(f"unexpected charset/collation {charset!r}/{collation!r}")
        expr = f"WEIGHT_STRING(CONVERT(%s USING {charset}) COLLATE {collation})"
        sql = " UNION ALL ".join(f"SELECT {n}, {expr}" for n in range(len(values)))
        rows = sorted(query(self._conn, sql, values))
        return [bytes(w) for _, w in rows]


class ChunkLocator:
    """Finds which chunk a key falls in, comparing in the source's collation."""

    def __init__(self, chunks: Sequence[Chunk], sort_keys: SortKeys):
        self._chunks = sorted(chunks, key=lambda c: c.index)
        self._sort_keys = sort_keys
        starts = [c.start for c in self._chunks[1:]]
        if any(s is None for s in starts):
            raise ValueError("only the first chunk may be unbounded below")
        self._starts = sort_keys.of([s for s in starts if s is not None])

    def locate(self, keys: Sequence[KeyValue]) -> list[Chunk]:
        return [
            self._chunks[bisect.bisect_right(self._starts, sk)] for sk in self._sort_keys.of(keys)
        ]


def within(chunk: Chunk, sort_keys: SortKeys, keys: Sequence[KeyValue]) -> list[bool]:
    """Whether each key falls in ``chunk`` (``start <= key < end``, in the source's collation)."""
    bounds = sort_keys.of([b for b in (chunk.start, chunk.end) if b is not None])
    low = bounds[0] if chunk.start is not None else None
    high = bounds[-1] if chunk.end is not None else None
    return [(low is None or low <= sk) and (high is None or sk < high) for sk in sort_keys.of(keys)]
