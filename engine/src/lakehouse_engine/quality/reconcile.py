"""Reconciliation: silver compared with the source value by value, per key bucket.

Each side reduces every row to a fingerprint (``fingerprint``) and sums its rows per key bucket
(row count and XOR of fingerprints): a few numbers per bucket cross the network, not the rows.
A bucket whose sums differ holds a difference; its rows are then compared key by key (their
fingerprints only), so the report names the keys: missing from silver, not in the source, or
holding other values.

The two sides are taken at two positions, which ``dq`` reconciles like its row count:

- the source inside one consistent snapshot, at binlog position ``P``;
- silver at the Delta version it looks at, holding every change up to ``R`` (``R <= P``).

Keys changed between ``R`` and ``P`` (in the binlog, read by ``dq``) may rightly differ. They are
taken out of both sides (in the same read view on the source, by a join in silver) and
counted as "not compared"; every other key holds the same values at ``R`` and at ``P``, so any
difference there is a defect. No guess: a table changed too much between the two positions to
list its keys is not compared at all, and says so.

How rows are grouped into buckets is :mod:`.bucketing`'s. The two sides are summed at once: the
source's query runs while Spark sums silver (:func:`sum_both`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..source.connection import literal_percent, qualified, query, query_keys, quote_ident
from ..source.introspect import ColumnInfo, TableSchema
from ..source.typemap import select_converter, select_expression, spark_type
from .bucketing import Bucketing, is_ranged, plan_bucketing, spark_key_id, sql_key_id
from .fingerprint import spark_row_hash, sql_row_hash
from .silverpass import KeyFacts, SilverPass, Sums, silver_pass, without_keys
from .uniqueness import Key

MAX_CHANGED_KEYS = 50_000  # keys changed between the two positions that are taken out by name
DRILLED_BUCKETS = 5  # differing buckets compared key by key (the others are named only)
NAMED_KEYS = 10  # keys named per drilled bucket

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


# --- pure bookkeeping ---------------------------------------------------------------------


def add_rows(sums: Mapping[int, tuple[int, int]], rows: Iterable[tuple[int, int]], sign: int = 1) -> Sums:
    """``sums`` with rows (bucket, fingerprint) added (``sign`` 1) or taken out (-1): XOR is its
    own inverse, the count moves by ``sign``. Buckets left empty are dropped."""
    result = dict(sums)
    for bucket, fingerprint in rows:
        count, xor = result.get(bucket, (0, 0))
        result[bucket] = (count + sign, xor ^ fingerprint)
    return {b: v for b, v in result.items() if v != (0, 0)}


def differing_buckets(source: Mapping[int, tuple[int, int]], silver: Mapping[int, tuple[int, int]]) -> list[int]:
    """Buckets whose row count or fingerprint XOR differ, in bucket order."""
    return sorted(b for b in source.keys() | silver.keys() if source.get(b, (0, 0)) != silver.get(b, (0, 0)))


@dataclass(frozen=True)
class KeyDifference:
    key: str
    problem: str  # "missing from silver", "not in the source", "other values"
    values: Key = field(default=(), compare=False)  # the key's values as silver stores them


@dataclass(frozen=True)
class KeyRow:
    fingerprint: int
    shown: str  # the key as a report shows it
    values: Key  # as silver stores them
    rows: int = 1  # rows holding the key (more than one: silver holds it twice)


Rows = Mapping[str, KeyRow]  # key id -> the row's fingerprint and key


def key_differences(source: Rows, silver: Rows) -> list[KeyDifference]:
    """Keys (by their field spelling) whose rows differ."""
    found = []
    for key_id in sorted(source.keys() | silver.keys()):
        mine, theirs = silver.get(key_id), source.get(key_id)
        if mine is not None and mine.rows > 1:
            found.append(KeyDifference(mine.shown, f"held by {mine.rows} rows of silver", mine.values))
        elif theirs is None:
            assert mine is not None
            found.append(KeyDifference(mine.shown, "not in the source", mine.values))
        elif mine is None:
            found.append(KeyDifference(theirs.shown, "missing from silver", theirs.values))
        elif mine.fingerprint != theirs.fingerprint:
            found.append(KeyDifference(theirs.shown, "other values", theirs.values))
    return found


@dataclass(frozen=True)
class BucketDifference:
    bucket: str  # described
    source_rows: int
    silver_rows: int
    keys: tuple[KeyDifference, ...] = ()  # empty when the bucket was not compared key by key
    drilled: bool = False  # compared key by key: ``keys`` are all its differing keys

    def describe(self) -> str:
        text = f"{self.bucket} ({self.source_rows} rows in the source, {self.silver_rows} in silver)"
        if self.keys:
            named = ", ".join(f"{k.key}: {k.problem}" for k in self.keys[:NAMED_KEYS])
            more = len(self.keys) - NAMED_KEYS
            text += f": {named}" + (f" and {more} more keys" if more > 0 else "")
        return text


@dataclass(frozen=True)
class Reconciliation:
    """The outcome for one table; ``not_compared`` says why it could not be (then it fails)."""

    buckets: int = 0
    differences: tuple[BucketDifference, ...] = ()
    changed_keys: int = 0  # changed between the two positions: left out of the comparison
    not_compared: str | None = None
    # Silver's rows and keys, derived from its sums where they equal the source's (None: not
    # counted, or the sums differ: ``dq`` then counts them in full).
    key_facts: KeyFacts | None = field(default=None, compare=False)
    unbucketed_rows: int = 0  # silver rows with a NULL first key column: no source row has one

    @property
    def success(self) -> bool:
        return self.not_compared is None and not self.differences and not self.unbucketed_rows

    def differing_keys(self) -> list[KeyDifference]:
        """Every differing key; raises when a differing bucket was not compared key by key."""
        if any(not d.drilled for d in self.differences):
            raise ValueError("not every differing bucket was compared key by key")
        return [k for d in self.differences for k in d.keys]

    def observed(self, table: str) -> str:
        if self.not_compared is not None:
            return f"not compared: {self.not_compared}"
        left_out = []
        if self.changed_keys:
            plural = "s" if self.changed_keys != 1 else ""
            left_out.append(f"{self.changed_keys} key{plural} changed between the compared positions")
        tail = f"; not compared: {'; '.join(left_out)}" if left_out else ""
        null_keys = (f"{self.unbucketed_rows} rows of silver have a NULL key column, which no source row has"
                     if self.unbucketed_rows else "")
        if not self.differences:
            if null_keys:
                return f"{null_keys}{tail}; write silver anew from bronze with `make rebuild TABLE={table}`"
            held = "the key bucket holds" if self.buckets == 1 else f"all {self.buckets} key buckets hold"
            return f"{held} the source's values{tail}"
        shown = "; ".join(d.describe() for d in self.differences[:DRILLED_BUCKETS])
        more = len(self.differences) - DRILLED_BUCKETS
        return ((f"{null_keys}; " if null_keys else "")
                + f"{len(self.differences)} of {self.buckets} key buckets differ from the source: {shown}"
                + (f"; and {more} more buckets" if more > 0 else "") + tail + "; " + self._fix(table))

    def _fix(self, table: str) -> str:
        """``repair`` re-reads differing rows; a key held twice needs ``rebuild`` (the merge updates both)."""
        repair = f"`make repair TABLE={table}`"
        if self.unbucketed_rows or any(k.problem.startswith("held by") for d in self.differences for k in d.keys):
            return (f"write silver anew from bronze with `make rebuild TABLE={table}` (a key held twice or a "
                    f"NULL key is not re-read away), then {repair} if rows still differ")
        return f"re-read the differing rows with {repair}"


# --- the source side (inside the caller's read view) --------------------------------------


@dataclass(frozen=True)
class SourceSide:
    """One table's buckets summed in the source's read view."""

    schema: TableSchema
    bucketing: Bucketing
    sums: Sums

    @property
    def rows(self) -> int:
        """The table's row count in the read view: every row is in one bucket."""
        return sum(count for count, _ in self.sums.values())


