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
import itertools
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pymysql
from py4j.protocol import Py4JJavaError
from pyspark.errors import PythonException
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from .. import errors
from ..config.project import SourceProfile
from ..ops import Op
from ..sink import bronze, columnmap, deltafiles
from ..sink.arrows import arrow_schema
from ..sink.silver import SILVER_META, Commit
from ..source.connection import connection, driver_error_in_text, qualified, start_consistent_snapshot
from ..source.introspect import TableSchema
from ..source.resultset import TextResult
from ..source.textcolumns import column_converter
from ..source.typemap import described_schema, select_list, spark_schema
from ..state.checkpoint import Checkpoint, Phase
from ..state.positions import BinlogPosition, sequence
from .chunking import Chunk, chunk_predicate
from .window import Window, read_in_window

log = logging.getLogger(__name__)

ROW_GROUP_ROWS = 131_072  # rows gathered before a Parquet row group is written
CREATED_ELSEWHERE = "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION"


@dataclass(frozen=True)
class ChunkTask:
    """Everything a Spark task needs to read one chunk (pickled to the executor)."""

    profile: SourceProfile
    table: TableSchema
    chunk: Chunk
    run_id: str
    batch: int
    folder: str  # the staging folder for the chunk's Parquet file(s)
    seed_silver: bool = False  # also write the chunk's rows in silver's shape
    window: Window | None = None  # read between watermarks (else in a consistent snapshot)
    # Column names inside the files (:mod:`columnmap`), None: the logical names.
    bronze_names: Mapping[str, str] | None = None
    silver_names: Mapping[str, str] | None = None


@dataclass(frozen=True)
class StagedChunk:
    index: int
    watermark: BinlogPosition
    rows: int
    path: str | None  # None when the chunk is empty
    silver_path: str | None = None
    key_min: dict[str, int] = field(default_factory=dict)  # integer key columns only
    key_max: dict[str, int] = field(default_factory=dict)


def stage_chunks(tasks: Iterable[ChunkTask]) -> Iterator[StagedChunk]:
    """Spark ``mapPartitions`` body: read and stage each chunk, return what the driver needs.
    The task's chunks share one source connection (each is read in a transaction of its own):
    a connection costs the worker tens of milliseconds of CPU (pymysql sets up TLS for each)."""
    pending = iter(tasks)
    first = next(pending, None)
    if first is None:
        return
    with connection(first.profile) as conn:
        for task in itertools.chain([first], pending):
            yield stage_chunk(task, conn)


def silver_columns(table: TableSchema) -> list[str]:
    """Silver's columns: the source's and the change metadata silver keeps."""
    return [*table.column_names, *SILVER_META]


def stage_chunk(task: ChunkTask, conn: pymysql.connections.Connection) -> StagedChunk:
    """Read one chunk on ``conn`` and stage its file(s)."""
    table = task.table
    schema = arrow_schema(bronze.bronze_schema(spark_schema(table)))
    data = pa.schema(list(schema)[: len(table.columns)])
    where, args = chunk_predicate(table.key, task.chunk)
    # FLOAT widened to DOUBLE: exact, like the binlog's float32.
    sql = f"SELECT {select_list(table)} FROM {qualified(table.schema, table.table)} WHERE {where}"
    now = dt.datetime.now(dt.UTC)
    if task.window is None:
        watermark = start_consistent_snapshot(conn)
        blocks: Iterable[pa.RecordBatch] = _select(conn, sql, args, table, data)
    else:
        def select() -> pa.Table:
            rows = pa.Table.from_batches(list(_select(conn, sql, args, table, data)), schema=data)
            conn.commit()
            return rows

        rows, watermark = read_in_window(conn, task.profile, table, task.chunk, task.window, select)
        blocks = rows.to_batches(max_chunksize=ROW_GROUP_ROWS)
    meta = (Op.READ.value, sequence(watermark, 0), watermark.file, watermark.offset, None, now,
            task.run_id, task.batch)
    # Each meta column holds one value for the whole chunk: repeat a one-value array.
    singles = [pa.array([value], type=field.type)
               for value, field in zip(meta, list(schema)[len(table.columns):], strict=True)]
    with _ChunkFiles(task, schema) as files:
        for block in blocks:
            repeat = pa.array(np.zeros(block.num_rows, dtype=np.int32))
            constants = [single.take(repeat) for single in singles]
            files.add(pa.RecordBatch.from_arrays([*block.columns, *constants], schema=schema))
    conn.commit()
    return files.staged(task.chunk.index, watermark)


