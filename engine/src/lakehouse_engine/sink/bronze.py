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
conflict) into a retriable error; the next run resumes from the last committed checkpoint. That
check reads commit files directly (:mod:`deltalog`), usually just the newest one, not
``history()``: a Spark job per look, which cost about 0.25 s per append.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import ConcurrentRunError
from ..identifiers import quote_ident
from ..state.checkpoint import Checkpoint
from ..state.lakechange import LakeChange
from . import columnmap, deltafiles, parquetfiles, portable, schemacommit
from .arrows import arrow_schema, rows_to_batch
from .log import deltalog, localfiles, transaction
from .portable import spark_errors

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
CHECKPOINT_INTERVAL = "delta.checkpointInterval"
# Delta writes a checkpoint inside every 10th commit (its default interval), on the committing
# thread: a Spark job that rebuilds the table's state and writes it as Parquet, 1.5 s in a warm
# JVM and 5-6 s as a run's first. A catch-up of 500k changes commits bronze 10 times (50k rows
# each), so it paid one: 4 s of a 31 s catch-up (1.5M-row table, 2 cores). Bronze is append-only
# and only ever read whole or from a batch on, so it checkpoints every 100 commits: a reader
# replays at most 99 small JSON commits after the checkpoint. Silver does the same (see
# silverwrite.SILVER_CHECKPOINT_INTERVAL).
BRONZE_CHECKPOINT_INTERVAL = 100
NEW_TABLE_PROPERTIES = {CHECKPOINT_INTERVAL: str(BRONZE_CHECKPOINT_INTERVAL)}  # a new bronze table's

log = logging.getLogger(__name__)
_spaced: set[str] = set()  # bronze tables whose checkpoint interval this process has seen to


def bronze_schema(source: T.StructType) -> T.StructType:
    return T.StructType([*source.fields, *META_FIELDS])


def exists(spark: SparkSession, path: str) -> bool:
    if portable.active(spark):  # DeltaTable's Python API calls the driver's JVM
        return deltalog.newest_version(spark, path) >= 0
    from delta.tables import DeltaTable

    return DeltaTable.isDeltaTable(spark, path)


def append(df: DataFrame, path: str, checkpoint: Checkpoint, *, replace_all: bool = False) -> None:
    """Append rows and their checkpoint in one Delta commit (an empty frame still commits).
    ``replace_all``: the frame replaces the whole table, schema included (a schema change that
    rewrites rows).

    Raises ``ConcurrentRunError`` when another run committed this batch number first (Delta
    skipped our commit) or committed while ours was in flight (a Delta conflict): nothing of this
    batch is in the table then, and running again resumes from the last committed checkpoint."""
    spark = df.sparkSession
    marker = checkpoint.to_json()
    app_id = f"bronze:{checkpoint.table}"
    try:
        writer = df.write.format("delta")
        if replace_all:
            columnmap.enable_for_rewrite(spark, path, df.columns)
            writer = writer.mode("overwrite").option("overwriteSchema", "true")
        else:
            writer = writer.mode("append")
        if not exists(spark, path):  # the append creates bronze
            writer = writer.options(**columnmap.creation_properties(df.columns), **NEW_TABLE_PROPERTIES)
        (
            writer
            .option("userMetadata", marker)
            .option("txnAppId", app_id)
            .option("txnVersion", checkpoint.batch)
            .save(path)
        )
    except spark_errors() as exc:
        if not is_commit_conflict(exc):
            raise
        raise concurrent_bronze_write(checkpoint) from None
    if not deltalog.landed(spark, path, app_id, checkpoint.batch, marker):
        raise concurrent_bronze_write(checkpoint)


