"""What one Spark task does: read its chunks from the source and stage them as Parquet files.

Each task opens ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and reads the exact binlog
position of its read view (MariaDB/Percona): the chunk is the table's state at that position,
its high watermark, so no backfill is needed. With a watermark window (:mod:`window`) the chunk
is read between watermarks instead.

Rows travel as Arrow columns from the socket to Parquet: a task reads its chunk's result set in
blocks (:mod:`resultset`), converts each column with one vectorized cast (:mod:`textcolumns`),
and writes the chunk as a Parquet file (with a silver-shaped twin when the batch seeds silver);
it returns only the chunk's watermark, its row count and the file (:class:`StagedChunk`). Nothing
is cached and no row is converted in Python one at a time. :mod:`reader` (the driver) plans the
tasks and commits their files.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import pickle
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pymysql

from ..arrowcolumns import column
from ..config.project import SourceProfile
from ..ops import Op
from ..sink import bronze, columnmap, parquetfiles
from ..sink.arrows import arrow_schema
from ..sink.constants import repeated
from ..sink.objectstore import ObjectStore, object_path
from ..sink.silver import SILVER_META
from ..source.connection import connection, qualified, start_consistent_snapshot
from ..source.introspect import TableSchema
from ..source.resultset import TextResult
from ..source.textcolumns import column_converter
from ..source.typemap import select_list, spark_schema
from ..state.positions import BinlogPosition, sequence
from .chunking import Chunk, chunk_predicate
from .window import TaskWindows, Window, read_in_window

ROW_GROUP_ROWS = 131_072  # rows gathered before a Parquet row group is written


@dataclass(frozen=True)
class ChunkTask:
    """Everything a Spark task needs to read one chunk (pickled to the executor)."""

    profile: SourceProfile
    table: TableSchema
    chunk: Chunk
    run_id: str
    batch: int
    folder: str  # where the chunk's Parquet file(s) go: a staging folder, or bronze's own in a bucket
    seed_silver: bool = False  # also write the chunk's rows in silver's shape
    window: Window | None = None  # read between watermarks (else in a consistent snapshot)
    # Column names inside the files (:mod:`columnmap`), None: the logical names.
    bronze_names: Mapping[str, str] | None = None
    silver_names: Mapping[str, str] | None = None
    store: ObjectStore | None = None  # ``folder`` is in this object store (s3a://...), else local
    silver_folder: str | None = None  # where silver-shaped files go; None: ``<folder>/silver``


@dataclass(frozen=True)
class StagedChunk:
    """What a task hands back for one chunk: its watermark, its row count and its file(s)."""

    index: int
    watermark: BinlogPosition
    rows: int
    path: str | None  # None when the chunk is empty
    silver_path: str | None = None
    key_min: dict[str, int] = field(default_factory=dict)  # integer key columns only
    key_max: dict[str, int] = field(default_factory=dict)
    size: int | None = None  # the bronze file's bytes, for a file in an object store
    silver_size: int | None = None  # the same for the silver-shaped file


def stage_chunks(tasks: Iterable[ChunkTask]) -> Iterator[StagedChunk]:
    """Spark ``mapPartitions`` body: read and stage each chunk, return what the driver needs.
    The task's chunks share one source connection (each is read in a transaction of its own):
    a connection costs the worker tens of milliseconds of CPU (pymysql sets up TLS for each)."""
    pending = iter(tasks)
    first = next(pending, None)
    if first is None:
        return
    windows = TaskWindows(first.window.low) if first.window is not None else None
    with connection(first.profile) as conn:
        for task in itertools.chain([first], pending):
            yield stage_chunk(task, conn, windows)


STAGED_FIELD = "staged"  # mapInArrow's output column: one pickled StagedChunk per row


def staged_in_arrow(tasks: Sequence[ChunkTask]) -> Callable[[Iterable[pa.RecordBatch]], Iterable[pa.RecordBatch]]:
    """A ``mapInArrow`` body over a partition of task numbers (``spark.range``): the same work as
    :func:`stage_chunks` on those tasks, its results pickled (portable mode has no RDDs). The
    whole partition's numbers are read first, so its chunks share one connection and window."""

    def stage(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        numbers = [n for batch in batches for n in batch.column(0).to_pylist()]
        staged = [pickle.dumps(s) for s in stage_chunks(tasks[n] for n in numbers)]
        # Laid out from buffers: from_pydict would import pandas into the worker (arrowcolumns.py).
        yield pa.RecordBatch.from_arrays([column(staged, pa.binary())], names=[STAGED_FIELD])

    return stage


def batch_tag(run_id: str, batch: int) -> str:
    """What the names of a run's files for one batch hold (and no other batch's or run's)."""
    return f"{run_id}-b{batch}-"


def silver_columns(table: TableSchema) -> list[str]:
    """Silver's columns: the source's and the change metadata silver keeps."""
    return [*table.column_names, *SILVER_META]


def stage_chunk(task: ChunkTask, conn: pymysql.connections.Connection,
                windows: TaskWindows | None = None) -> StagedChunk:
    """Read one chunk on ``conn`` and stage its file(s); ``windows``: the window reads of the
    task's earlier chunks (a window read)."""
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

        rows, watermark = read_in_window(conn, task.profile, table, task.chunk, task.window, select, windows)
        blocks = rows.to_batches(max_chunksize=ROW_GROUP_ROWS)
    meta = (Op.READ.value, sequence(watermark, 0), watermark.file, watermark.offset, None, now,
            task.run_id, task.batch)
    # Each meta column holds one value for the whole chunk (built without importing pandas).
    kinds = [field.type for field in list(schema)[len(table.columns):]]
    with _ChunkFiles(task, schema) as files:
        for block in blocks:
            columns = [repeated(value, kind, block.num_rows) for value, kind in zip(meta, kinds, strict=True)]
            files.add(pa.RecordBatch.from_arrays([*block.columns, *columns], schema=schema))
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
        # The run and batch in the name let the driver find a failed job's files in a bucket.
        name = f"part-{task.chunk.index:05d}-{batch_tag(task.run_id, task.batch)}{uuid.uuid4()}-c000.snappy.parquet"
        self._path = f"{task.folder.rstrip('/')}/{name}"
        self._filesystem = task.store.filesystem() if task.store is not None else None
        silver_folder = task.silver_folder or f"{task.folder.rstrip('/')}/silver"
        self._silver_path = f"{silver_folder.rstrip('/')}/{name}" if task.seed_silver else None
        self._silver_columns = silver_columns(task.table)
        self._bronze_names = columnmap.renamed(schema.names, task.bronze_names)
        self._silver_file_names = columnmap.renamed(self._silver_columns, task.silver_names)
        self._keys = [k for k in task.table.key if pa.types.is_integer(schema.field(k).type)]
        self._writers: list[pq.ParquetWriter] = []
        self._sizes: list[int | None] = [None, None]  # bronze's file, silver's
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
            repeating = set(parquetfiles.dictionary_columns(rows))
            self._writers.append(self._writer(self._path, named.schema,
                                              [p for n, p in zip(rows.column_names, self._bronze_names, strict=True)
                                               if n in repeating]))
            if self._silver_path is not None and silver is not None:
                if self._filesystem is None:
                    os.makedirs(os.path.dirname(self._silver_path), exist_ok=True)
                self._writers.append(self._writer(
                    self._silver_path, silver.schema,
                    [p for n, p in zip(self._silver_columns, self._silver_file_names, strict=True) if n in repeating]))
        self._writers[0].write_table(named)
        if silver is not None:
            self._writers[1].write_table(silver)
        self._pending, self._pending_rows = [], 0

    def _writer(self, path: str, schema: pa.Schema, dictionary: list[str]) -> pq.ParquetWriter:
        if self._filesystem is not None:  # straight into the bucket: no executor disk is involved
            return pq.ParquetWriter(object_path(path), schema, compression="snappy", use_dictionary=dictionary,
                                    filesystem=self._filesystem)
        return pq.ParquetWriter(path, schema, compression="snappy", use_dictionary=dictionary)

    def __exit__(self, kind: object, *rest: object) -> None:
        try:
            if kind is None:
                self._flush()
        finally:
            for writer in self._writers:
                writer.close()
        if kind is None and self._filesystem is not None and self._writers:
            # Read back once the upload is complete: the driver commits the sizes without listing.
            written = [self._path, self._silver_path][: len(self._writers)]
            self._sizes = [info.size for info in self._filesystem.get_file_info([object_path(p) for p in written if p])]
            self._sizes += [None] * (2 - len(self._sizes))

    def staged(self, index: int, watermark: BinlogPosition) -> StagedChunk:
        if not self._writers:
            return StagedChunk(index, watermark, 0, None)
        return StagedChunk(index, watermark, self.rows, self._path, self._silver_path,
                           self._min, self._max, *self._sizes)