def _select(conn: pymysql.connections.Connection, sql: str, args: Sequence[object], table: TableSchema,
            data: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The chunk's rows in blocks of the source's columns, each column converted at once."""
    result = TextResult(conn, sql, args)
    converters = [column_converter(col, res, field.type)
                  for col, res, field in zip(table.columns, result.columns, data, strict=True)]
    for block in result.blocks():
        columns = [convert(raw) for convert, raw in zip(converters, block, strict=True)]
        yield pa.RecordBatch.from_arrays(columns, schema=data)


class _ChunkFiles:
    """The chunk's bronze file (and silver-shaped twin), written in row groups of
    ``ROW_GROUP_ROWS``; also the min/max of integer key columns, for silver's file statistics."""

    def __init__(self, task: ChunkTask, schema: pa.Schema):
        # Unique names: a retried task's earlier files are never committed, so cannot collide.
        name = f"part-{task.chunk.index:05d}-{uuid.uuid4()}-c000.snappy.parquet"
        self._path = os.path.join(task.folder, name)
        self._silver_path = os.path.join(task.folder, "silver", name) if task.seed_silver else None
        self._silver_columns = silver_columns(task.table)
        self._bronze_names = columnmap.renamed(schema.names, task.bronze_names)
        self._silver_file_names = columnmap.renamed(self._silver_columns, task.silver_names)
        self._keys = [k for k in task.table.key if pa.types.is_integer(schema.field(k).type)]
        self._writers: list[pq.ParquetWriter] = []
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self.rows = 0
        self._min: dict[str, int] = {}
        self._max: dict[str, int] = {}

    def __enter__(self) -> _ChunkFiles:
        return self

    def add(self, batch: pa.RecordBatch) -> None:
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self.rows += batch.num_rows
        for key in self._keys:
            low, high = pc.min_max(batch.column(key)).values()
            if low.is_valid:
                self._min[key] = min(self._min.get(key, low.as_py()), low.as_py())
                self._max[key] = max(self._max.get(key, high.as_py()), high.as_py())
        if self._pending_rows >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        rows = pa.Table.from_batches(self._pending)
        named = rows.rename_columns(self._bronze_names)
        silver = (rows.select(self._silver_columns).rename_columns(self._silver_file_names)
                  if self._silver_path is not None else None)
        if not self._writers:
            self._writers.append(pq.ParquetWriter(self._path, named.schema, compression="snappy"))
            if self._silver_path is not None and silver is not None:
                os.makedirs(os.path.dirname(self._silver_path), exist_ok=True)
                self._writers.append(pq.ParquetWriter(self._silver_path, silver.schema, compression="snappy"))
        self._writers[0].write_table(named)
        if silver is not None:
            self._writers[1].write_table(silver)
        self._pending, self._pending_rows = [], 0

    def __exit__(self, kind: object, *rest: object) -> None:
        try:
            if kind is None:
                self._flush()
        finally:
            for writer in self._writers:
                writer.close()

    def staged(self, index: int, watermark: BinlogPosition) -> StagedChunk:
        if not self._writers:
            return StagedChunk(index, watermark, 0, None)
        return StagedChunk(index, watermark, self.rows, self._path, self._silver_path,
                           self._min, self._max)


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
    known = driver_error_in_text(text, f"table {table}", table)  # a lost source, a revoked privilege
    if known is not None:
        return known
    found = _PYTHON_ERROR.findall(text)
    cause = found[-1].strip()[:300] if found else "see target/lakehouse.log"
    return errors.SourceUnavailableError(
        f"reading a snapshot chunk of {table} failed ({cause}): run again, finished chunks are kept")


# The last line of a Python traceback (``pymysql.err.OperationalError: (1054, ...)``), not a Java
# frame (``at org.apache.spark.util.SparkErrorUtils...``) nor the Java exception that wraps it.
_PYTHON_ERROR = re.compile(r"^\s*((?!(?:org|java|scala|py4j)\.)[A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b.*)$",
                           re.MULTILINE)


def snapshot_batch(
    spark: SparkSession,
    *,
    profile: SourceProfile,
    table: TableSchema,
    chunks: Sequence[Chunk],
    bronze_path: str,
    checkpoint: Checkpoint,
    staging: Path,
    silver_path: str | None = None,
    window: Window | None = None,
    server_ids: tuple[int, int] = (0, 0),
) -> tuple[dict[int, BinlogPosition], int]:
    """Read ``chunks`` in parallel and commit them to bronze with ``checkpoint`` updated by
    their watermarks. Returns the watermarks and the number of rows written.

    With ``silver_path`` (no silver transform), the same rows also go to silver as plain files
    when silver is exactly one batch behind (see :func:`_seeds_silver`). With ``window``, each
    chunk is read between ``window.low`` and a high watermark of its own (:mod:`window`), its
    binlog reader taking a server id of its own from ``server_ids``."""
    direct = deltafiles.is_local(bronze_path)
    seed = silver_path is not None and direct and _seeds_silver(silver_path, checkpoint)
    folder = staging / table.table / f"{checkpoint.run_id}-{checkpoint.batch}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    schema = bronze.bronze_schema(spark_schema(table))
    if direct and columnmap.needs_mapping(schema.names):
        # Delta names a mapped table's files' columns itself: the tasks need those names.
        _create_table(spark, bronze_path, bronze.bronze_schema(described_schema(table)))
    bronze_names = _file_names(spark, bronze_path, schema.names) if direct else None
    silver_names = _file_names(spark, silver_path, silver_columns(table)) if seed else None  # type: ignore[arg-type]
    # A new bronze table is created while the tasks read: its first Delta operation costs the
    # JVM seconds of warm-up, which then overlap with the read instead of following it.
    creating = (Background(_create_table, spark, bronze_path, bronze.bronze_schema(described_schema(table)))
                if direct else None)
    moved: list[Path] = []
    try:
        tasks = [ChunkTask(profile, table, c, checkpoint.run_id, checkpoint.batch, str(folder), seed,
                           window.for_task(slot, server_ids) if window is not None else None,
                           bronze_names, silver_names)
                 for slot, c in enumerate(chunks)]
        try:
            slices = task_count(len(tasks), spark.sparkContext.defaultParallelism)
            staged = spark.sparkContext.parallelize(tasks, slices).mapPartitions(stage_chunks).collect()
        except (PythonException, Py4JJavaError) as exc:
            raise task_error(exc, table.table) from None
        finally:
            if creating is not None:
                creating.result()
        watermarks = {s.index: s.watermark for s in staged}
        missing = {c.index for c in chunks} - set(watermarks)
        if missing:
            raise RuntimeError(f"chunks {sorted(missing)} returned no watermark")
        committed = replace(checkpoint, phase=Phase.SNAPSHOT,
                            snapshot=checkpoint.snapshot.with_done(watermarks))  # type: ignore[union-attr]
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
            _commit_files(spark, bronze_path, placed, committed, bronze_names)  # type: ignore[arg-type]
            moved = []
            if seed:
                _seed_silver(spark, silver_path, table, files, committed, silver_names)  # type: ignore[arg-type]
        else:
            paths = [s.path for s in files if s.path is not None]  # all of them: narrows the type
            rows = (spark.read.schema(schema).parquet(*paths) if paths
                    else spark.createDataFrame([], _nullable(schema)))
            bronze.append(rows, bronze_path, committed)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        for path in moved:  # moved but not committed: never referenced, remove them now
            path.unlink(missing_ok=True)
    return watermarks, sum(s.rows for s in staged)


# Spark tasks per core and batch: each task costs its Python worker about 0.15 s of CPU whatever
# it reads (pyspark re-reads its zip archives' directories and collects garbage for every task),
# 4-6 s of a 2M-row snapshot with one chunk per task. Two per core still even out chunks that
# take unequal times.
TASKS_PER_CORE = 2


def task_count(chunks: int, cores: int) -> int:
    """How many Spark tasks read ``chunks`` chunks on ``cores`` cores: each task reads a run of
    consecutive chunks of the reading order, one after the other."""
    return max(1, min(chunks, TASKS_PER_CORE * max(cores, 1)))


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


def _seeds_silver(silver_path: str, checkpoint: Checkpoint) -> bool:
    """Whether this snapshot batch's rows may go to silver as plain inserts.

    During the snapshot silver receives nothing but snapshot rows (binlog changes are merged
    only once every chunk is read), and chunks are disjoint key ranges: so while silver holds
    exactly the batches before this one, this batch's rows are new keys and silver may take
    them as they are, without a MERGE. Any other state (a crash between the bronze and the
    silver commit, an unreadable log) leaves silver to the MERGE at the end of the run."""
    log_dir = Path(deltafiles.local_path(silver_path)) / "_delta_log"
    if not log_dir.is_dir():
        return checkpoint.batch == 1
    newest = deltafiles.newest_version(log_dir)
    if newest is None:
        return False
    applied = deltafiles.last_txn_version(log_dir, newest, f"silver:{checkpoint.table}")
    return applied == checkpoint.batch - 1


def _file_names(spark: SparkSession, path: str, columns: Sequence[str]) -> dict[str, str]:
    """The names ``columns`` take in the files of the local table at ``path``: those it reads
    them by (:mod:`columnmap`). A table not created yet will be created without column mapping
    (one that needs it is created before), so it reads each column by its own name: found
    without asking Delta, whose first call on a new table would wait for the JVM to warm up (it
    does so while the tasks read instead)."""
    log_dir = Path(deltafiles.local_path(path)) / "_delta_log"
    if log_dir.is_dir() and deltafiles.newest_version(log_dir) is not None:
        found = columnmap.table_names(spark, path)
        if found is not None:
            return found
    return {c: c for c in columns}


def _seed_silver(spark: SparkSession, silver_path: str, table: TableSchema,
                 files: Sequence[StagedChunk], checkpoint: Checkpoint, physical: Mapping[str, str]) -> None:
    """Commit the batch's silver-shaped files to silver, as ``silver.apply`` would record a
    MERGE of this batch. A failure only leaves the batch to that MERGE."""
    target = Path(deltafiles.local_path(silver_path))
    moved: list[Path] = []
    try:
        schema = _silver_schema(table)
        _create_table(spark, silver_path, schema)
        placed = []
        for chunk in files:
            destination = target / Path(chunk.silver_path).name  # type: ignore[arg-type]
            shutil.move(chunk.silver_path, destination)  # type: ignore[arg-type]
            moved.append(destination)
            placed.append(deltafiles.DataFile(
                str(destination), chunk.rows, chunk.key_min, chunk.key_max, dict.fromkeys(chunk.key_min, 0)))
        deltafiles.append_files(spark, silver_path, placed, app_id=f"silver:{checkpoint.table}",
                                version=checkpoint.batch,
                                user_metadata=Commit("", checkpoint.batch, checkpoint.table, checkpoint.run_id,
                                                     checkpoint.generation).marker,
                                physical=physical)
        moved = []
    except Exception as exc:  # silver catches up by MERGE at the end of the run
        log.warning("%s: silver not seeded from snapshot batch %d (%s); it is merged later",
                    checkpoint.table, checkpoint.batch, str(exc).splitlines()[0][:200])
    finally:
        for path in moved:
            path.unlink(missing_ok=True)


def _silver_schema(table: TableSchema) -> T.StructType:
    fields = {f.name: f for f in bronze.bronze_schema(spark_schema(table)).fields}
    return T.StructType([fields[name] for name in silver_columns(table)])


def _create_table(spark: SparkSession, path: str, schema: T.StructType) -> None:
    """Bronze with its schema and no files yet (no checkpoint either: latest_checkpoint skips
    it). Delta refuses to create a table in a folder that already holds files."""
    if bronze.exists(spark, path):
        return
    from delta.tables import DeltaTable

    try:
        builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(_nullable(schema))
        for name, value in columnmap.creation_properties(schema.names).items():
            builder = builder.property(name, value)
        builder.execute()
    except (CapturedException, Py4JJavaError) as exc:
        # Another run is creating it at the same moment: a commit conflict, or (caught while its
        # first log file is being written) a folder that holds files but is no table yet. Once
        # its creation is done it is the same empty table, so go on: the commit tells whether
        # that run also took this batch.
        racing = bronze.is_commit_conflict(exc) or CREATED_ELSEWHERE in str(exc)
        if not racing:
            raise
        if not _appears(spark, path):
            raise errors.ConcurrentRunError(
                f"another run is creating the Delta table {path} concurrently (two runs of one table "
                "on one lake), or the folder holds files but no Delta log; nothing of this batch was "
                "committed: run again, it resumes from the last committed checkpoint (if this repeats, "
                "move the folder away)") from None


def _appears(spark: SparkSession, path: str, wait_s: float = 10.0) -> bool:
    """Whether the table at ``path`` exists, waiting up to ``wait_s`` for a creation under way."""
    deadline = time.monotonic() + wait_s
    while not bronze.exists(spark, path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _commit_files(spark: SparkSession, path: str, staged: Sequence[StagedChunk],
                  checkpoint: Checkpoint, physical: Mapping[str, str]) -> None:
    """One idempotent Delta commit of the chunks' files, with ``checkpoint`` as its metadata."""
    batch = checkpoint.batch
    files = [deltafiles.DataFile(s.path, s.rows, {"_batch": batch}, {"_batch": batch}, {"_batch": 0})
             for s in staged if s.path is not None]
    bronze.commit_files(spark, path, files, checkpoint, physical)


def _nullable(schema: T.StructType) -> T.StructType:
    return T.StructType([T.StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])
