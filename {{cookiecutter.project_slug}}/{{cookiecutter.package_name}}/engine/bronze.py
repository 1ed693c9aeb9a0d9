"""Bronze: the append-only Delta changelog of one source table.

Columns are the source columns plus ``_op`` (r/c/u/d), ``_seq`` (total order), the source
position, the source timestamp, ingest time, run id and ``_batch`` (the bronze commit number,
which silver uses to read only what it has not applied). Each append commits its checkpoint
as Delta ``userMetadata`` and uses ``txnAppId``/``txnVersion`` so a retried commit is a no-op.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .checkpoint import Checkpoint

META_FIELDS = (
    T.StructField("_op", T.StringType(), False),
    T.StructField("_seq", T.DecimalType(38, 0), False),
    T.StructField("_source_file", T.StringType(), True),
    T.StructField("_source_pos", T.LongType(), True),
    T.StructField("_source_ts", T.TimestampType(), True),
    T.StructField("_ingested_at", T.TimestampType(), False),
    T.StructField("_run_id", T.StringType(), False),
    T.StructField("_batch", T.LongType(), False),
)
META_COLUMNS = tuple(f.name for f in META_FIELDS)


def bronze_schema(source: T.StructType) -> T.StructType:
    return T.StructType([*source.fields, *META_FIELDS])


def exists(spark: SparkSession, path: str) -> bool:
    from delta.tables import DeltaTable

    return DeltaTable.isDeltaTable(spark, path)


def append(df: DataFrame, path: str, checkpoint: Checkpoint) -> None:
    """Append rows and their checkpoint in one Delta commit (an empty frame still commits)."""
    (
        df.write.format("delta")
        .mode("append")
        .option("userMetadata", checkpoint.to_json())
        .option("txnAppId", f"bronze:{checkpoint.table}")
        .option("txnVersion", checkpoint.batch)
        .save(path)
    )


def latest_checkpoint(spark: SparkSession, path: str) -> Checkpoint | None:
    """The checkpoint of the newest bronze commit that carries one."""
    if not exists(spark, path):
        return None
    from delta.tables import DeltaTable

    rows = (
        DeltaTable.forPath(spark, path)
        .history()
        .where(F.col("userMetadata").isNotNull() & (F.col("operation") == "WRITE"))
        .orderBy(F.col("version").desc())
        .select("userMetadata")
        .limit(1)
        .collect()
    )
    return Checkpoint.from_json(rows[0][0]) if rows else None


def read_batches(spark: SparkSession, path: str, after: int, upto: int) -> DataFrame:
    df = spark.read.format("delta").load(path)
    return df.where((F.col("_batch") > after) & (F.col("_batch") <= upto))
