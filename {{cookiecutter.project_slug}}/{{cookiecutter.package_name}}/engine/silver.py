"""Silver: the current state per key, fed from bronze by MERGE with a sequence guard.

Each MERGE records the bronze batch it has applied (commit ``userMetadata``), so a crash between
the bronze and the silver commit heals on the next run, and re-applying is a no-op.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from . import bronze
from .source import quote_ident

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
SILVER_META = ("_seq", "_op", "_source_ts", "_ingested_at")
Transform = Callable[[DataFrame], DataFrame]


def applied_batch(spark: SparkSession, path: str) -> int:
    """The last bronze batch merged into silver; -1 when silver does not exist yet."""
    if not bronze.exists(spark, path):
        return -1
    from delta.tables import DeltaTable

    rows = (
        DeltaTable.forPath(spark, path)
        .history()
        .where(F.col("userMetadata").isNotNull())
        .orderBy(F.col("version").desc())
        .select("userMetadata")
        .limit(1)
        .collect()
    )
    return int(json.loads(rows[0][0])["bronze_batch"]) if rows else -1


def latest_per_key(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """Keep only the newest change of every key (highest ``_seq``)."""
    window = Window.partitionBy(*[F.col(quote_ident(k)) for k in key]).orderBy(F.col("_seq").desc())
    return changes.withColumn("_rank", F.row_number().over(window)).where("_rank = 1").drop("_rank")


def apply(
    spark: SparkSession,
    *,
    bronze_path: str,
    silver_path: str,
    key: Sequence[str],
    upto_batch: int,
    transform: Transform | None = None,
) -> int:
    """Merge bronze batches ``(applied, upto_batch]`` into silver; returns batches applied."""
    done = applied_batch(spark, silver_path)
    if done >= upto_batch:
        return 0
    changes = bronze.read_batches(spark, bronze_path, done, upto_batch)
    columns = [c for c in changes.columns if c not in bronze.META_COLUMNS]
    latest = latest_per_key(changes, key).select(*[quote_ident(c) for c in columns], *SILVER_META)
    if transform is not None:
        latest = transform(latest)
    marker = json.dumps({"bronze_batch": upto_batch})
    if not bronze.exists(spark, silver_path):
        (
            latest.where("_op != 'd'")
            .write.format("delta")
            .option("userMetadata", marker)
            .mode("errorifexists")
            .save(silver_path)
        )
        return upto_batch - done
    from delta.tables import DeltaTable

    on = " AND ".join(f"t.{quote_ident(k)} = s.{quote_ident(k)}" for k in key)
    values = {quote_ident(c): f"s.{quote_ident(c)}" for c in latest.columns}
    spark.conf.set(USER_METADATA_CONF, marker)
    try:
        (
            DeltaTable.forPath(spark, silver_path)
            .alias("t")
            .merge(latest.alias("s"), on)
            .whenMatchedDelete(condition="s._op = 'd' AND s._seq > t._seq")
            .whenMatchedUpdate(condition="s._op != 'd' AND s._seq > t._seq", set=values)
            .whenNotMatchedInsert(condition="s._op != 'd'", values=values)
            .execute()
        )
    finally:
        spark.conf.unset(USER_METADATA_CONF)
    return upto_batch - done