def append_batch(spark: SparkSession, path: str, rows: Sequence[tuple[Any, ...]] | pa.Table, source: T.StructType,
                 checkpoint: Checkpoint) -> pa.Table:
    """:func:`append` for a batch of rows in the driver's memory: canonical tuples of the
    ``source`` columns' values, then the :data:`META_FIELDS` values (or those rows as an Arrow
    table of bronze's schema). Returns them as the Arrow table that was committed.

    On a local lake whose bronze exists (not in portable mode), the rows go to one Parquet file written by pyarrow in
    the table's folder (under the names bronze reads its columns by) and are committed by
    :func:`commit_files`: no Spark job, and no per-row
    Python-to-JVM conversion (which cost more than decoding the binlog). Elsewhere they cross to
    Spark as one Arrow table."""
    schema = bronze_schema(source)
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows_to_batch(rows, arrow_schema(schema))])
    if table.schema != arrow_schema(schema):
        raise ValueError(f"bronze rows of another schema: {table.schema} against {arrow_schema(schema)}")
    space_checkpoints(spark, path)
    direct = localfiles.is_local(path) and not portable.active(spark)
    physical = columnmap.table_names(spark, path) if direct else None
    if physical is None:
        append(spark.createDataFrame(table, schema=schema), path, checkpoint)
        return table
    files = []
    if table.num_rows:
        name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        file = os.path.join(localfiles.local_path(path), name)
        try:
            names = columnmap.renamed(table.column_names, physical)
        except columnmap.StaleColumns as exc:
            raise ConcurrentRunError(
                f"table {checkpoint.table}: bronze's columns are not those of the rows to write ({exc}): "
                "another run changed them, or a schema change is not applied yet; nothing was written: run "
                f"`make ingest TABLE={checkpoint.table}`, then again", table=checkpoint.table) from None
        parquetfiles.write(table.rename_columns(names), file)
        files.append(deltafiles.DataFile(file, table.num_rows, {"_batch": checkpoint.batch},
                                         {"_batch": checkpoint.batch}, {"_batch": 0}))
    try:
        commit_files(spark, path, files, checkpoint, physical)
    except ConcurrentRunError:
        for data in files:  # certainly not committed: remove it now rather than leave litter
            os.unlink(data.path)
        raise
    # Any other error may come after the commit landed (Ctrl-C while the JVM commits, a lost
    # py4j connection): the file stays, VACUUM removes it if no commit references it.
    return table


def space_checkpoints(spark: SparkSession, path: str) -> None:
    """Give the existing bronze table at ``path`` :data:`BRONZE_CHECKPOINT_INTERVAL` unless it has
    an interval of its own (a team's setting stands): one metadata commit in the life of a table
    created before new ones got it (:data:`NEW_TABLE_PROPERTIES`), looked for once per process.
    Only an optimisation: a failure is a warning, and the append that follows reports any real
    problem with the table."""
    if path in _spaced:
        return
    try:
        if deltalog.newest_version(spark, path) < 0:
            return  # the append creates it; the next one sets the interval
        if deltalog.table_property(spark, path, CHECKPOINT_INTERVAL) is None:
            spark.sql(f"ALTER TABLE delta.{quote_ident(path)} SET TBLPROPERTIES "
                      f"('{CHECKPOINT_INTERVAL}' = '{BRONZE_CHECKPOINT_INTERVAL}')")
    except spark_errors() as exc:
        log.warning("%s: %s not set (%s); Delta checkpoints it every 10 commits", path, CHECKPOINT_INTERVAL,
                    str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__)
    _spaced.add(path)


def commit_files(spark: SparkSession, path: str, files: Sequence[deltafiles.DataFile],
                 checkpoint: Checkpoint, physical: Mapping[str, str]) -> None:
    """One idempotent Delta commit of Parquet ``files`` already in bronze's folder, written with
    column names ``physical``, with ``checkpoint`` as its metadata; the same guarantees as
    :func:`append` (a batch another run committed first, a commit racing ours, or columns that
    changed since the files were written, is a ``ConcurrentRunError``)."""
    try:
        deltafiles.append_files(spark, path, files, app_id=f"bronze:{checkpoint.table}",
                                version=checkpoint.batch, user_metadata=checkpoint.to_json(),
                                physical=physical)
    except (transaction.AlreadyCommitted, columnmap.StaleColumns):
        raise concurrent_bronze_write(checkpoint) from None
    except spark_errors() as exc:
        if not is_commit_conflict(exc):
            raise
        raise concurrent_bronze_write(checkpoint) from None


