"""Silver's key unique as the source compares it: in each key column's collation.

Silver keeps keys byte for byte, so a ``_ci`` key could hold 'abc' and 'ABC' as two rows while
the source, for which they are one key, can only ever hold one: silver then keeps a row the
source no longer has. :func:`key_uniqueness` finds such keys (candidates grouped in Spark, then
confirmed by the source itself: see ``collation``) and gives Great Expectations a frame where
every colliding spelling is replaced by its group's first one, in a column of its own per
collated key column (``sku in utf8mb4_general_ci``): the suite's uniqueness expectation on
those columns then fails exactly on the keys the source would call equal, and passes on 'abc'
and 'ABC' in a ``_bin`` column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

import pymysql
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..config.project import SourceProfile
from ..source.connection import connection, query, quote_ident
from ..source.introspect import TableSchema
from .collation import CollationRule, collation_rule

if TYPE_CHECKING:
    from .checks import UniqueKey

# Candidate groups brought to the driver and spellings kept per group: collisions are defects,
# a handful is the expected number; past these, the check still fails but names fewer examples.
MAX_GROUPS = 500
MAX_SPELLINGS = 10
CONFIRM_BATCH = 500  # spellings per query to the source
# Characters outside the BMP (general_ci and unicode_ci give them all one weight).
SUPPLEMENTARY = "[\\x{10000}-\\x{10FFFF}]"

Key = tuple[Any, ...]


@dataclass(frozen=True)
class KeyColumn:
    """One key column; ``rule`` is None when silver compares it as the source does (numbers,
    dates, binary strings, a NO PAD ``_bin`` collation)."""

    name: str
    rule: CollationRule | None = None
    class_name: str | None = None  # the class column's name where the usual one is silver's own

    @property
    def checked(self) -> str:
        """The column the uniqueness expectation reads: the key itself, or its class column."""
        if self.rule is None:
            return self.name
        return self.class_name or f"{self.name} in {self.rule.collation}"


@dataclass(frozen=True)
class Collision:
    """Distinct spellings of one key (key tuples), equal in the source's collations, or one
    spelling held by several rows; ``rows``: the rows holding them."""

    spellings: tuple[Key, ...]
    rows: int


@dataclass(frozen=True)
class KeyUniqueness:
    frame: DataFrame  # silver, plus the class column of each collated key column
    columns: tuple[KeyColumn, ...]
    collisions: tuple[Collision, ...]
    complete: bool  # False when more candidate groups existed than were looked at

    @property
    def checked_columns(self) -> tuple[str, ...]:
        return tuple(c.checked for c in self.columns)

    def expectation(self, table: str) -> UniqueKey:
        """The uniqueness expectation of ``table``: on the key's collation classes where the key
        has a collated column (with a note saying so), failing with the collisions found."""
        from .checks import UniqueKey  # GX is slow to import

        collated = [c for c in self.columns if c.rule is not None]
        notes = None
        if collated:
            notes = ("Keys compared as the source compares them: " + "; ".join(
                f"{c.name} in {c.rule.collation} ({c.rule.describe()})" for c in collated if c.rule is not None)
                + ". Spellings the source calls one key count as one value (the first of them).")
        failure = (collision_message(table, self.columns, self.collisions, self.complete)
                   if self.collisions else None)
        return UniqueKey(self.checked_columns, notes, failure)


def key_columns(schema: TableSchema, frame_schema: T.StructType) -> tuple[KeyColumn, ...]:
    """The key columns of ``schema``, each with its collation's rule when that collation
    equates spellings that differ in bytes and silver holds the column as a string."""
    strings = {f.name for f in frame_schema.fields if isinstance(f.dataType, T.StringType)}
    taken = list(frame_schema.fieldNames())
    columns = []
    for info in schema.key_columns:
        rule = collation_rule(info.collation, info.charset) if info.collation else None
        keep = rule is not None and not rule.exact and info.is_collated_string and info.name in strings
        column = KeyColumn(info.name, rule if keep else None)
        if column.rule is not None:
            # Added beside silver's columns: never one of their names (a column may be called
            # "sku in utf8mb4_general_ci").
            column = KeyColumn(info.name, column.rule, unused_name(column.checked, taken))
            taken.append(column.checked)
        columns.append(column)
    return tuple(columns)


def compared_bytewise(schema: TableSchema, frame_schema: T.StructType) -> bool:
    """Whether silver (``frame_schema``) holds every key column and compares each as the source
    does, so that its uniqueness needs no collation classes."""
    names = {f.name for f in frame_schema.fields}
    return set(schema.key) <= names and all(c.rule is None for c in key_columns(schema, frame_schema))


def unused_name(wanted: str, taken: Iterable[str]) -> str:
    """``wanted``, or ``wanted`` with the first free suffix `` (2)``, `` (3)``..., so that it is
    none of ``taken`` as Spark compares names (case-insensitively)."""
    used = {name.casefold() for name in taken}
    name, n = wanted, 1
    while name.casefold() in used:
        n += 1
        name = f"{wanted} ({n})"
    return name


def key_uniqueness(frame: DataFrame, schema: TableSchema, source: SourceProfile) -> KeyUniqueness:
    """``frame`` (silver) with the class columns of its collated key columns, and the key
    collisions the source confirms. Asks the source only when Spark found candidates."""
    columns = key_columns(schema, frame.schema)
    if all(c.rule is None for c in columns) or not set(schema.key) <= set(frame.columns):
        # Nothing collated, or a key column silver lacks (its expectation reports that).
        plain = tuple(KeyColumn(c.name) for c in columns)
        return KeyUniqueness(frame, plain, (), True)
    groups = candidate_groups(frame, columns)
    complete = len(groups) <= MAX_GROUPS
    groups = groups[:MAX_GROUPS]
    to_confirm = [list(g) for g in groups if len(g) > 1]
    classes: dict[Key, Key] = {}
    if to_confirm:
        with connection(source) as conn:
            classes = confirm(conn, columns, to_confirm)
    collisions = collisions_of(groups, classes)
    return KeyUniqueness(class_frame(frame, columns, classes), columns, collisions, complete)


def candidate_expr(name: str, rule: CollationRule) -> Column:
    """The column grouped on in Spark: the folds, then the rule's Spark collation."""
    key = F.col(quote_ident(name))
    column = key
    for source_chars, target_chars in rule.folds:
        column = F.translate(column, source_chars, target_chars)
    if rule.supplementary_equal:
        column = F.regexp_replace(column, SUPPLEMENTARY, "\ufffd")
    if rule.folds or rule.supplementary_equal:
        # Every fold replaces a non-ASCII character: ASCII keys (most keys) skip them.
        column = F.when(F.octet_length(key) == F.length(key), key).otherwise(column)
    collation = rule.spark_collation
    return F.collate(column, collation) if collation is not None else column


