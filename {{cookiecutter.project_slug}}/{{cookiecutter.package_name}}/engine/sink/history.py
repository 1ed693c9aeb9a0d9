"""Silver as SCD type 2: every version of every key, with its validity interval.

A table module with ``scd_type=2`` keeps, instead of one row per key, one row per version:

- ``_seq``: the change that made the version (binlog order, see ``state.positions.sequence``);
- ``_end_seq``: the next change of the key (an update or a delete), NULL while current; the
  version was the key's state exactly for changes in ``[_seq, _end_seq)``: exact, since every
  change has its own ``_seq``;
- ``_valid_from`` / ``_valid_to``: the source's commit times of those two changes (seconds;
  ``_valid_from`` is NULL for a version read by a snapshot, which existed since some unknown time);
- ``_is_current``: the key's newest version, unless the key was deleted.

Each bronze batch is applied by one MERGE, so a batch lands whole or not at all: the batch's
changes newer than the key's current version (the same ``_seq`` guard as SCD type 1, so a
change read again changes nothing) become versions; each key's current version is closed by its
first such change. :func:`versions` is the same computation over the whole of bronze, which is
what ``rebuild`` writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ..ops import Op
from ..source.connection import quote_ident

HISTORY_META = ("_end_seq", "_valid_from", "_valid_to", "_is_current")
CURRENT = "_is_current"
_MERGE_KEY = "_merge_key_"  # prefix of the MERGE's own key columns (NULL on rows to insert)


def _keys(key: Sequence[str]) -> list[Column]:
    return [F.col(quote_ident(k)) for k in key]


def versions(changes: DataFrame, key: Sequence[str], columns: Sequence[str]) -> DataFrame:
    """One row per version made by ``changes`` (bronze rows: source ``columns`` plus meta):
    each non-delete change, closed by the key's next change. ``_is_current`` marks the last
    version of a key whose last change is not a delete."""
    by_key = Window.partitionBy(*_keys(key)).orderBy(F.col("_seq"))
    following = (changes
                 .withColumn("_end_seq", F.lead("_seq").over(by_key))
                 .withColumn("_valid_to", F.lead("_source_ts").over(by_key)))
    return (following.where(F.col("_op") != Op.DELETE.value)
            .select(*(quote_ident(c) for c in columns), "_seq", "_op", "_source_ts", "_ingested_at",
                    "_end_seq", F.col("_source_ts").alias("_valid_from"), "_valid_to",
                    F.col("_end_seq").isNull().alias(CURRENT)))


def newer_than_current(changes: DataFrame, current: DataFrame, key: Sequence[str]) -> DataFrame:
    """``changes`` newer than their key's current version in silver (all of a key without one):
    a change read again is older or equal, and changes nothing."""
    held = current.select(*_keys(key), F.col("_seq").alias("_current_seq"))
    joined = changes.join(held, on=list(key), how="left")
    return joined.where(F.col("_current_seq").isNull() | (F.col("_seq") > F.col("_current_seq"))).drop("_current_seq")


def merge_rows(changes: DataFrame, current: DataFrame, key: Sequence[str], columns: Sequence[str],
               transform: Callable[[DataFrame], DataFrame] | None = None) -> DataFrame:
    """The MERGE's source: the versions to insert (merge keys NULL: they never match) and, per
    key with a current version and newer changes, the row closing that version (merge keys set).
    ``transform`` (the table's silver transform) shapes the new versions."""
    fresh = newer_than_current(changes, current, key)
    inserted = versions(fresh, key, columns)
    if transform is not None:
        inserted = transform(inserted)
    for k in key:
        inserted = inserted.withColumn(_MERGE_KEY + k, F.lit(None).cast(fresh.schema[k].dataType))
    first = Window.partitionBy(*_keys(key)).orderBy(F.col("_seq"))
    opening = (fresh.withColumn("_rank", F.row_number().over(first)).where("_rank = 1")
               .select(*_keys(key), F.col("_seq").alias("_close_seq"), F.col("_source_ts").alias("_close_ts")))
    closing = current.join(opening, on=list(key), how="inner")
    closing = closing.select(*(F.col(quote_ident(c)) for c in inserted.columns if not c.startswith(_MERGE_KEY)
                               and c not in ("_end_seq", "_valid_to")),
                             F.col("_close_seq").alias("_end_seq"), F.col("_close_ts").alias("_valid_to"),
                             *(F.col(quote_ident(k)).alias(_MERGE_KEY + k) for k in key))
    return inserted.unionByName(closing)


def merge(spark: SparkSession, path: str, rows: DataFrame, key: Sequence[str]) -> None:
    """Apply :func:`merge_rows` to silver at ``path`` (the caller sets the commit's metadata)."""
    from delta.tables import DeltaTable

    matches = reduce(lambda a, b: a & b, [F.col(f"t.{quote_ident(k)}") == F.col(f"s.{quote_ident(_MERGE_KEY + k)}")
                                          for k in key]) & F.col(f"t.{CURRENT}")
    stored = [c for c in rows.columns if not c.startswith(_MERGE_KEY)]
    inserted = f"s.{quote_ident(_MERGE_KEY + key[0])} IS NULL"
    (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(rows.alias("s"), matches)
        .whenMatchedUpdate(set={"_end_seq": "s._end_seq", "_valid_to": "s._valid_to", CURRENT: "false"})
        .whenNotMatchedInsert(condition=inserted, values={quote_ident(c): f"s.{quote_ident(c)}" for c in stored})
        .execute()
    )


def current_rows(silver: DataFrame) -> DataFrame:
    """Silver's current versions: the table's state, one row per key."""
    return silver.where(F.col(CURRENT))