def plan_source(conn: pymysql.connections.Connection, schema: TableSchema, estimated: int) -> Bucketing:
    """How ``schema``'s table is bucketed, planned in ``conn``'s read view without counting it:
    its exact count comes with its bucket sums, and a separate ``COUNT(*)`` was a sixth of the
    source's part of ``dq`` (1.2-1.5 s of 8-10 s for make bench's 2M-row ``customer``).

    Buckets are a granularity, not a result: both sides use the same plan, so a plan from an
    approximate count is as exact, its buckets only larger or smaller. A single integer key's
    range bounds its rows (a dense key's range is its count), so it plans from the range alone;
    any other key plans from ``estimated`` (the server's statistics, which may be stale), and
    counts the rows where the statistics say none (an empty table, or statistics not yet taken)."""
    table = qualified(schema.schema, schema.table)
    low = high = None
    if is_ranged(schema.key_columns):
        first = quote_ident(schema.key[0])
        low, high = query(conn, f"SELECT MIN({first}), MAX({first}) FROM {table}")[0]
        if low is None:
            return plan_bucketing(schema.key_columns, 0, None, None)
        if len(schema.key) == 1:
            return plan_bucketing(schema.key_columns, int(high) - int(low) + 1, low, high)
    rows = estimated if estimated > 0 else int(query(conn, f"SELECT COUNT(*) FROM {table}")[0][0])
    return plan_bucketing(schema.key_columns, rows, low, high)


