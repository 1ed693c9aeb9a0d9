"""Lock-free chunk reads, in parallel as Spark tasks: the driver's side (the driver plans, tasks
read).

A batch of chunks becomes one Spark job whose tasks read and stage the chunks
(:mod:`chunktask`); the driver then commits every file of the batch to bronze in one Delta
commit whose checkpoint holds the chunks' watermarks, and turns an error raised inside a task
back into the engine error it was.

The tasks write their files into a staging folder (:mod:`staging`): the local lake's
``_staging``, which every executor sees where the lake is shared. The driver moves them into
bronze's folder (a rename) and commits them as they are (:mod:`deltafiles`): the JVM never
touches the rows. An object-store lake's (s3a://...) tasks write through pyarrow straight into
bronze's folder in the bucket and report each file's size: the driver commits them the same way,
without a second pass over the rows. Portable mode (no API to commit files) stages them instead
and appends them with Spark.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from pyarrow import ArrowException
from pyarrow import fs as pafs
from pyspark.errors import PythonException
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from .. import errors
from ..background import Background
from ..config.project import SourceProfile
from ..sink import bronze, columnmap, deltafiles, portable, shipping, silverwrite
from ..sink.log import deltalog, localfiles
from ..sink.log.transaction import AlreadyCommitted
from ..sink.objectstore import ObjectStore, object_path
from ..sink.portable import spark_errors
from ..sink.silverlineage import Commit
from ..source.connection import driver_error_in_text
from ..source.introspect import TableSchema
from ..source.typemap import described_schema, spark_schema
from ..state.checkpoint import Checkpoint, Phase
from ..state.positions import BinlogPosition
from .chunking import Chunk
from .chunktask import (
    STAGED_FIELD,
    ChunkTask,
    StagedChunk,
    batch_tag,
    silver_columns,
    stage_chunks,
    staged_in_arrow,
)
from .localtasks import LocalTasks, TaskFailed, runs_of
from .staging import Staging
from .window import Window

log = logging.getLogger(__name__)

# What Delta says when another run is creating the same table: its files are there but no log yet
# (non-empty location), or its log folder is there but no first commit yet (not found).
CREATED_ELSEWHERE = ("DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION", "DELTA_TABLE_NOT_FOUND")


_TASK_ERROR = re.compile(r"engine\.errors\.(\w+): (.+)")


def task_error(exc: BaseException, table: str) -> errors.IngestError:
    """Re-raise an engine error thrown inside a Spark task as itself, with its one-line message;
    a Python on the executors that lacks a module (or does not start) is a configuration error;
    anything else becomes a retriable error naming the table."""
    text = str(exc)
    found = _TASK_ERROR.findall(text)
    if found:
        name, message = found[-1]
        cls = getattr(errors, name, errors.IngestError)
        if isinstance(cls, type) and issubclass(cls, errors.IngestError):
            return cls(message.strip())
    missing = shipping.missing_module_error(text, table, os.environ.get("PYSPARK_PYTHON"))
    if missing is not None:  # the executors' Python: running again cannot help
        return missing
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
    staging: Staging,
    silver_path: str | None = None,
    window: Window | None = None,
    server_ids: tuple[int, int] = (0, 0),
    local: LocalTasks | None = None,
) -> tuple[dict[int, BinlogPosition], int]:
    """Read ``chunks`` in parallel and commit them to bronze with ``checkpoint`` updated by
    their watermarks. Returns the watermarks and the number of rows written.

    With ``silver_path`` (no silver transform), the same rows also go to silver as plain files
    when silver is exactly one batch behind (see :func:`_seeds_silver`). With ``window``, each
    chunk is read between ``window.low`` and a high watermark of its own (:mod:`window`), its
    binlog reader taking a server id of its own from ``server_ids``. With ``local`` (a local
    master's, :mod:`localtasks`) its workers read the chunks instead of a Spark job."""
    by_files = not portable.active(spark)  # committed from the tasks' files (Delta's JVM API)
    direct = localfiles.is_local(bronze_path) and by_files
    # An object-store lake's tasks write into bronze's folder in the bucket: nothing to move.
    in_bucket = staging.store is not None and by_files
    seed = silver_path is not None and (direct or in_bucket) and _seeds_silver(spark, silver_path, checkpoint)
    # Staged under the lake table's name (two project tables may copy one source table).
    lake_table = bronze_path.rstrip("/").rsplit("/", 1)[-1]
    staging.remove_stale(staging.table_folder(lake_table))
    folder = staging.batch_folder(lake_table, checkpoint.run_id, checkpoint.batch)
    if not in_bucket:
        staging.reset(folder)
    schema = bronze.bronze_schema(spark_schema(table))
    if in_bucket or (direct and columnmap.needs_mapping(schema.names)):
        # Delta names a mapped table's files' columns itself: the tasks need those names. And
        # it creates no table in a folder that holds files: in a bucket, create before the tasks.
        _create_table(spark, bronze_path, bronze.bronze_schema(described_schema(table)), bronze.NEW_TABLE_PROPERTIES)
    bronze_names = (_file_names(spark, bronze_path, schema.names) if direct
                    else (columnmap.table_names(spark, bronze_path) if in_bucket else None))
    silver_names = None
    if seed:
        silver_names = (_file_names(spark, silver_path, silver_columns(table)) if direct  # type: ignore[arg-type]
                        else _bucket_silver(spark, silver_path, table, checkpoint))  # type: ignore[arg-type]
        seed = silver_names is not None
    # A new bronze table is created while the tasks read: its first Delta operation costs the
    # JVM seconds of warm-up, which then overlap with the read instead of following it.
    creating = (Background(_create_table, spark, bronze_path, bronze.bronze_schema(described_schema(table)),
                           bronze.NEW_TABLE_PROPERTIES)
                if direct else None)
    moved: list[Path] = []
    committing = False  # from the commit's start its outcome may be unknown: keep the files then
    landed = False  # bronze's commit returned: its files are the table's
    try:
        tasks = [ChunkTask(profile, table, c, checkpoint.run_id, checkpoint.batch,
                           bronze_path.rstrip("/") if in_bucket else folder, seed,
                           window.for_task(slot, server_ids) if window is not None else None,
                           bronze_names, silver_names, staging.store, silver_path if in_bucket else None)
                 for slot, c in enumerate(chunks)]
        try:
            staged = _run_tasks(spark, tasks, local)
        except _task_errors() as exc:
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
        if in_bucket:
            committing = True
            _commit_files(spark, bronze_path, files, committed, bronze_names)  # type: ignore[arg-type]
            committing, landed = False, True
            if seed:
                _seed_silver(spark, silver_path, table, files, committed, silver_names,  # type: ignore[arg-type]
                             staging.store)
        elif direct:
            # Into the table's folder only now: Delta will not create a table in a folder
            # that holds files, and files there that no commit references are litter.
            target = Path(localfiles.local_path(bronze_path))
            placed = []
            for chunk in files:
                destination = target / Path(chunk.path).name  # type: ignore[arg-type]
                shutil.move(chunk.path, destination)  # type: ignore[arg-type]
                moved.append(destination)
                placed.append(StagedChunk(chunk.index, chunk.watermark, chunk.rows, str(destination)))
            committing = True
            _commit_files(spark, bronze_path, placed, committed, bronze_names)  # type: ignore[arg-type]
            moved, committing = [], False
            if seed:
                _seed_silver(spark, silver_path, table, files, committed, silver_names)  # type: ignore[arg-type]
        else:
            paths = [s.path for s in files if s.path is not None]  # all of them: narrows the type
            # Read with the columns' source descriptions: the append that creates bronze records
            # them, as _create_table does on the direct path (a later DDL is evolved from them).
            described = bronze.bronze_schema(described_schema(table))
            rows = (spark.read.schema(described).parquet(*paths) if paths
                    else spark.createDataFrame([], _nullable(described)))
            bronze.append(rows, bronze_path, committed)
    except BaseException as exc:
        if committing and not nothing_committed(exc):
            # The commit may have landed (an error after Delta wrote it): its files must stay.
            log.warning("%s: the outcome of bronze batch %d's commit is unknown (%s): its files are kept "
                        "(unreferenced ones are removed by VACUUM)", checkpoint.table, checkpoint.batch,
                        str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__)
            moved = []
        elif in_bucket and not landed and staging.store is not None:  # found by their names
            folders = [bronze_path, *([silver_path] if seed and silver_path is not None else [])]
            remove_batch_files(staging.store, folders, checkpoint.run_id, checkpoint.batch)
        raise
    finally:
        if not in_bucket:
            staging.remove(folder)
        for path in moved:  # moved but not committed: never referenced, remove them now
            path.unlink(missing_ok=True)
    return watermarks, sum(s.rows for s in staged)


def _task_errors() -> tuple[type[BaseException], ...]:
    """What a failed snapshot job raises: a task's Python error, or Spark's (a lost executor
    reaches a Spark Connect client as its SparkException, not py4j's error), or a local worker's
    traceback."""
    return (PythonException, TaskFailed, *spark_errors())


def _run_tasks(spark: SparkSession, tasks: Sequence[ChunkTask], local: LocalTasks | None = None) -> list[StagedChunk]:
    """Run ``tasks`` as one Spark job, runs of consecutive chunks per Spark task (or as the same
    runs in ``local``'s workers). Portable mode maps a range of task numbers in Arrow (no RDD
    there); a Spark Connect client knows no core count, so unless the server sets
    ``spark.default.parallelism`` each chunk is a task."""
    if local is not None:
        return local.run(runs_of(tasks, task_count(len(tasks), local.cores)))
    if not portable.active(spark):
        slices = task_count(len(tasks), spark.sparkContext.defaultParallelism)
        return spark.sparkContext.parallelize(tasks, slices).mapPartitions(stage_chunks).collect()
    cores = portable.master_and_conf(spark)[1].get("spark.default.parallelism")
    slices = task_count(len(tasks), int(cores)) if cores else len(tasks)
    numbers = spark.range(0, len(tasks), 1, slices)
    rows = numbers.mapInArrow(staged_in_arrow(tasks), f"{STAGED_FIELD} binary").collect()
    return [pickle.loads(row[0]) for row in rows]


# Spark tasks per core and batch: each task costs its Python worker about 0.15 s of CPU whatever
# it reads (pyspark re-reads its zip archives' directories and collects garbage for every task),
# 4-6 s of a 2M-row snapshot with one chunk per task. Two per core still even out chunks that
# take unequal times.
TASKS_PER_CORE = 2


def task_count(chunks: int, cores: int) -> int:
    """How many Spark tasks read ``chunks`` chunks on ``cores`` cores: each task reads a run of
    consecutive chunks of the reading order, one after the other."""
    return max(1, min(chunks, TASKS_PER_CORE * max(cores, 1)))


def _seeds_silver(spark: SparkSession, silver_path: str, checkpoint: Checkpoint) -> bool:
    """Whether this snapshot batch's rows may go to silver as plain inserts.

    During the snapshot silver receives nothing but snapshot rows (binlog changes are merged
    only once every chunk is read), and chunks are disjoint key ranges: so while silver holds
    exactly the batches before this one, this batch's rows are new keys and silver may take
    them as they are, without a MERGE. Any other state (a crash between the bronze and the
    silver commit, an unreadable log) leaves silver to the MERGE at the end of the run."""
    app_id = f"silver:{checkpoint.table}"
    if not localfiles.is_local(silver_path):  # in a bucket: Delta reads the log
        newest = deltalog.snapshot(spark, silver_path)
        if int(newest.version()) < 0:
            return checkpoint.batch == 1
        in_log = int(deltalog.delta_log(spark, silver_path).startTransaction().txnVersion(app_id))
        if in_log < 0:  # created empty for a first batch whose bronze commit then failed
            return checkpoint.batch == 1 and int(newest.numOfFiles()) == 0
        return in_log == checkpoint.batch - 1
    log_dir = localfiles.log_dir(silver_path)
    if not log_dir.is_dir():
        return checkpoint.batch == 1
    newest = localfiles.newest_version(log_dir)
    if newest is None:
        return False
    applied = localfiles.last_txn_version(log_dir, newest, app_id)
    return applied == checkpoint.batch - 1


def _file_names(spark: SparkSession, path: str, columns: Sequence[str]) -> dict[str, str]:
    """The names ``columns`` take in the files of the local table at ``path``: those it reads
    them by (:mod:`columnmap`). A table not created yet will be created without column mapping
    (one that needs it is created before), so it reads each column by its own name: found
    without asking Delta, whose first call on a new table would wait for the JVM to warm up (it
    does so while the tasks read instead)."""
    log_dir = localfiles.log_dir(path)
    if log_dir.is_dir() and localfiles.newest_version(log_dir) is not None:
        found = columnmap.table_names(spark, path)
        if found is not None:
            return found
    return {c: c for c in columns}


def _seed_silver(spark: SparkSession, silver_path: str, table: TableSchema, files: Sequence[StagedChunk],
                 checkpoint: Checkpoint, physical: Mapping[str, str], store: ObjectStore | None = None) -> None:
    """Commit the batch's silver-shaped files to silver, as ``silver.apply`` would record a
    MERGE of this batch. A failure only leaves the batch to that MERGE. With ``store`` the
    tasks wrote the files into silver's folder in the bucket (the table exists already)."""
    moved: list[Path] = []
    committing = False
    try:
        placed = []
        if store is not None:
            placed = [deltafiles.DataFile(chunk.silver_path, chunk.rows, chunk.key_min, chunk.key_max,  # type: ignore[arg-type]
                                          dict.fromkeys(chunk.key_min, 0), chunk.silver_size)
                      for chunk in files]
        else:
            target = Path(localfiles.local_path(silver_path))
            _create_table(spark, silver_path, _silver_schema(table), silverwrite.NEW_TABLE_PROPERTIES)
            for chunk in files:
                destination = target / Path(chunk.silver_path).name  # type: ignore[arg-type]
                shutil.move(chunk.silver_path, destination)  # type: ignore[arg-type]
                moved.append(destination)
                placed.append(deltafiles.DataFile(
                    str(destination), chunk.rows, chunk.key_min, chunk.key_max, dict.fromkeys(chunk.key_min, 0)))
        committing = True
        deltafiles.append_files(spark, silver_path, placed, app_id=f"silver:{checkpoint.table}",
                                version=checkpoint.batch,
                                user_metadata=Commit("", checkpoint.batch, checkpoint.table, checkpoint.run_id,
                                                     checkpoint.generation).marker,
                                physical=physical)
        moved = []
    except Exception as exc:  # silver catches up by MERGE at the end of the run
        if committing and not nothing_committed(exc):  # it may have landed: keep its files
            moved = []
        elif store is not None:
            remove_batch_files(store, [silver_path], checkpoint.run_id, checkpoint.batch)
        log.warning("%s: silver not seeded from snapshot batch %d (%s); it is merged later",
                    checkpoint.table, checkpoint.batch, str(exc).splitlines()[0][:200])
    finally:
        for path in moved:
            path.unlink(missing_ok=True)


def _silver_schema(table: TableSchema) -> T.StructType:
    """Silver's columns, with the source descriptions bronze records (as silver made from bronze's
    rows has them: every path makes the same table)."""
    fields = {f.name: f for f in bronze.bronze_schema(described_schema(table)).fields}
    return T.StructType([fields[name] for name in silver_columns(table)])


def _create_table(spark: SparkSession, path: str, schema: T.StructType,
                  properties: Mapping[str, str] | None = None) -> None:
    """Bronze (or silver) with its schema and no files yet (no checkpoint either:
    latest_checkpoint skips it), with table ``properties``. Delta refuses to create a table in a
    folder that already holds files."""
    if bronze.exists(spark, path):
        return
    from delta.tables import DeltaTable

    try:
        builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(_nullable(schema))
        for name, value in {**columnmap.creation_properties(schema.names), **(properties or {})}.items():
            builder = builder.property(name, value)
        builder.execute()
    except spark_errors() as exc:
        # Another run is creating it at the same moment: a commit conflict, or (caught while its
        # first log file is being written) a folder that holds files or a log folder but is no
        # table yet. Once its creation is done it is the same empty table, so go on: the commit
        # tells whether that run also took this batch.
        racing = bronze.is_commit_conflict(exc) or any(mark in str(exc) for mark in CREATED_ELSEWHERE)
        if not racing:
            raise
        if not _appears(spark, path):
            raise errors.ConcurrentRunError(
                f"another run is creating the Delta table {path} concurrently (two runs of one table "
                "on one lake), or the folder holds files but no Delta log; nothing of this batch was "
                "committed: run again, it resumes from the last committed checkpoint (if this repeats, "
                "move the folder away)") from None


def _appears(spark: SparkSession, path: str, wait_s: float = 10.0) -> bool:
    """Whether the table at ``path`` exists, waiting up to ``wait_s`` for a creation under way.
    Reads the log afresh each time: ``DeltaTable.isDeltaTable`` answers from the JVM's cached
    view of the log, which stays "no table" once it saw the other run's empty log folder."""
    deadline = time.monotonic() + wait_s
    while deltalog.newest_version(spark, path) < 0:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _commit_files(spark: SparkSession, path: str, staged: Sequence[StagedChunk],
                  checkpoint: Checkpoint, physical: Mapping[str, str]) -> None:
    """One idempotent Delta commit of the chunks' files, with ``checkpoint`` as its metadata."""
    batch = checkpoint.batch
    files = [deltafiles.DataFile(s.path, s.rows, {"_batch": batch}, {"_batch": batch}, {"_batch": 0}, s.size)
             for s in staged if s.path is not None]
    bronze.commit_files(spark, path, files, checkpoint, physical)


def _bucket_silver(spark: SparkSession, silver_path: str, table: TableSchema,
                   checkpoint: Checkpoint) -> dict[str, str] | None:
    """Silver in the bucket, created (empty) before the tasks write into its folder, and the
    names its files' columns take; None, with silver left to the MERGE, when that fails."""
    try:
        _create_table(spark, silver_path, _silver_schema(table), silverwrite.NEW_TABLE_PROPERTIES)
        return columnmap.table_names(spark, silver_path)
    except Exception as exc:
        log.warning("%s: silver not seeded from snapshot batch %d (%s); it is merged later",
                    checkpoint.table, checkpoint.batch, str(exc).splitlines()[0][:200])
        return None


def nothing_committed(exc: BaseException) -> bool:
    """Whether ``exc``, raised by a commit of files, means that commit did not land: the batch
    was another run's, the columns changed, a concurrent commit won, or a file was refused."""
    if isinstance(exc, (errors.ConcurrentRunError, columnmap.StaleColumns, AlreadyCommitted, ValueError)):
        return True
    return isinstance(exc, spark_errors()) and bronze.is_commit_conflict(exc)


def remove_batch_files(store: ObjectStore | pafs.FileSystem, folders: Sequence[str], run_id: str,
                       batch: int) -> None:
    """Remove the files ``run_id`` wrote for ``batch`` from the tables' ``folders`` (object-store
    URIs): one listing each, on failure only (which files a failed job's tasks wrote is known only
    by their names). Only for a batch nothing was committed of in those folders; a failure only
    warns (``VACUUM`` removes what stays)."""
    tag = batch_tag(run_id, batch)
    try:
        filesystem = store.filesystem() if isinstance(store, ObjectStore) else store
        for folder in folders:
            selector = pafs.FileSelector(object_path(folder), allow_not_found=True)
            for info in filesystem.get_file_info(selector):
                if info.type == pafs.FileType.File and tag in info.base_name:
                    filesystem.delete_file(info.path)
    except (OSError, ArrowException) as exc:  # Azure's client raises ArrowException ("Unknown error")
        log.warning("files of a failed snapshot batch stay in the bucket until VACUUM (%s)",
                    str(exc).splitlines()[0][:200])


def _nullable(schema: T.StructType) -> T.StructType:
    return T.StructType([T.StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])
