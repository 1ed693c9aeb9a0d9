"""Silver read for reconciliation and for its key and row-count checks.

``dq`` used to read silver five times for a table it reconciles: reconciliation summed the
fingerprints per bucket, then Great Expectations counted the rows, counted the NULL keys, and
grouped the key twice (a window for the unexpected count, again for examples). Here the bucket
sums are one job (every column read), and the facts about keys (:class:`KeyFacts`: rows, rows
sharing a key, NULL key columns) come from those sums wherever they equal the source's: every
bucket then holds as many rows as the source's, with the same XOR of fingerprints, so silver's
rows are the source's rows (a key held twice, with as many rows in its bucket, would need
another key missing there and the two rows' fingerprints equal: a one-value difference always
changes a fingerprint, see ``fingerprint``), whose keys are unique and never NULL. The rows of
the keys changed between the two positions are left out of the sums, so their facts are counted
apart, in a job over silver's key columns joined with those keys (:func:`changed_key_facts`).
Where the sums differ the facts are counted in full by :func:`key_facts` (``dq`` asks for them
then): a job that reads only the key columns and groups them once, 3.5-4.2 s for 2M rows on 2
cores, which a passing check no longer spends. Folding that count into the sums' job (rows
grouped per key with their fingerprints, then per bucket) was measured slower: shuffling every
key with its fingerprint cost more than a second scan of the key columns alone (1M rows, 18
columns, 2 cores, warm: 8.9 s against 5.5 s plus 2.0 s).

Only for keys silver compares as the source does (``dq`` decides): a key column in a collation
that equates other spellings keeps its own uniqueness check (``uniqueness``), which asks the
source which spellings are one key. ``repair`` sums without the facts.
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
from .fingerprint import spark_numbers, spark_row_hash_of
from .unchecked import unchecked_arithmetic
from .uniqueness import Key, unused_name

Sums = dict[int, tuple[int, int]]  # bucket -> (rows, XOR of fingerprints)
EXAMPLES = 5  # keys named when rows share a key


@dataclass(frozen=True)
class KeyFacts:
    """Silver's rows, the rows sharing a key with another row (every row of such a key, as Great
    Expectations counts unexpected values; keys with a NULL column left out, they are counted
    apart) and, per key column, the rows where it is NULL."""

    rows: int
    shared_rows: int
    null_rows: dict[str, int] = field(default_factory=dict)
    examples: tuple[str, ...] = ()  # keys held by several rows (``name=value, ...: n rows``)

    def describe(self) -> str:
        parts = [f"{self.shared_rows} of {self.rows} rows share their key with another row"]
        if self.examples:
            parts[0] += f" (e.g. {'; '.join(self.examples)})"
        parts += [f"{n} rows with {name} NULL" for name, n in self.null_rows.items() if n]
        return ", ".join(parts)


@dataclass(frozen=True)
class SilverPass:
    """The bucket sums without the changed keys; the key facts of the rows holding a changed
    key (None: not counted); the rows in no bucket (a NULL first key column under range
    buckets: no source row has one)."""

    sums: Sums
    changed_facts: KeyFacts | None
    unbucketed_rows: int = 0

    def facts_where_equal(self, key: Sequence[str]) -> KeyFacts | None:
        """Silver's key facts when its sums equal the source's (see the module docstring: its
        bucketed rows then hold the source's unique, non-NULL keys); None where they were not
        counted or rows lie in no bucket."""
        if self.changed_facts is None or self.unbucketed_rows:
            return None
        changed = self.changed_facts
        return KeyFacts(sum(rows for rows, _ in self.sums.values()) + changed.rows, changed.shared_rows,
                        {name: changed.null_rows.get(name, 0) for name in key}, changed.examples)


class _Names:
    """The pass's own column names, none of them a key column's (Spark compares names
    case-insensitively, and a key column may be called ``_rows``)."""

    def __init__(self, key: Sequence[str]):
        taken = list(key)

        def name(wanted: str) -> str:
            chosen = unused_name(wanted, taken)
            taken.append(chosen)
            return chosen

        self.bucket, self.hash, self.rows, self.xor = (name(n) for n in ("_bucket", "_hash", "_rows", "_xor"))
        self.kept_rows, self.shared, self.total = name("_kept_rows"), name("_shared"), name("_total")
        self.nulls = [name(f"_null{i}") for i in range(len(key))]
        self._name = name

    def number(self, column: int, part: int) -> str:
        """The name of the ``part``-th fingerprint number of the ``column``-th column."""
        return self._name(f"_n{column}_{part}")


def silver_pass(spark: SparkSession, silver: DataFrame, schema: TableSchema, bucketing: Bucketing,
                changed: Sequence[Key], *, count_keys: bool = True) -> SilverPass:
    """Bucket sums of ``silver`` without the ``changed`` keys (every column read), then
    (``count_keys``) the key facts of the rows holding those keys."""
    names = _Names(schema.key)
    keys = [quote_ident(k) for k in schema.key]
    # The casts in the session's own mode (Spark's non-ANSI casts spell some values otherwise,
    # e.g. a DECIMAL 0.0000000001 as 1E-10), then only the arithmetic without overflow checks.
    numbers = [spark_numbers(c) for c in schema.columns]
    slots = [[names.number(i, j) for j in range(len(n))] for i, n in enumerate(numbers)]
    numbered = silver.select(*keys, bucketing.spark().alias(names.bucket),
                             *(n.alias(slot) for ns, ss in zip(numbers, slots, strict=True)
                               for n, slot in zip(ns, ss, strict=True)))
    with unchecked_arithmetic(spark):
        hashed = numbered.select(*keys, names.bucket, spark_row_hash_of(
            schema.columns, [[F.col(slot) for slot in ss] for ss in slots]).alias(names.hash))
        rows = (without_keys(spark, hashed, schema, changed).groupBy(names.bucket)
                .agg(F.count(F.lit(1)).alias(names.kept_rows), F.bit_xor(names.hash).alias(names.xor)).collect())
    sums = [(r[names.bucket], _int(r[names.kept_rows]), _int(r[names.xor])) for r in rows]
    facts = changed_key_facts(spark, silver, schema, changed) if count_keys else None
    return SilverPass(bucket_sums(sums), facts, _unbucketed(sums))


def changed_key_facts(spark: SparkSession, silver: DataFrame, schema: TableSchema, changed: Sequence[Key]) -> KeyFacts:
    """The key facts of silver's rows holding one of the ``changed`` keys (no job without any)."""
    if not changed:
        return KeyFacts(0, 0, dict.fromkeys(schema.key, 0))
    held = silver.join(F.broadcast(_listed(spark, schema, changed)), on=list(schema.key), how="left_semi")
    return key_facts(held, schema)


def key_facts(silver: DataFrame, schema: TableSchema) -> KeyFacts:
    """The key facts counted in full (a pass of their own: for a table whose value sums were
    not made or differ from the source's)."""
    names = _Names(schema.key)
    keys = [quote_ident(k) for k in schema.key]
    per_key = silver.groupBy(*keys).agg(F.count(F.lit(1)).alias(names.rows))
    (found,) = per_key.agg(*_fact_columns(keys, names)).collect()
    facts = fold_facts(schema.key, [[_int(found[names.total]), _int(found[names.shared]),
                                     *(_int(found[n]) for n in names.nulls)]])
    if facts.shared_rows:
        facts = KeyFacts(facts.rows, facts.shared_rows, facts.null_rows, _examples(per_key, schema, names))
    return facts


def without_keys(spark: SparkSession, silver: DataFrame, schema: TableSchema, keys: Sequence[Key]) -> DataFrame:
    """``silver`` without the rows of ``keys`` (values as silver stores them)."""
    if not keys:
        return silver
    return silver.join(F.broadcast(_listed(spark, schema, keys)), on=list(schema.key), how="left_anti")


def bucket_sums(rows: Iterable[tuple[Any, int, int]]) -> Sums:
    """(bucket, rows, XOR) per bucket, without the buckets left empty once the changed keys are
    out (the source's side drops those too) and without the rows in no bucket (see
    :class:`SilverPass`)."""
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


def _fact_columns(keys: Sequence[str], names: _Names) -> list[Column]:
    """Aggregations over per-key rows (``names.rows`` each): all rows, rows sharing a complete
    key, rows with each key column NULL."""
    rows = F.col(names.rows)
    complete = reduce(lambda a, b: a & b, [F.col(k).isNotNull() for k in keys])
    return [F.sum(rows).alias(names.total), F.sum(F.when(complete & (rows > 1), rows)).alias(names.shared),
            *[F.sum(F.when(F.col(k).isNull(), rows)).alias(n) for k, n in zip(keys, names.nulls, strict=True)]]


def _listed(spark: SparkSession, schema: TableSchema, keys: Sequence[Key]) -> DataFrame:
    """``keys`` as a frame of silver's key types, each key once (a key listed twice would
    repeat its rows in a join)."""
    fields = [T.StructField(c.name, spark_type(c), True) for c in schema.key_columns]
    return spark.createDataFrame(list(keys), T.StructType(fields)).dropDuplicates()


def _unbucketed(sums: Iterable[tuple[Any, int, int]]) -> int:
    return sum(n for b, n, _ in sums if b is None)


def _examples(per_key: DataFrame, schema: TableSchema, names: _Names) -> tuple[str, ...]:
    """A few keys held by several rows (a second job, run only when there are such keys), shown
    as Spark returns them (a TIMESTAMP in the session's time zone)."""
    keys = [quote_ident(k) for k in schema.key]
    complete: Column = reduce(lambda a, b: a & b, [F.col(k).isNotNull() for k in keys])
    found = per_key.where(complete & (F.col(names.rows) > 1)).select(*keys, names.rows).limit(EXAMPLES).collect()
    return tuple(example(schema.key, row[:len(keys)], row[len(keys)]) for row in found)


def example(key: Sequence[str], values: Sequence[Any], rows: int) -> str:
    """A key held by several rows, as :attr:`KeyFacts.examples` names it."""
    return ", ".join(f"{name}={_shown(value)}" for name, value in zip(key, values, strict=True)) + f": {rows} rows"


def _shown(value: Any) -> str:
    return f"0x{bytes(value).hex()}" if isinstance(value, bytes | bytearray) else str(value)


def _int(value: Any) -> int:
    return 0 if value is None else int(value)