def source_side(conn: pymysql.connections.Connection, schema: TableSchema, bucketing: Bucketing,
                where: str | None = None) -> SourceSide:
    """Sum the buckets of ``schema``'s table in the read view ``conn`` has open (of its rows
    ``where`` holds, one of ``Bucketing.sql_parts``: then the sums of a part)."""
    sums = {int(b): (int(n), int(x)) for b, n, x in query(conn, bucket_sums_sql(schema, bucketing, where))}
    return SourceSide(schema, bucketing, sums)


def merged_sums(parts: Iterable[Sums]) -> Sums:
    """The sums of disjoint parts of one table, added: counts add, fingerprints XOR (a bucket
    may straddle two parts)."""
    result: dict[int, tuple[int, int]] = {}
    for sums in parts:
        for bucket, (count, xor) in sums.items():
            had_count, had_xor = result.get(bucket, (0, 0))
            result[bucket] = (had_count + count, had_xor ^ xor)
    return result


def bucket_sums_sql(schema: TableSchema, bucketing: Bucketing, where: str | None = None) -> str:
    """Each bucket's row count and XOR of fingerprints, in the source (of the rows ``where`` holds).

    Grouped by the bucket expression itself, never by an alias: MySQL and MariaDB resolve a
    ``GROUP BY`` name to a column of the table before an alias of the select list, so ``AS b
    ... GROUP BY b`` groups by a column named ``b`` where the table has one."""
    bucket = bucketing.sql()
    filtered = f" WHERE {where}" if where is not None else ""
    return (f"SELECT {bucket}, COUNT(*), BIT_XOR({sql_row_hash(schema.columns)}) "
            f"FROM {qualified(schema.schema, schema.table)}{filtered} GROUP BY {bucket}")


def source_rows_of(conn: pymysql.connections.Connection, side: SourceSide,
                   keys: Sequence[Key]) -> list[tuple[int, int, str]]:
    """(bucket, fingerprint, key id) of the source rows holding ``keys`` (in the read view)."""
    schema = side.schema
    names = ", ".join(quote_ident(k) for k in schema.key)
    key_id = sql_key_id(schema.key_columns)
    head = literal_percent(f"SELECT {side.bucketing.sql()}, {sql_row_hash(schema.columns)}, {key_id} "
                           f"FROM {qualified(schema.schema, schema.table)} WHERE ({names}) IN ")
    found = query_keys(conn, head, len(schema.key), keys)
    # One source row found through two spellings of its key (a _ci key) is one row.
    return list({str(k): (int(b), int(h), str(k)) for b, h, k in found}.values())


def _source_bucket_rows(conn: pymysql.connections.Connection, side: SourceSide,
                        buckets: Sequence[int]) -> dict[int, dict[str, KeyRow]]:
    """The source's rows of ``buckets`` (one query), by bucket and key id."""
    schema = side.schema
    found: dict[int, dict[str, KeyRow]] = {b: {} for b in buckets}
    if not buckets:
        return found
    where, args = side.bucketing.sql_predicate(buckets)
    shown = ", ".join(select_expression(c) for c in schema.key_columns)  # a FLOAT widened: exact
    selected = literal_percent(f"SELECT {side.bucketing.sql()}, {sql_key_id(schema.key_columns)}, "
                               f"{sql_row_hash(schema.columns)}, {shown} FROM {qualified(schema.schema, schema.table)}")
    convert = [select_converter(c) for c in schema.key_columns]
    for row in query(conn, f"{selected} WHERE {where}", args):
        values = tuple(f(v) for f, v in zip(convert, row[3:], strict=True))
        found[int(row[0])][str(row[1])] = KeyRow(int(row[2]), shown_key(schema.key, values), values)
    return found


def shown_key(names: Sequence[str], values: Sequence[Any]) -> str:
    """A key as a report shows it: ``order_id=7, line=2``."""
    return ", ".join(f"{name}={value}" for name, value in zip(names, values, strict=True))


# --- silver ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SilverSide:
    """Silver without the keys changed between the two positions, and its pass (``silverpass``):
    the bucket sums, the facts of the changed keys' rows, the rows in no bucket."""

    rows: DataFrame
    measured: SilverPass

    @property
    def sums(self) -> Sums:
        return self.measured.sums

    @property
    def unbucketed_rows(self) -> int:
        return self.measured.unbucketed_rows


