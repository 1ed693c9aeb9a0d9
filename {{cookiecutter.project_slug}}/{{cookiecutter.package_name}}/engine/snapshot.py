"""Lock-free chunk reads, in parallel as Spark tasks (the driver plans, tasks read).

Each task opens ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and reads the exact binlog
position of its read view (MariaDB/Percona): the chunk is the table's state at that position,
its high watermark, so no backfill is needed.

Rows travel as Arrow columns from the socket to Parquet: a task reads its chunk's result set in
blocks (:mod:`resultset`), converts each column with one vectorized cast (:mod:`textcolumns`),
and writes the chunk as a Parquet file; it returns only the chunk's watermark, its row count and
the file. The driver then commits every file of the batch to bronze in one Delta commit whose
checkpoint holds those watermarks. Nothing is cached and no row is converted in Python one at a
time.

The tasks write their files under the project's ``target/staging`` (which every executor must
see: it does on the default local master). On a local lake the driver moves them into bronze's
folder and commits them as they are (:mod:`deltafiles`): the JVM never touches the rows. Other
lake roots (s3a://...) get the staged files appended by Spark.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from py4j.protocol import Py4JJavaError
from pyspark.errors import PythonException
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from . import bronze, deltafiles, errors
from .arrows import arrow_schema
from .checkpoint import Checkpoint
from .chunking import Chunk, chunk_predicate
from .config import SourceProfile
from .introspect import TableSchema
from .positions import BinlogPosition, sequence
from .resultset import TextResult
from .source import connection, qualified, start_consistent_snapshot
from .textcolumns import column_converter
from .typemap import select_list, spark_schema

ROW_GROUP_ROWS = 131_072  # rows gathered before a Parquet row group is written


@dataclass(frozen=True)
class ChunkTask:
    """Everything a Spark task needs to read one chunk (pickled to the executor)."""

    profile: SourceProfile
    table: TableSchema
    chunk: Chunk
    run_id: str
    batch: int
    folder: str  # where the chunk's Parquet file goes: bronze's folder, or a staging folder


@dataclass(frozen=True)
class StagedChunk:
    index: int
    watermark: BinlogPosition
    rows: int
    path: str | None  # None when the chunk is empty


def stage_chunks(tasks: Iterable[ChunkTask]) -> Iterator[StagedChunk]:
    """Spark ``mapPartitions`` body: read and stage each chunk, return what the driver needs."""
    for task in tasks:
        yield stage_chunk(task)


def stage_chunk(task: ChunkTask) -> StagedChunk:
    table = task.table
    schema = arrow_schema(bronze.bronze_schema(spark_schema(table)))
    where, args = chunk_predicate(table.key, task.chunk)
    # FLOAT widened to DOUBLE: exact, like the binlog's float32.
    sql = f"SELECT {select_list(table)} FROM {qualified(table.schema, table.table)} WHERE {where}"
    # A unique name: a retried task's earlier file is never committed, so it cannot collide.
    path = os.path.join(task.folder, f"part-{task.chunk.index:05d}-{uuid.uuid4()}-c000.snappy.parquet")
    now = dt.datetime.now(dt.UTC)
    rows = 0
    writer: pq.ParquetWriter | None = None
    with connection(task.profile) as conn:
        watermark = start_consistent_snapshot(conn)
        meta = ("r", sequence(watermark, 0), watermark.file, watermark.offset, None, now,
                task.run_id, task.batch)
        result = TextResult(conn, sql, args)
        fields = list(schema)[: len(table.columns)]
        converters = [column_converter(col, res, field.type)
                      for col, res, field in zip(table.columns, result.columns, fields, strict=True)]
        # Each meta column holds one value for the whole chunk: repeat a one-value array.
        singles = [pa.array([value], type=field.type)
                   for value, field in zip(meta, list(schema)[len(table.columns):], strict=True)]
        pending: list[pa.RecordBatch] = []
        pending_rows = 0
        try:
            for block in result.blocks():
                count = len(block[0])
                data = [convert(raw) for convert, raw in zip(converters, block, strict=True)]
                repeat = pa.array(np.zeros(count, dtype=np.int32))
                constants = [single.take(repeat) for single in singles]
                pending.append(pa.RecordBatch.from_arrays([*data, *constants], schema=schema))
                pending_rows += count
                rows += count
                if pending_rows >= ROW_GROUP_ROWS:
                    writer = writer or pq.ParquetWriter(path, schema, compression="snappy")
                    writer.write_table(pa.Table.from_batches(pending))
                    pending, pending_rows = [], 0
            if pending:
                writer = writer or pq.ParquetWriter(path, schema, compression="snappy")
                writer.write_table(pa.Table.from_batches(pending))
        finally:
            if writer is not None:
                writer.close()
        conn.commit()
    return StagedChunk(task.chunk.index, watermark, rows, path if writer is not None else None)


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
    staging: Path,
) -> tuple[dict[int, BinlogPosition], int]:
    """Read ``chunks`` in parallel and commit them to bronze with ``checkpoint`` updated by
    their watermarks. Returns the watermarks and the number of rows written."""
    direct = deltafiles.is_local(bronze_path)
    folder = staging / table.table / f"{checkpoint.run_id}-{checkpoint.batch}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    schema = bronze.bronze_schema(spark_schema(table))
    # A new bronze table is created while the tasks read: its first Delta operation costs the
    # JVM seconds of warm-up, which then overlap with the read instead of following it.
    creating = Background(_create_table, spark, bronze_path, schema) if direct else None
    moved: list[Path] = []
    try:
        tasks = [ChunkTask(profile, table, c, checkpoint.run_id, checkpoint.batch, str(folder))
                 for c in chunks]
        try:
            staged = spark.sparkContext.parallelize(tasks, len(tasks)).mapPartitions(stage_chunks).collect()
        except (PythonException, Py4JJavaError) as exc:
            raise task_error(exc, table.table) from None
        finally:
            if creating is not None:
                creating.result()
        watermarks = {s.index: s.watermark for s in staged}
        missing = {c.index for c in chunks} - set(watermarks)
        if missing:
            raise RuntimeError(f"chunks {sorted(missing)} returned no watermark")
        committed = Checkpoint(
            table=checkpoint.table,
            batch=checkpoint.batch,
            phase="snapshot",
            run_id=checkpoint.run_id,
            snapshot=checkpoint.snapshot.with_done(watermarks),  # type: ignore[union-attr]
        )
        files = [s for s in staged if s.path is not None]
        if direct:
            # Into the table's folder only now: Delta will not create a table in a folder
            # that holds files, and files there that no commit references are litter.
            target = Path(deltafiles.local_path(bronze_path))
            placed = []
            for chunk in files:
                destination = target / Path(chunk.path).name  # type: ignore[arg-type]
                shutil.move(chunk.path, destination)  # type: ignore[arg-type]
                moved.append(destination)
                placed.append(StagedChunk(chunk.index, chunk.watermark, chunk.rows, str(destination)))
            _commit_files(spark, bronze_path, placed, committed)
            moved = []
        else:
            paths = [s.path for s in files]
            rows = (spark.read.schema(schema).parquet(*paths) if paths
                    else spark.createDataFrame([], _nullable(schema)))
            bronze.append(rows, bronze_path, committed)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        for path in moved:  # moved but not committed: never referenced, remove them now
            path.unlink(missing_ok=True)
    return watermarks, sum(s.rows for s in staged)


class Background:
    """Runs ``fn(*args)`` on a thread; :meth:`result` waits and re-raises its error."""

    def __init__(self, fn: Callable[..., object], *args: object):
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., object], args: tuple[object, ...]) -> None:
        try:
            fn(*args)
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def result(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def _create_table(spark: SparkSession, path: str, schema: T.StructType) -> None:
    """Bronze with its schema and no files yet (no checkpoint either: latest_checkpoint skips
    it). Delta refuses to create a table in a folder that already holds files."""
    if bronze.exists(spark, path):
        return
    from delta.tables import DeltaTable

    try:
        DeltaTable.createIfNotExists(spark).location(path).addColumns(_nullable(schema)).execute()
    except (CapturedException, Py4JJavaError) as exc:
        # Another run created it at the same moment: the same empty table, so go on; the
        # commit tells whether that run also took this batch.
        if not (bronze.is_commit_conflict(exc) and bronze.exists(spark, path)):
            raise


def _commit_files(spark: SparkSession, path: str, staged: Sequence[StagedChunk],
                  checkpoint: Checkpoint) -> None:
    """One idempotent Delta commit of the chunks' files, with ``checkpoint`` as its metadata."""
    batch = checkpoint.batch
    files = [deltafiles.DataFile(s.path, s.rows, {"_batch": batch}, {"_batch": batch}, {"_batch": 0})
             for s in staged if s.path is not None]
    try:
        deltafiles.append_files(spark, path, files, app_id=f"bronze:{checkpoint.table}",
                                version=batch, user_metadata=checkpoint.to_json())
    except deltafiles.AlreadyCommitted:
        raise bronze.concurrent_bronze_write(checkpoint) from None
    except (CapturedException, Py4JJavaError) as exc:
        if not bronze.is_commit_conflict(exc):
            raise
        raise bronze.concurrent_bronze_write(checkpoint) from None


def _nullable(schema: T.StructType) -> T.StructType:
    return T.StructType([T.StructField(f.name, f.dataType, True) for f in schema.fields])
