"""Silver as SCD type 2: every version of every key, with its validity interval.

A table module with ``scd_type=2`` keeps, instead of one row per key, one row per version:

- ``_seq``: the change that made the version (binlog order, see ``state.positions.sequence``);
- ``_end_seq``: the next change of the key (an update or a delete), NULL while current; the
  version was the key's state exactly for changes in ``[_seq, _end_seq)``: exact, since every
  change has its own ``_seq``;
- ``_valid_from`` / ``_valid_to``: the times of those two changes: the source's commit time of a
  binlog change (seconds), the time of the read for a row read by a snapshot or a repair (which
  may have held since earlier). Only ``_seq``/``_end_seq`` order versions exactly;
- ``_is_current``: the key's newest version, unless the key was deleted.

Each bronze batch is applied by one MERGE, so a batch lands whole or not at all: the batch's
changes newer than anything silver knows of their key (its newest version's ``_seq``, or the
``_end_seq`` of the change that closed it, a delete included: the same guard as SCD type 1, so a
change read again changes nothing) become versions; each key's current version is closed by its
first such change. The table's silver transform is applied to the changes first, so keys are
compared as silver holds them. :func:`versions` is the same computation over the whole of bronze, which is
what ``rebuild`` writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ..identifiers import quote_ident
from ..ops import Op
from . import portable, sqlmerge
from .bronze import META_COLUMNS

HISTORY_META = ("_end_seq", "_valid_from", "_valid_to", "_is_current")
CHANGE_META = ("_seq", "_op", "_source_ts", "_ingested_at")  # what silver keeps of each change
CURRENT = "_is_current"
_MERGE_KEY = "_merge_key_"  # prefix of the MERGE's own key columns (NULL on rows to insert)


def _keys(key: Sequence[str]) -> list[Column]:
    return [F.col(quote_ident(k)) for k in key]


def shaped(changes: DataFrame, transform: Callable[[DataFrame], DataFrame] | None) -> DataFrame:
    """Bronze rows as silver keeps them: the row's columns and ``CHANGE_META``, transformed."""
    columns = [quote_ident(c) for c in changes.columns if c not in META_COLUMNS]
    rows = changes.select(*columns, *CHANGE_META)
    return transform(rows) if transform is not None else rows


def versions(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """One row per version made by ``changes`` (:func:`shaped` rows): each non-delete change,
    closed by the key's next change. ``_is_current`` marks the last version of a key whose last
    change is not a delete."""
    columns = [quote_ident(c) for c in changes.columns if c not in CHANGE_META]
    by_key = Window.partitionBy(*_keys(key)).orderBy(F.col("_seq"))
    timed = changes.withColumn("_at", F.coalesce(F.col("_source_ts"), F.col("_ingested_at")))
    following = (timed
                 .withColumn("_end_seq", F.lead("_seq").over(by_key))
                 .withColumn("_valid_to", F.lead("_at").over(by_key)))
    return (following.where(F.col("_op") != Op.DELETE.value)
            .select(*columns, *CHANGE_META, "_end_seq", F.col("_at").alias("_valid_from"), "_valid_to",
                    F.col("_end_seq").isNull().alias(CURRENT)))


def newer_than_known(changes: DataFrame, silver: DataFrame, key: Sequence[str]) -> DataFrame:
    """``changes`` newer than the newest change silver knows of their key (a version's ``_seq``,
    or the ``_end_seq`` that closed it): a change read again is not, and changes nothing. A key
    a delete ended has no current version, but its last ``_end_seq`` still guards it."""
    wanted = changes.select(*_keys(key)).distinct()
    known = (silver.join(wanted, on=list(key), how="left_semi").groupBy(*_keys(key))
             .agg(F.max(F.coalesce(F.col("_end_seq"), F.col("_seq"))).alias("_known_seq")))
    joined = changes.join(known, on=list(key), how="left")
    return joined.where(F.col("_known_seq").isNull() | (F.col("_seq") > F.col("_known_seq"))).drop("_known_seq")


def merge_rows(changes: DataFrame, silver: DataFrame, key: Sequence[str]) -> DataFrame:
    """The MERGE's source for :func:`shaped` ``changes`` into ``silver`` (every version): the
    versions to insert (merge keys NULL: they never match) and, per key with a current version
    and newer changes, the row closing that version (merge keys set)."""
    fresh = newer_than_known(changes, silver, key)
    inserted = versions(fresh, key)
    for k in key:
        inserted = inserted.withColumn(_MERGE_KEY + k, F.lit(None).cast(fresh.schema[k].dataType))
    first = Window.partitionBy(*_keys(key)).orderBy(F.col("_seq"))
    opening = (fresh.withColumn("_rank", F.row_number().over(first)).where("_rank = 1")
               .select(*_keys(key), F.col("_seq").alias("_close_seq"),
                       F.coalesce(F.col("_source_ts"), F.col("_ingested_at")).alias("_close_at")))
    closing = current_rows(silver).join(opening, on=list(key), how="inner")
    closing = closing.select(*(F.col(quote_ident(c)) for c in inserted.columns if not c.startswith(_MERGE_KEY)
                               and c not in ("_end_seq", "_valid_to")),
                             F.col("_close_seq").alias("_end_seq"), F.col("_close_at").alias("_valid_to"),
                             *(F.col(quote_ident(k)).alias(_MERGE_KEY + k) for k in key))
    return inserted.unionByName(closing)


def merge(spark: SparkSession, path: str, rows: DataFrame, key: Sequence[str]) -> None:
    """Apply :func:`merge_rows` to silver at ``path`` (the caller sets the commit's metadata)."""
    from delta.tables import DeltaTable

    matches = reduce(lambda a, b: a & b, [F.col(f"t.{quote_ident(k)}") == F.col(f"s.{quote_ident(_MERGE_KEY + k)}")
                                          for k in key]) & F.col(f"t.{CURRENT}")
    stored = [c for c in rows.columns if not c.startswith(_MERGE_KEY)]
    inserted = f"s.{quote_ident(_MERGE_KEY + key[0])} IS NULL"
    if portable.active(spark):
        on = " AND ".join(f"t.{quote_ident(k)} = s.{quote_ident(_MERGE_KEY + k)}" for k in key) + f" AND t.{CURRENT}"
        sqlmerge.merge(spark, path, rows, on, [
            f"WHEN MATCHED THEN UPDATE SET _end_seq = s._end_seq, _valid_to = s._valid_to, {CURRENT} = false",
            f"WHEN NOT MATCHED AND {inserted} THEN INSERT {sqlmerge.insertion(stored)}",
        ])
        return
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