def silver_side(spark: SparkSession, silver: DataFrame, schema: TableSchema, bucketing: Bucketing,
                changed: Sequence[Key], *, count_keys: bool = True) -> SilverSide:
    """Silver's side, summed in one pass (``silverpass``) that also counts the changed keys'
    rows (``count_keys``), from which the reconciliation derives silver's key facts."""
    measured = silver_pass(spark, silver, schema, bucketing, changed, count_keys=count_keys)
    return SilverSide(without_keys(spark, silver, schema, changed), measured)


def _silver_bucket_rows(silver: DataFrame, schema: TableSchema, bucketing: Bucketing,
                        buckets: Sequence[int]) -> dict[int, dict[str, KeyRow]]:
    """Silver's rows of ``buckets`` (one pass over silver), by bucket and key id."""
    found: dict[int, dict[str, KeyRow]] = {b: {} for b in buckets}
    if not buckets:
        return found
    key_cols = [F.unix_micros(F.col(quote_ident(c.name))) if isinstance(spark_type(c), T.TimestampType)
                else F.col(quote_ident(c.name)) for c in schema.key_columns]
    # Filtered on the expression before the select, and read by position: the key columns
    # keep their own names, so no alias of ours may sit beside them (a key named "b" would).
    bucket_of = bucketing.spark()
    rows = (silver.where(bucket_of.isin(list(buckets)))
            .select(bucket_of, spark_key_id(schema.key_columns), spark_row_hash(schema.columns), *key_cols)
            .collect())
    for r in rows:
        values = tuple(_as_stored(c, v) for c, v in zip(schema.key_columns, r[3:], strict=True))
        bucket, key_id = found[int(r[0])], str(r[1])
        held = bucket.get(key_id)
        bucket[key_id] = KeyRow(int(r[2]), shown_key(schema.key, values), values, held.rows + 1 if held else 1)
    return found


def _as_stored(col: ColumnInfo, value: Any) -> Any:
    """A key value collected from Spark as silver stores it (and as the source's converter gives
    it): TIMESTAMP as an aware UTC time (read as microseconds: Spark hands naive local times to
    Python), BINARY as bytes."""
    if value is None:
        return None
    if isinstance(spark_type(col), T.TimestampType):
        return EPOCH + dt.timedelta(microseconds=int(value))
    return bytes(value) if isinstance(value, bytearray) else value


# --- the whole comparison ----------------------------------------------------------------


def too_many_changed(changed: Sequence[Key]) -> Reconciliation | None:
    """The outcome of a table changed too much between the two positions to list its keys."""
    if len(changed) <= MAX_CHANGED_KEYS:
        return None
    return Reconciliation(not_compared=(
        f"{len(changed)} keys changed between the compared positions (more than {MAX_CHANGED_KEYS}); "
        "run dq right after an ingest"))


def reconcile(conn: pymysql.connections.Connection, side: SourceSide, silver: SilverSide,
              changed: Sequence[Key], *, drilled: int = DRILLED_BUCKETS) -> Reconciliation:
    """Compare ``silver`` with the source's ``side``, both without the ``changed`` keys (changed
    between silver's position and the read view's, values as silver stores them). ``conn``
    must still have the read view ``side`` was summed in open. The first ``drilled`` differing
    buckets are compared key by key (``repair`` asks for all of them)."""
    schema = side.schema
    changed_rows = source_rows_of(conn, side, changed)
    source = add_rows(side.sums, ((b, h) for b, h, _ in changed_rows), sign=-1)
    mine = silver.sums
    buckets = len(source.keys() | mine.keys())
    differences = []
    skip = {key_id for _, _, key_id in changed_rows}
    differing = differing_buckets(source, mine)
    drill = differing[:drilled]
    theirs = _source_bucket_rows(conn, side, drill)
    ours = _silver_bucket_rows(silver.rows, schema, side.bucketing, drill)
    for bucket in differing:
        there, here = source.get(bucket, (0, 0))[0], mine.get(bucket, (0, 0))[0]
        keys: list[KeyDifference] = []
        if bucket in ours:
            keys = key_differences({k: v for k, v in theirs[bucket].items() if k not in skip}, ours[bucket])
        differences.append(BucketDifference(side.bucketing.describe(bucket), there, here, tuple(keys),
                                            drilled=bucket in ours))
    # Facts only where every bucket holds the source's rows; else ``dq`` counts them in full.
    facts = None if differences else silver.measured.facts_where_equal(schema.key)
    return Reconciliation(buckets, tuple(differences), len(changed), key_facts=facts,
                          unbucketed_rows=silver.unbucketed_rows)