def commit_schema(spark: SparkSession, path: str, changes: Sequence[LakeChange],
                  described: Sequence[dict[str, Any]], checkpoint: Checkpoint, features: Collection[str]) -> bool:
    """Apply ``changes`` to bronze as one metadata-only commit carrying ``checkpoint``
    (:mod:`schemacommit`); False, with nothing committed, when they need the rows rewritten.
    ``described``: the source columns afterwards, as Delta schema fields; ``features``: those it
    may switch on. The same guarantees as :func:`commit_files`."""
    try:
        return schemacommit.commit(spark, path, changes, META_COLUMNS, user_metadata=checkpoint.to_json(),
                                   described=described, app_id=f"bronze:{checkpoint.table}",
                                   version=checkpoint.batch, features=features)
    except transaction.AlreadyCommitted:
        raise concurrent_bronze_write(checkpoint) from None
    except spark_errors() as exc:
        if not is_commit_conflict(exc):
            raise
        raise concurrent_bronze_write(checkpoint) from None


def concurrent_bronze_write(checkpoint: Checkpoint) -> ConcurrentRunError:
    table = checkpoint.table
    return ConcurrentRunError(
        f"table {table}: another run wrote bronze batch {checkpoint.batch} concurrently (two runs "
        "of this table on one lake, e.g. from two checkouts); this run's batch was not committed "
        f"and nothing is lost: run again (`make ingest TABLE={table}`), it resumes from the last "
        "committed checkpoint",
        table=table,
    )


# Delta's error conditions of its optimistic-concurrency conflicts (io.delta.exceptions.*).
CONFLICT_CONDITIONS = frozenset({
    "DELTA_CONCURRENT_APPEND", "DELTA_CONCURRENT_DELETE_DELETE", "DELTA_CONCURRENT_DELETE_READ",
    "DELTA_CONCURRENT_TRANSACTION", "DELTA_CONCURRENT_WRITE", "DELTA_METADATA_CHANGED", "DELTA_PROTOCOL_CHANGED",
})


def is_commit_conflict(exc: BaseException) -> bool:
    """A Delta optimistic-concurrency conflict: another writer committed to the table first.

    delta-spark converts these Java exceptions into its own Python classes, but only when the
    exception reaches Python unwrapped; otherwise they arrive as a plain ``Py4JJavaError``. A
    Spark Connect client gets them by their error condition."""
    from delta import exceptions as delta_errors

    conflicts = tuple(getattr(delta_errors, name) for name in delta_errors.__all__)
    # Delta's conditions have sub-conditions on Spark Connect (DELTA_CONCURRENT_APPEND.WITHOUT_HINT).
    if isinstance(exc, conflicts) or portable.error_condition(exc).split(".")[0] in CONFLICT_CONDITIONS:
        return True
    if not isinstance(exc, Py4JJavaError):
        return False
    cause = exc.java_exception
    while cause is not None:
        if cause.getClass().getName().startswith("io.delta.exceptions."):
            return True
        cause = cause.getCause()
    return False


def checkpoints_back(spark: SparkSession, path: str, newest: int | None = None) -> Iterator[Checkpoint]:
    """The checkpoints of bronze's commits, newest first, from version ``newest`` (default: the
    newest; commits without one, table creation and maintenance, are passed over)."""
    for commit in deltalog.commits_back(spark, path, newest):
        if commit.operation == "WRITE" and commit.user_metadata is not None:
            yield Checkpoint.from_json(commit.user_metadata)


def latest_checkpoint(spark: SparkSession, path: str) -> Checkpoint | None:
    """The checkpoint of the newest bronze commit that carries one."""
    return next(checkpoints_back(spark, path), None)


def repaired_after(spark: SparkSession, path: str, after: int) -> bool:
    """Whether a batch after ``after`` is a repair's (snapshot rows of keys silver holds)."""
    for checkpoint in checkpoints_back(spark, path):
        if checkpoint.batch <= after:
            return False
        if checkpoint.repair:
            return True
    return False


def latest_per_key(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """Keep only the newest change of every key (highest ``_seq``)."""
    window = Window.partitionBy(*[F.col(quote_ident(k)) for k in key]).orderBy(F.col("_seq").desc())
    return changes.withColumn("_rank", F.row_number().over(window)).where("_rank = 1").drop("_rank")


def read_batches(spark: SparkSession, path: str, after: int, upto: int) -> DataFrame:
    df = spark.read.format("delta").load(path)
    return df.where((F.col("_batch") > after) & (F.col("_batch") <= upto))
