"""Silver read once for reconciliation and for its key and row-count checks.

``dq`` used to read silver four times for a table it reconciles: Great Expectations counted the
rows, counted the NULL keys, and grouped the key twice (a window for the unexpected count,
again for examples), then reconciliation summed the fingerprints per bucket. Here one Spark job
does all of it: rows are first grouped per key (rows holding it, XOR of their fingerprints),
those groups joined with the keys changed between the compared positions (a broadcast of at most
``reconcile.MAX_CHANGED_KEYS``), then summed per bucket. The per-bucket sums are the ones
reconciliation always compared (XOR and counts do not care how rows are grouped first); the
facts about keys (:class:`KeyFacts`) are exact counts over every row of silver, changed keys
included, as Great Expectations counted them.

Only for keys silver compares as the source does: a key with a collated column (``_ci``) keeps
its own uniqueness check (``uniqueness``), which asks the source which spellings are one key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..source.connection import quote_ident
from ..source.introspect import TableSchema
from ..source.typemap import spark_type
from .bucketing import Bucketing
from .fingerprint import spark_row_hash
from .uniqueness import unused_name

Key = tuple[Any, ...]
Sums = dict[int, tuple[int, int]]  # bucket -> (rows, XOR of fingerprints)
EXAMPLES = 5  # keys named when rows share a key


@dataclass(frozen=True)
class KeyFacts:
    """Silver's rows, the rows sharing a key with another row (as Great Expectations counts
    unexpected values: every row of such a key) and, per key column, the rows where it is NULL."""

    rows: int
    shared_rows: int
    null_rows: dict[str, int] = field(default_factory=dict)
    examples: tuple[str, ...] = ()  # keys held by several rows (``name=value, ...``), when any

    @property
    def unique(self) -> bool:
        return self.shared_rows == 0 and not any(self.null_rows.values())

    def describe(self) -> str:
        parts = [f"{self.shared_rows} of {self.rows} rows share their key with another row"]
        if self.examples:
            parts[0] += f" (e.g. {'; '.join(self.examples)})"
        parts += [f"{n} rows with {name} NULL" for name, n in self.null_rows.items() if n]
        return ", ".join(parts)


@dataclass(frozen=True)
class SilverPass:
    sums: Sums
    facts: KeyFacts


class _Names:
    """The pass's own column names, none of them a key column's (Spark compares names
    case-insensitively, and a key column may be called ``rows``)."""

    def __init__(self, key: Sequence[str]):
        taken = list(key)

        def name(wanted: str) -> str:
            chosen = unused_name(wanted, taken)
            taken.append(chosen)
            return chosen

        self.bucket, self.hash, self.rows, self.xor, self.changed = (
            name(n) for n in ("_bucket", "_hash", "_rows", "_xor", "_changed"))
        self.kept_rows, self.shared, self.total = name("_kept_rows"), name("_shared"), name("_total")
        self.nulls = [name(f"_null{i}") for i in range(len(key))]


def silver_pass(spark: SparkSession, silver: DataFrame, schema: TableSchema, bucketing: Bucketing,
                changed: Sequence[Key]) -> SilverPass:
    """Bucket sums of ``silver`` without the ``changed`` keys, and the key facts of all of it."""
    names = _Names(schema.key)
    keys = [quote_ident(k) for k in schema.key]
    hashed = silver.select(*keys, bucketing.spark().alias(names.bucket),
                           spark_row_hash(schema.columns).alias(names.hash))
    per_key = (hashed.groupBy(names.bucket, *keys)
               .agg(F.count(F.lit(1)).alias(names.rows), F.bit_xor(names.hash).alias(names.xor)))
    flagged = _flag_changed(spark, per_key, schema, changed, names.changed)
    kept = ~F.col(names.changed)
    rows = F.col(names.rows)
    complete = reduce(lambda a, b: a & b, [F.col(k).isNotNull() for k in keys])
    sums = flagged.groupBy(names.bucket).agg(
        F.sum(rows).alias(names.total),
        F.sum(F.when(kept, rows)).alias(names.kept_rows),
        F.bit_xor(F.when(kept, F.col(names.xor))).alias(names.xor),
        F.sum(F.when(complete & (rows > 1), rows)).alias(names.shared),
        *[F.sum(F.when(F.col(k).isNull(), rows)).alias(n) for k, n in zip(keys, names.nulls, strict=True)],
    ).collect()
    facts = fold_facts(schema.key, ([_int(r[names.total]), _int(r[names.shared]), *(_int(r[n]) for n in names.nulls)]
                                    for r in sums))
    if facts.shared_rows:
        facts = KeyFacts(facts.rows, facts.shared_rows, facts.null_rows, _examples(per_key, schema, names))
    return SilverPass(bucket_sums((r[names.bucket], _int(r[names.kept_rows]), _int(r[names.xor])) for r in sums),
                      facts)


def bucket_sums(rows: Iterable[tuple[Any, int, int]]) -> Sums:
    """(bucket, rows, XOR) per bucket, without the buckets left empty once the changed keys are
    out (the source's side drops those too) and without the NULL bucket of a NULL key (no
    source row has one; the key facts report it)."""
    return {int(b): (n, x) for b, n, x in rows if b is not None and (n, x) != (0, 0)}


def fold_facts(key: Sequence[str], buckets: Iterable[Sequence[int]]) -> KeyFacts:
    """The key facts from each bucket's (rows, rows sharing a key, NULLs per key column)."""
    rows = shared = 0
    nulls = [0] * len(key)
    for total, shared_here, *null_here in buckets:
        rows += total
        shared += shared_here
        nulls = [a + b for a, b in zip(nulls, null_here, strict=True)]
    return KeyFacts(rows, shared, dict(zip(key, nulls, strict=True)))


def _flag_changed(spark: SparkSession, per_key: DataFrame, schema: TableSchema, changed: Sequence[Key],
                  flag: str) -> DataFrame:
    """``per_key`` with a boolean ``flag``: the key is one of ``changed`` (an equi-join: a NULL
    key is never changed, as the anti join before this pass had it)."""
    if not changed:
        return per_key.withColumn(flag, F.lit(False))
    fields = [T.StructField(c.name, spark_type(c), True) for c in schema.key_columns]
    listed = spark.createDataFrame(list(changed), T.StructType(fields)).withColumn(flag, F.lit(True))
    joined = per_key.join(F.broadcast(listed), on=list(schema.key), how="left")
    return joined.withColumn(flag, F.coalesce(F.col(flag), F.lit(False)))


def _examples(per_key: DataFrame, schema: TableSchema, names: _Names) -> tuple[str, ...]:
    """A few keys held by several rows (a second job, run only when there are such keys)."""
    keys = [quote_ident(k) for k in schema.key]
    complete: Column = reduce(lambda a, b: a & b, [F.col(k).isNotNull() for k in keys])
    found = per_key.where(complete & (F.col(names.rows) > 1)).select(*keys, names.rows).limit(EXAMPLES).collect()
    return tuple(", ".join(f"{name}={row[i]!r}" for i, name in enumerate(schema.key))
                 + f": {row[len(keys)]} rows" for row in found)


def _int(value: Any) -> int:
    return 0 if value is None else int(value)