def candidate_groups(frame: DataFrame, columns: Sequence[KeyColumn]) -> list[dict[Key, int]]:
    """Up to ``MAX_GROUPS + 1`` groups of rows whose keys are candidates for one key: each
    group's spellings (the first ``MAX_SPELLINGS`` in key order) with the rows holding each.

    A count per candidate key first (one aggregation over ``frame``, and the only job when
    there is no candidate, as in a healthy table); only then the rows of the groups found."""
    grouping = [f"_g{i}" for i in range(len(columns))]
    spelling = [f"_k{i}" for i in range(len(columns))]
    keyed = frame.select(
        *[(candidate_expr(c.name, c.rule) if c.rule is not None else F.col(quote_ident(c.name))).alias(f"_g{i}")
          for i, c in enumerate(columns)],
        *[F.col(quote_ident(c.name)).alias(f"_k{i}") for i, c in enumerate(columns)])
    found = (keyed.groupBy(*grouping).agg(F.count(F.lit(1)).alias("_rows")).where(F.col("_rows") > 1)
             .drop("_rows").limit(MAX_GROUPS + 1))
    heads = found.collect()
    if not heads:
        return []
    # The groups found, numbered, in the same (collated) types: joined back on collation keys.
    numbered = frame.sparkSession.createDataFrame(
        [(*head, n) for n, head in enumerate(heads)],
        T.StructType([*found.schema.fields, T.StructField("_group", T.IntegerType())]))
    on = reduce(lambda a, b: a & b, [keyed[g].eqNullSafe(numbered[g]) for g in grouping])
    first = Window.partitionBy("_group").orderBy(*spelling)
    rows = (keyed.join(F.broadcast(numbered), on).groupBy("_group", *spelling).count()
            .withColumn("_n", F.row_number().over(first)).where(F.col("_n") <= MAX_SPELLINGS)
            .orderBy("_group", *spelling).collect())
    groups: list[dict[Key, int]] = [{} for _ in heads]
    for row in rows:
        groups[row["_group"]][tuple(row[k] for k in spelling)] = int(row["count"])
    return groups


