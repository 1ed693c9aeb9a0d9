"""Bronze: the append-only Delta changelog of one source table.

Columns are the source columns plus ``_op`` (r/c/u/d), ``_seq`` (total order), the source
position, the source timestamp, ingest time, run id and ``_batch`` (the bronze commit number,
which silver uses to read only what it has not applied). Each append commits its checkpoint
as Delta ``userMetadata`` and uses ``txnAppId``/``txnVersion`` (the batch number).

Two runs of one table on one lake (two checkouts, two machines: the file locks of ``locks.py``
only see one machine's target directory) both continue from the same checkpoint and so commit
the same batch number. Delta then *skips* the second commit without a word, as an idempotent
retry, and the second run would carry on as if its rows had landed. ``append`` therefore checks
that the commit carrying exactly its checkpoint exists, and turns a skip (or a Delta commit
conflict) into a retriable error; the next run resumes from the last committed checkpoint.
"""

from __future__ import annotations

from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .checkpoint import Checkpoint
from .errors import ConcurrentRunError

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
    """Append rows and their checkpoint in one Delta commit (an empty frame still commits).

    Raises ``ConcurrentRunError`` when another run committed this batch number first (Delta
    skipped our commit) or committed while ours was in flight (a Delta conflict): nothing of this
    batch is in the table then, and running again resumes from the last committed checkpoint."""
    spark = df.sparkSession
    marker = checkpoint.to_json()
    before = _latest_version(spark, path)
    try:
        (
            df.write.format("delta")
            .mode("append")
            .option("userMetadata", marker)
            .option("txnAppId", f"bronze:{checkpoint.table}")
            .option("txnVersion", checkpoint.batch)
            .save(path)
        )
    except (CapturedException, Py4JJavaError) as exc:
        if not is_commit_conflict(exc):
            raise
        raise concurrent_bronze_write(checkpoint) from None
    if not _committed_since(spark, path, before, marker):
        raise concurrent_bronze_write(checkpoint)


def concurrent_bronze_write(checkpoint: Checkpoint) -> ConcurrentRunError:
    table = checkpoint.table
    return ConcurrentRunError(
        f"table {table}: another run wrote bronze batch {checkpoint.batch} concurrently (two runs "
        "of this table on one lake, e.g. from two checkouts); this run's batch was not committed "
        f"and nothing is lost: run again (`make ingest TABLE={table}`), it resumes from the last "
        "committed checkpoint",
        table=table,
    )


def is_commit_conflict(exc: BaseException) -> bool:
    """A Delta optimistic-concurrency conflict: another writer committed to the table first.

    delta-spark converts these Java exceptions into its own Python classes, but only when the
    exception reaches Python unwrapped; otherwise they arrive as a plain ``Py4JJavaError``."""
    from delta import exceptions as delta_errors

    conflicts = tuple(getattr(delta_errors, name) for name in delta_errors.__all__)
    if isinstance(exc, conflicts):
        return True
    if not isinstance(exc, Py4JJavaError):
        return False
    cause = exc.java_exception
    while cause is not None:
        if cause.getClass().getName().startswith("io.delta.exceptions."):
            return True
        cause = cause.getCause()
    return False


def _latest_version(spark: SparkSession, path: str) -> int:
    """The table's newest commit version; -1 when the table does not exist yet."""
    if not exists(spark, path):
        return -1
    from delta.tables import DeltaTable

    return int(DeltaTable.forPath(spark, path).history(1).select("version").first()[0])


def _committed_since(spark: SparkSession, path: str, version: int, marker: str) -> bool:
    """Whether a commit after ``version`` carries ``marker`` as its ``userMetadata``.

    The marker is the whole checkpoint, run id included, so another run's commit of the same
    batch number never matches. Usually our commit is the newest one: one look suffices."""
    if not exists(spark, path):
        return False
    from delta.tables import DeltaTable

    history = DeltaTable.forPath(spark, path).history
    newest = history(1).select("version", "userMetadata").first()
    if newest is None or int(newest[0]) <= version:
        return False
    if newest[1] == marker:
        return True
    rows = history(int(newest[0]) - version).where(F.col("version") > version).select("userMetadata").collect()
    return any(row[0] == marker for row in rows)


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
