"""How reconciliation groups a table's rows: key buckets both sides compute alike.

Buckets are ranges of the first key column when it is an integer (so a report reads
``id 10000..19999``), else a CRC-32 of the key's spelling (``keys hashing to bucket 17 of 64``).
Both the source (SQL) and silver (Spark) name a row's bucket with the same expression.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from ..source.connection import literal_percent, quote_ident
from ..source.introspect import ColumnInfo
from .fingerprint import INTEGER_TYPES, SEPARATOR, spark_field, sql_field

ROWS_PER_BUCKET = 10_000  # a differing bucket is compared key by key: keep that small
MAX_BUCKETS = 4096


@dataclass(frozen=True)
class Bucketing:
    """How rows are grouped: ``width``-wide ranges of the first key column (an integer), else
    ``count`` buckets of a hash of the whole key."""

    key: tuple[ColumnInfo, ...]
    width: int | None = None
    count: int = 1
    low: int | None = None  # the source's smallest first key value when ranged (for reports)
    high: int | None = None  # and its largest (to split the source's sums into parts)

    def sql(self) -> str:
        if self.width is not None:
            return f"{quote_ident(self.key[0].name)} DIV {self.width}"
        return f"CRC32({sql_key_id(self.key)}) % {self.count}"

    def spark(self) -> Column:
        if self.width is not None:
            return F.expr(f"{quote_ident(self.key[0].name)} div {self.width}")
        return F.crc32(spark_key_id(self.key).cast("binary")) % F.lit(self.count)

    def sql_parts(self, parts: int) -> list[str | None]:
        """Predicates that split the table's rows into at most ``parts`` disjoint parts holding
        every row between them (None: the whole table, unsplit), so the parts' sums, added, are
        the table's. Ranged: ranges of the first key column, even between the planned ``low`` and
        ``high`` (each an index range; the outer two open-ended); hashed: buckets by their
        remainder. Key columns are NOT NULL (``introspect`` refuses others), so no row is in none."""
        if self.width is not None:
            if self.low is None or self.high is None or self.high - self.low + 1 < parts or parts < 2:
                return [None]
            name = quote_ident(self.key[0].name)
            low, span = int(self.low), int(self.high) - int(self.low) + 1
            cuts = [low + span * i // parts for i in range(1, parts)]
            found: list[str | None] = [f"{name} < {cuts[0]}"]
            found += [f"{name} >= {low} AND {name} < {high}" for low, high in pairwise(cuts)]
            return [*found, f"{name} >= {cuts[-1]}"]
        if self.count < parts or parts < 2:
            return [None]
        return [f"{self.sql()} % {parts} = {part}" for part in range(parts)]

    def sql_predicate(self, buckets: Sequence[int]) -> tuple[str, list[Any]]:
        """The rows of ``buckets``: index ranges of the first key column when ranged (SQL with
        ``%s`` placeholders, its own ``%`` doubled)."""
        if self.width is None:
            return f"{literal_percent(self.sql())} IN ({', '.join(['%s'] * len(buckets))})", list(buckets)
        name = quote_ident(self.key[0].name)
        ranges = [self.bounds(b) for b in buckets]
        return " OR ".join([f"{name} BETWEEN %s AND %s"] * len(ranges)), [v for r in ranges for v in r]

    def bounds(self, bucket: int) -> tuple[int, int]:
        """The first key column's values in a ranged ``bucket`` (``DIV`` truncates toward zero,
        so bucket 0 spans both signs)."""
        assert self.width is not None
        if bucket > 0:
            return bucket * self.width, (bucket + 1) * self.width - 1
        if bucket < 0:
            return (bucket - 1) * self.width + 1, bucket * self.width
        return -(self.width - 1), self.width - 1

    def describe(self, bucket: int) -> str:
        if self.width is None:
            return f"keys hashing to bucket {bucket} of {self.count}"
        low, high = self.bounds(bucket)
        if bucket == 0 and self.low is not None and self.low >= 0:
            low = 0  # bucket 0 spans both signs; a key table without negative keys reads 0..
        return f"{self.key[0].name} {low}..{high}"


def plan_bucketing(key: Sequence[ColumnInfo], rows: int, low: int | None, high: int | None) -> Bucketing:
    """Buckets of about ``ROWS_PER_BUCKET`` rows; ``low``/``high``: the first key column's
    range when it is an integer (None when the table is empty or the key is not an integer)."""
    wanted = max(1, min(MAX_BUCKETS, math.ceil(rows / ROWS_PER_BUCKET)))
    if low is not None and high is not None and is_ranged(key):
        return Bucketing(tuple(key), width=max(1, math.ceil((high - low + 1) / wanted)), low=low, high=high)
    return Bucketing(tuple(key), count=wanted)


def is_ranged(key: Sequence[ColumnInfo]) -> bool:
    """Whether buckets can be ranges of the first key column: a signed integer, or one that
    fits a signed BIGINT (an unsigned BIGINT may not)."""
    first = key[0]
    return first.data_type in INTEGER_TYPES and not (first.data_type == "bigint" and first.unsigned)


def sql_key_id(key: Sequence[ColumnInfo]) -> str:
    return f"CONCAT_WS('{SEPARATOR}', {', '.join(sql_field(c) for c in key)})"


def spark_key_id(key: Sequence[ColumnInfo]) -> Column:
    return F.concat_ws(SEPARATOR, *(spark_field(c) for c in key))