def confirm(conn: pymysql.connections.Connection, columns: Sequence[KeyColumn],
            groups: Sequence[Sequence[Key]]) -> dict[Key, Key]:
    """Each spelling of ``groups`` mapped to the first spelling of its group that the source
    calls equal to it, for spellings that have such another one (others are left out).

    The server groups them with ``PARTITION BY`` in each column's own collation: the very
    comparison its unique index makes, PAD SPACE included."""
    collated = [(i, c) for i, c in enumerate(columns) if c.rule is not None]
    numbered = [(g, n, spelling) for g, spellings in enumerate(groups) for n, spelling in enumerate(spellings)]
    representatives: list[tuple[int, int, int]] = []
    for start in range(0, len(numbered), CONFIRM_BATCH):
        batch = numbered[start:start + CONFIRM_BATCH]
        sql, args = _partition_sql(columns, [(g, n, [s[i] for i, _ in collated]) for g, n, s in batch])
        representatives += [(int(g), int(n), int(first)) for g, n, first in query(conn, sql, args)]
    return canonical(groups, representatives)


def _partition_sql(columns: Sequence[KeyColumn], rows: Sequence[tuple[int, int, Sequence[Any]]]
                   ) -> tuple[str, list[Any]]:
    """``SELECT g, n, MIN(n) OVER (PARTITION BY g, v...)`` over the spellings: one ``v`` per
    collated column of ``columns`` (each row's values are those columns' values, in order),
    converted to its charset and collation. Names come from ``collation_rule``, which only
    accepts ``[a-z0-9_]``."""
    rules = [c.rule for c in columns if c.rule is not None]
    values = ", ".join(f"CONVERT(%s USING {r.charset}) COLLATE {r.collation} AS v{i}" for i, r in enumerate(rules))
    selects = " UNION ALL ".join(f"SELECT %s AS g, %s AS n, {values}" for _ in rows)
    partition = ", ".join(["g"] + [f"v{i}" for i in range(len(rules))])
    sql = f"SELECT g, n, MIN(n) OVER (PARTITION BY {partition}) FROM ({selects}) AS spellings"
    args: list[Any] = [a for g, n, vals in rows for a in (g, n, *vals)]
    return sql, args


def canonical(groups: Sequence[Sequence[Key]], representatives: Iterable[tuple[int, int, int]]) -> dict[Key, Key]:
    """From ``(group, spelling index, index of the first equal spelling)`` triples: each
    spelling that shares its class with another one, mapped to that class's first spelling.

    A spelling belongs to one group only (equal keys always land in one candidate group), so
    one mapping serves the whole frame."""
    first_of = {(g, n): first for g, n, first in representatives}
    sizes: dict[tuple[int, int], int] = {}
    for (g, _), first in first_of.items():
        sizes[(g, first)] = sizes.get((g, first), 0) + 1
    return {groups[g][n]: groups[g][first] for (g, n), first in first_of.items() if sizes[(g, first)] > 1}


def collisions_of(groups: Sequence[Mapping[Key, int]], classes: Mapping[Key, Key]) -> tuple[Collision, ...]:
    """The confirmed collisions: in each candidate group, the spellings of one class when there
    are several, or one spelling held by several rows (a byte-exact duplicate)."""
    found: list[Collision] = []
    for group in groups:
        by_class: dict[Key, list[Key]] = {}
        for spelling in group:
            by_class.setdefault(classes.get(spelling, spelling), []).append(spelling)
        for members in by_class.values():
            rows = sum(group[m] for m in members)
            if rows > 1:
                found.append(Collision(tuple(members), rows))
    return tuple(sorted(found, key=lambda c: repr(c.spellings)))  # Spark's group order varies


