"""Silver: the current state per key, fed from bronze by MERGE with a sequence guard.

Each MERGE records the bronze batch it has applied (commit ``userMetadata``), so a crash between
the bronze and the silver commit heals on the next run, and re-applying is a no-op.

Each silver commit is also an idempotent Delta transaction (``silver:<table>``, version = the
bronze batch applied), so a run that merges an older batch after another run merged a newer one
is skipped rather than moving silver back; a MERGE that loses a race to another run's commit is
a Delta conflict, reported as a retriable error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from . import bronze
from .errors import ConcurrentRunError
from .source import quote_ident

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
# Delta's idempotent DML: a MERGE whose version is not above the app id's last one is skipped.
TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
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
    table: str | None = None,
) -> int:
    """Merge bronze batches ``(applied, upto_batch]`` into silver; returns batches applied.

    ``table`` names the table in errors (default: the last part of ``silver_path``). Raises
    ``ConcurrentRunError`` when another run committed to silver concurrently."""
    name = table or silver_path.rstrip("/").rsplit("/", 1)[-1]
    done = applied_batch(spark, silver_path)
    if done >= upto_batch:
        return 0
    changes = bronze.read_batches(spark, bronze_path, done, upto_batch)
    columns = [c for c in changes.columns if c not in bronze.META_COLUMNS]
    latest = latest_per_key(changes, key).select(*[quote_ident(c) for c in columns], *SILVER_META)
    if transform is not None:
        latest = transform(latest)
    marker = json.dumps({"bronze_batch": upto_batch})
    app_id = f"silver:{name}"
    if not bronze.exists(spark, silver_path):
        try:
            (
                latest.where("_op != 'd'")
                .write.format("delta")
                .option("userMetadata", marker)
                .option("txnAppId", app_id)
                .option("txnVersion", upto_batch)
                .mode("errorifexists")
                .save(silver_path)
            )
        except (CapturedException, Py4JJavaError) as exc:
            # Another run created silver since we looked: a creation conflict, or "path exists".
            created_meanwhile = isinstance(exc, AnalysisException) and bronze.exists(spark, silver_path)
            if not (created_meanwhile or bronze.is_commit_conflict(exc)):
                raise
            raise concurrent_silver_write(name) from None
        return upto_batch - done
    from delta.tables import DeltaTable

    on = " AND ".join(f"t.{quote_ident(k)} = s.{quote_ident(k)}" for k in key)
    values = {quote_ident(c): f"s.{quote_ident(c)}" for c in latest.columns}
    conf = {USER_METADATA_CONF: marker, TXN_APP_ID_CONF: app_id, TXN_VERSION_CONF: str(upto_batch)}
    try:
        with _session_conf(spark, conf):
            (
                DeltaTable.forPath(spark, silver_path)
                .alias("t")
                .merge(latest.alias("s"), on)
                .whenMatchedDelete(condition="s._op = 'd' AND s._seq > t._seq")
                .whenMatchedUpdate(condition="s._op != 'd' AND s._seq > t._seq", set=values)
                .whenNotMatchedInsert(condition="s._op != 'd'", values=values)
                .execute()
            )
    except (CapturedException, Py4JJavaError) as exc:
        if not bronze.is_commit_conflict(exc):
            raise
        raise concurrent_silver_write(name) from None
    return upto_batch - done


def concurrent_silver_write(table: str) -> ConcurrentRunError:
    return ConcurrentRunError(
        f"table {table}: another run changed silver while this run merged into it (two runs of "
        "this table on one lake, e.g. from two checkouts); this run's MERGE was not committed and "
        f"nothing is lost: run again (`make ingest TABLE={table}`), silver catches up from bronze",
        table=table,
    )


@contextmanager
def _session_conf(spark: SparkSession, conf: dict[str, str]) -> Iterator[None]:
    """Set session confs for one command; Delta reads MERGE's commit options only from them."""
    for name, value in conf.items():
        spark.conf.set(name, value)
    try:
        yield
    finally:
        for name in conf:
            spark.conf.unset(name)
