"""Lock-free chunk reads, in parallel as Spark tasks (the driver plans, tasks read).

Each task opens ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and reads the exact binlog
position of its read view (MariaDB/Percona): the chunk is the table's state at that position,
its high watermark, so no backfill is needed. Besides the rows, every task emits one watermark
marker row (``_op = 'w'``) so the driver learns each chunk's watermark, empty chunks included;
markers never reach bronze.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from py4j.protocol import Py4JJavaError
from pyspark import StorageLevel
from pyspark.errors import PythonException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import bronze, errors
from .checkpoint import Checkpoint
from .chunking import Chunk, chunk_predicate
from .config import SourceProfile
from .introspect import TableSchema
from .positions import BinlogPosition, sequence
from .source import connection, qualified, start_consistent_snapshot
from .typemap import row_converter, select_list, spark_schema

MARKER_OP = "w"
CHUNK_COLUMN = "_chunk"


@dataclass(frozen=True)
class ChunkTask:
    """Everything a Spark task needs to read one chunk (pickled to the executor)."""

    profile: SourceProfile
    table: TableSchema
    chunk: Chunk
    run_id: str
    batch: int


def read_chunks(tasks: Iterable[ChunkTask]) -> Iterator[tuple]:
    """Spark ``mapPartitions`` body: rows of each chunk, then its watermark marker."""
    for task in tasks:
        yield from _read_chunk(task)


def _read_chunk(task: ChunkTask) -> Iterator[tuple]:
    table = task.table
    convert = row_converter(table, "select")
    columns = select_list(table)  # FLOAT widened to DOUBLE: exact, like the binlog's float32
    where, args = chunk_predicate(table.key, task.chunk)
    sql = f"SELECT {columns} FROM {qualified(table.schema, table.table)} WHERE {where}"
    now = dt.datetime.now(dt.UTC)
    with connection(task.profile, streaming=True) as conn:
        watermark = start_consistent_snapshot(conn)
        seq = sequence(watermark, 0)
        meta = ("r", seq, watermark.file, watermark.offset, None, now, task.run_id, task.batch,
                task.chunk.index)
        with conn.cursor() as cur:
            cur.execute(sql, args)
            for row in cur:
                yield (*convert(row), *meta)
        conn.commit()
    blank = (None,) * len(table.columns)
    yield (*blank, MARKER_OP, *meta[1:])


_TASK_ERROR = re.compile(r"engine\.errors\.(\w+): (.+)")


def task_error(exc: Exception, table: str) -> errors.IngestError:
    """Re-raise an engine error thrown inside a Spark task as itself, with its one-line message;
    anything else becomes a retriable error naming the table."""
    text = str(exc)
    found = _TASK_ERROR.findall(text)
    if found:
        name, message = found[-1]
        cls = getattr(errors, name, errors.IngestError)
        if isinstance(cls, type) and issubclass(cls, errors.IngestError):
            return cls(message.strip())
    lines = [line.strip() for line in text.splitlines() if "Error" in line or "Exception" in line]
    return errors.SourceUnavailableError(
        f"reading a snapshot chunk of {table} failed ({lines[-1][:300] if lines else 'see the log'}): "
        "run again, finished chunks are kept"
    )


def snapshot_batch(
    spark: SparkSession,
    *,
    profile: SourceProfile,
    table: TableSchema,
    chunks: Sequence[Chunk],
    bronze_path: str,
    checkpoint: Checkpoint,
) -> tuple[dict[int, BinlogPosition], int]:
    """Read ``chunks`` in parallel and commit them to bronze with ``checkpoint`` updated by
    their watermarks. Returns the watermarks and the number of rows written."""
    tasks = [ChunkTask(profile, table, c, checkpoint.run_id, checkpoint.batch) for c in chunks]
    schema = T.StructType(
        [*bronze.bronze_schema(spark_schema(table)).fields,
         T.StructField(CHUNK_COLUMN, T.IntegerType(), False)]
    )
    # Nullable everywhere in the staging frame: marker rows carry no data columns.
    schema = T.StructType([T.StructField(f.name, f.dataType, True) for f in schema.fields])
    rdd = spark.sparkContext.parallelize(tasks, len(tasks)).mapPartitions(read_chunks)
    staged = spark.createDataFrame(rdd, schema).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        try:
            markers = (
                staged.where(F.col("_op") == MARKER_OP)
                .select(CHUNK_COLUMN, "_source_file", "_source_pos")
                .collect()
            )
        except (PythonException, Py4JJavaError) as exc:
            raise task_error(exc, table.table) from None
        watermarks = {int(m[0]): BinlogPosition(str(m[1]), int(m[2])) for m in markers}
        missing = {c.index for c in chunks} - set(watermarks)
        if missing:
            raise RuntimeError(f"chunks {sorted(missing)} returned no watermark")
        progress = checkpoint.snapshot.with_done(watermarks)  # type: ignore[union-attr]
        committed = Checkpoint(
            table=checkpoint.table,
            batch=checkpoint.batch,
            phase="snapshot",
            run_id=checkpoint.run_id,
            snapshot=progress,
        )
        rows = staged.where(F.col("_op") != MARKER_OP).drop(CHUNK_COLUMN)
        count = rows.count()  # served from the cache, like the write below
        bronze.append(rows, bronze_path, committed)
    finally:
        staged.unpersist()
    return watermarks, int(count)