def class_frame(frame: DataFrame, columns: Sequence[KeyColumn], classes: Mapping[Key, Key]) -> DataFrame:
    """``frame`` plus, per collated key column, the column the uniqueness expectation reads: the
    key, or for a colliding spelling its class's first spelling (a broadcast join, only when
    there are collisions)."""
    collated = [(i, c) for i, c in enumerate(columns) if c.rule is not None]
    if not classes:
        return frame.select("*", *[F.col(quote_ident(c.name)).alias(c.checked) for _, c in collated])
    # The mapping's columns are joined beside silver's: names none of silver's can be.
    taken = [*frame.columns, *(c.checked for _, c in collated)]
    spellings = [unused_name(f"_s{i}", taken) for i in range(len(columns))]
    firsts = {i: unused_name(f"_c{i}", taken) for i, _ in collated}
    schema = T.StructType(
        [T.StructField(spellings[i], frame.schema[c.name].dataType) for i, c in enumerate(columns)]
        + [T.StructField(firsts[i], T.StringType()) for i, _ in collated])
    rows = [(*spelling, *[first[i] for i, _ in collated]) for spelling, first in classes.items()]
    mapping = frame.sparkSession.createDataFrame(rows, schema)
    on = reduce(lambda a, b: a & b,
                [frame[quote_ident(c.name)] == mapping[quote_ident(spellings[i])] for i, c in enumerate(columns)])
    joined = frame.join(F.broadcast(mapping), on, "left")
    return joined.select(
        *[frame[quote_ident(n)] for n in frame.columns],
        *[F.coalesce(mapping[quote_ident(firsts[i])], frame[quote_ident(c.name)]).alias(c.checked)
          for i, c in collated],
    )


def collision_message(table: str, columns: Sequence[KeyColumn], collisions: Sequence[Collision],
                      complete: bool = True) -> str:
    """One line naming the table, the key, its collation, an example of colliding spellings
    and the fix."""
    if not collisions:
        raise ValueError("no collision to describe")
    single = len(columns) == 1
    label = columns[0].name if single else "(" + ", ".join(c.name for c in columns) + ")"

    def show(key: Key) -> str:
        shown = [repr(v) if isinstance(v, str) else str(v) for v in key]
        return shown[0] if single else "(" + ", ".join(shown) + ")"

    collated = [c for c in columns if c.rule is not None]
    compared = "; ".join(f"{c.rule.collation}: {c.rule.describe()}" + ("" if single else f", for {c.name}")
                         for c in collated if c.rule is not None)
    # An example of spellings that differ, rather than a byte-exact duplicate, when there is one.
    first = next((c for c in collisions if len(c.spellings) > 1), collisions[0])
    if len(first.spellings) == 1:
        example = f"{label} {show(first.spellings[0])} is held by {first.rows} rows"
    else:
        example = f"{label} {' and '.join(show(s) for s in first.spellings)} are one key ({first.rows} rows)"
    n = len(collisions)
    count = f"{n} key{'' if n == 1 else 's'}" if complete else f"{n} or more keys"
    return (f"table {table}: {count} of silver held by more than one row, keys compared as the source "
            f"compares them ({compared}): e.g. {example}. The source holds each key once, so silver "
            f"keeps rows the source does not have: {_fix(table, collisions)}")


def _fix(table: str, collisions: Sequence[Collision]) -> str:
    """The command that removes the collisions: ``repair`` re-reads the keys and deletes the
    spellings the source does not hold; a row held twice byte for byte is not re-read away
    (the merge updates both), ``rebuild`` writes silver anew with one row per key."""
    repair = f"`make repair TABLE={table}`"
    if all(len(c.spellings) > 1 for c in collisions):
        return f"re-read those keys with {repair} (it deletes the spellings the source does not hold)"
    return (f"write silver anew from bronze with `make rebuild TABLE={table}` (a row held twice is not "
            f"re-read away), then {repair} if a spelling the source does not hold remains")
