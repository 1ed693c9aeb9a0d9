"""The snapshot runner: how a table's bronze begins and its snapshot is read, one run at a time.

A table without a checkpoint has its snapshot planned in chunks (or, with a ``startup`` other
than initial, starts at a binlog position without one); a full refresh plans it again in a
bronze commit that empties bronze. The pending chunks are then read ``chunks_per_commit`` to a
bronze commit, each batch's checkpoint recording the chunks done, so a killed run resumes at the
first chunk not committed. A DDL while the chunks are read stops the reading: a followed table
that evolves reads the rest once the catch-up has applied it (``Pipeline``'s read-again rounds).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

import pymysql
from pyspark.sql import SparkSession

from ..cdc import startpoints
from ..cdc.binlog import BinlogSource
from ..cdc.capture import RetryPolicy, server_id
from ..cdc.tablecapture import schema_changed
from ..config.project import Layer, ProjectConfig, SchemaPolicy, SnapshotMode, Startup
from ..errors import ConfigError, FatalError, SourceUnavailableError
from ..logs import PROGRESS
from ..sink import bronze, portable, silver
from ..sink.resting import RestingSpark
from ..snapshot.chunking import Chunk, plan_chunks, reading_order
from ..snapshot.localtasks import LocalTasks, local_tasks
from ..snapshot.reader import snapshot_batch
from ..snapshot.staging import staging_area
from ..snapshot.window import LowWatermarks, Window, resolve
from ..source.connection import check_on_source, current_position, gtid_position_at, reports_snapshot_positions
from ..source.introspect import TableSchema, describe_table
from ..source.typemap import described_schema
from ..state.checkpoint import Checkpoint, Phase, SnapshotProgress
from ..state.positions import BinlogPosition
from ..tables import TableSpec
from .lakeschema import check_lake_schema, lake_matches
from .results import TableResult

log = logging.getLogger(__name__)


def copied(checkpoint: Checkpoint) -> bool:
    """Whether the snapshot is over: every chunk read and its window replayed."""
    return checkpoint.phase == Phase.BINLOG and checkpoint.snapshot is None


def eta(done: int, left: int, elapsed_s: float) -> str:
    """``, ETA 1 min 5 s`` at the pace of the ``done`` units so far (empty when none is left or
    none is done yet: no pace to go by)."""
    if done <= 0 or left <= 0:
        return ""
    seconds = round(elapsed_s / done * left)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{hours} h"] * bool(hours) + [f"{minutes} min"] * bool(minutes) + [f"{seconds} s"] * bool(
        seconds or not (hours or minutes))
    return ", ETA " + " ".join(parts)


def _log_progress(name: str, progress: SnapshotProgress, rows: int, started: float, done_before: int) -> None:
    """The progress line after a batch: ``rows`` is the table's rows this run, ``done_before``
    the chunks already read when this reading began (the ETA goes by the pace since)."""
    total = len(progress.chunks)
    elapsed = max(time.monotonic() - started, 1e-6)
    log.info("%s: snapshot chunks %d/%d, %d rows, %.0f rows/s%s", name, len(progress.done), total, rows,
             rows / elapsed, eta(len(progress.done) - done_before, total - len(progress.done), elapsed),
             extra=PROGRESS)


class SnapshotRunner:
    """Plans, reads and commits the snapshots of one pipeline's tables."""

    def __init__(self, config: ProjectConfig, spark: RestingSpark, run_id: str, retry: RetryPolicy):
        self.config = config
        self._spark = spark
        self.run_id = run_id
        self.retry = retry
        self._mode: SnapshotMode | None = None  # resolved at the first snapshot

    @property
    def spark(self) -> SparkSession:
        return self._spark.session

    def run(
        self,
        conn: pymysql.connections.Connection,
        spec: TableSpec,
        schema: TableSchema,
        result: TableResult,
        require_snapshot: bool,
        refresh: bool = False,
    ) -> Checkpoint:
        """The table's checkpoint after reading what it can of its snapshot this run (its rows
        counted on ``result``); a table past its snapshot keeps its checkpoint."""
        path = self.config.table_path(Layer.BRONZE, spec.name)
        checkpoint = bronze.latest_checkpoint(self.spark, path)
        planned_now = refresh or checkpoint is None
        if refresh:
            checkpoint = self._begin_refresh(conn, spec, schema, path, checkpoint)
            if checkpoint.snapshot is None:
                return checkpoint
        elif checkpoint is not None and not spec.followed and copied(checkpoint):
            return checkpoint  # left as it is, whatever the source became since (schema included)
        if checkpoint is None:
            if require_snapshot:
                raise ConfigError(f"table {spec.name} has not been ingested yet: run `make ingest TABLE={spec.name}`",
                                  table=spec.name)
            if not spec.snapshots:
                return self._start_without_snapshot(conn, spec, schema, path)
            checkpoint = self._plan(conn, spec, schema, batch=0)
        elif self._waits_for_catch_up(spec, schema, path, checkpoint):
            return checkpoint
        if checkpoint.phase != Phase.SNAPSHOT or checkpoint.snapshot is None:
            return checkpoint
        return self._read_pending(conn, spec, schema, path, checkpoint, result, planned_now)

    def check_cascade_windows(self, conn: pymysql.connections.Connection, spec: TableSpec, refresh: bool) -> None:
        """A window snapshot's chunk replays the binlog of its window, which has no cascaded rows:
        a cascade inside the window is lost whether the SELECT saw the row before or after it,
        so a table applying cascades reads no chunk that way (it refuses before any write)."""
        checkpoint = bronze.latest_checkpoint(self.spark, self.config.table_path(Layer.BRONZE, spec.name))
        reads_chunks = refresh or (checkpoint.phase is Phase.SNAPSHOT if checkpoint is not None
                                   else spec.startup is Startup.INITIAL)
        if reads_chunks and self._chunk_mode(conn) is SnapshotMode.WINDOW:
            raise ConfigError(
                f"table {spec.name}: on_cascade='apply' cannot derive cascades inside the windows of a window "
                "snapshot (snapshot_mode resolved to window); read its snapshot with snapshot_mode: consistent "
                "(MariaDB, Percona) in lakehouse_project.yml, or set on_cascade='refuse' in its table module",
                table=spec.name, setting="on_cascade")

    # -- reading the chunks -------------------------------------------------------------

    def _waits_for_catch_up(self, spec: TableSpec, schema: TableSchema, path: str, checkpoint: Checkpoint) -> bool:
        """Check a checkpoint this run goes on from against the source: a snapshot whose key
        changed stops the table, and so do columns unlike bronze's, unless a followed table
        evolves; then the chunks wait for its catch-up (``True``)."""
        if checkpoint.snapshot is not None and checkpoint.snapshot.key != schema.key:
            raise FatalError(
                f"table {spec.name}: key changed from {checkpoint.snapshot.key} to {schema.key}; "
                f"re-snapshot with `make ingest TABLE={spec.name} FULL_REFRESH=1`", table=spec.name,
            )
        if checkpoint.phase != Phase.SNAPSHOT:
            return False
        if (checkpoint.position is not None and spec.followed and spec.on_schema_change is SchemaPolicy.EVOLVE
                and not lake_matches(self.spark, schema, path)):
            # A DDL since the chunks already read: the catch-up applies it first (it may send
            # more chunks back to be read), then the pending chunks are read with its columns.
            return True
        check_lake_schema(self.spark, spec.name, schema, path)
        return False

    def _read_pending(self, conn: pymysql.connections.Connection, spec: TableSpec, schema: TableSchema, path: str,
                      checkpoint: Checkpoint, result: TableResult, planned_now: bool) -> Checkpoint:
        """Read the pending chunks, ``chunks_per_commit`` to a bronze commit, until every one is
        read or a DDL changes the table's columns (see ``_columns_changed``)."""
        assert checkpoint.snapshot is not None
        pending = reading_order(checkpoint.snapshot.pending)
        per_commit = self.config.defaults.chunks_per_commit(spec.chunk_size or self.config.defaults.chunk_size)
        started = time.monotonic()
        done_before = len(checkpoint.snapshot.done)
        mode = self._chunk_mode(conn)
        lows = LowWatermarks()
        if planned_now and checkpoint.position is not None:
            lows.sample(checkpoint.position)  # taken before the columns were read
        local = local_tasks(self.spark)  # a local master's workers (else Spark tasks read)
        for first in range(0, len(pending), per_commit):
            if first and self._columns_changed(conn, spec, schema, checkpoint):
                break
            window = self._window(conn, lows) if mode is SnapshotMode.WINDOW else None
            read = self._read_batch(conn, spec, schema, path, checkpoint, pending[first : first + per_commit],
                                    window, local)
            if read is None:
                break
            checkpoint, rows = read
            assert checkpoint.snapshot is not None
            result.snapshot_rows += rows
            _log_progress(spec.name, checkpoint.snapshot, result.snapshot_rows, started, done_before)
        return checkpoint

    def _window(self, conn: pymysql.connections.Connection, lows: LowWatermarks) -> Window:
        """The next batch's window (snapshot_mode window): the position now sampled, the window
        starts at the low watermark ``lows`` gives (see ``LowWatermarks``)."""
        lows.sample(current_position(conn))
        return Window(lows.low(), server_id(self.config), self.retry.read_timeout_s)

    def _read_batch(
        self,
        conn: pymysql.connections.Connection,
        spec: TableSpec,
        schema: TableSchema,
        path: str,
        checkpoint: Checkpoint,
        chunks: Sequence[Chunk],
        window: Window | None,
        local: LocalTasks | None = None,
    ) -> tuple[Checkpoint, int] | None:
        """Read ``chunks`` in one bronze commit: the checkpoint it committed and its rows, or
        ``None`` when a DDL failed the reads and the chunks wait for the catch-up."""
        assert checkpoint.snapshot is not None
        # A table whose binlog phase began keeps its position: chunks read again after a DDL.
        attempt = replace(checkpoint, batch=checkpoint.batch + 1, phase=Phase.SNAPSHOT, run_id=self.run_id,
                          repair=False, ddl=None, schema_changes=())
        try:
            watermarks, rows = snapshot_batch(
                self.spark, profile=self.config.source, table=schema, chunks=chunks,
                bronze_path=path, checkpoint=attempt,
                staging=staging_area(self.config.lake_root, self.config.target_dir,
                                     *portable.master_and_conf(self.spark)),
                # A silver transform is Spark code, and history has columns of its own: silver
                # then takes the rows by MERGE only.
                silver_path=(self.config.table_path(Layer.SILVER, spec.name)
                             if spec.transform is None and spec.scd_type == 1 else None),
                window=window, server_ids=self.config.server_ids, local=local,
            )
        except Exception:
            # A DDL since the columns were described can fail the batch's reads (a SELECT of a
            # dropped or renamed column; a window holding the DDL). Nothing of the batch was
            # committed: its chunks are read once the catch-up has applied the DDL.
            if self._columns_changed(conn, spec, schema, checkpoint):
                return None
            raise
        return replace(attempt, snapshot=checkpoint.snapshot.with_done(watermarks)), rows

    def _columns_changed(self, conn: pymysql.connections.Connection, spec: TableSpec, schema: TableSchema,
                         checkpoint: Checkpoint) -> bool:
        """Whether a DDL changed the table since its chunks began to be read (the next SELECT
        would read other columns, or none). A followed table that evolves leaves its remaining
        chunks to be read after the catch-up has applied the DDL (``Pipeline._read_chunks_again``);
        any other table stops, naming the command that re-snapshots it."""
        if describe_table(conn, self.config.source.database, spec.source_table, spec.key) == schema:
            return False
        if spec.followed and spec.on_schema_change is SchemaPolicy.EVOLVE and checkpoint.position is not None:
            log.info("%s: the table's columns changed while its snapshot was read: its %d remaining chunk(s) "
                     "are read once the catch-up has applied the change", spec.name,
                     len(checkpoint.snapshot.pending) if checkpoint.snapshot is not None else 0)
            return True
        raise schema_changed(spec.name, "the table's columns changed while its snapshot was read")

    def _chunk_mode(self, conn: pymysql.connections.Connection) -> SnapshotMode:
        if self._mode is None:
            self._mode = resolve(self.config.defaults.snapshot_mode, partial(reports_snapshot_positions, conn))
            if self._mode is SnapshotMode.WINDOW:
                log.info("snapshot chunks are read between a low and a high watermark, then the binlog "
                         "between them is replayed onto them (snapshot_mode %s)", self.config.defaults.snapshot_mode)
        return self._mode

    # -- starting a table -----------------------------------------------------------------

    def _plan(self, conn: pymysql.connections.Connection, spec: TableSpec, schema: TableSchema, *,
              batch: int, generation: int = 0) -> Checkpoint:
        """A new snapshot's checkpoint: its chunk plan, at ``batch`` (not committed yet)."""
        # The catch-up starts here rather than at the first chunk's watermark, so it reads any
        # DDL that came after the columns the chunks select were read (see CatchUp).
        before = current_position(conn)
        if describe_table(conn, self.config.source.database, spec.source_table, spec.key) != schema:
            raise SourceUnavailableError(f"table {spec.name}: its columns changed while this run started; "
                                         "run again", table=spec.name)
        chunk_size = spec.chunk_size or self.config.defaults.chunk_size
        chunks = plan_chunks(conn, schema, chunk_size, self.config.defaults.even_distribution)
        log.info("%s: snapshot planned in %d chunk(s) of ~%d rows", spec.name, len(chunks), chunk_size,
                 extra=PROGRESS)
        return Checkpoint(spec.name, batch, Phase.SNAPSHOT, self.run_id,
                          snapshot=SnapshotProgress(schema.key, tuple(chunks)), position=before,
                          gtid=gtid_position_at(conn, before) or None, generation=generation)

    def _begin_refresh(self, conn: pymysql.connections.Connection, spec: TableSpec, schema: TableSchema,
                       path: str, last: Checkpoint | None) -> Checkpoint:
        """Start a full refresh: one bronze commit replaces bronze's rows (and columns) with none,
        carrying the new snapshot's plan; the chunks are then read into bronze as any snapshot's.

        Nothing is dropped. Silver keeps its state until every chunk is in bronze and is then
        replaced in one commit (``silver.apply`` sees bronze's new generation), so a refresh
        stopped at any moment leaves silver as it was, and the next ``ingest`` carries the refresh
        on from its checkpoint. Bronze's earlier rows stay readable by time travel until VACUUM.
        Batch numbers go on from both tables' highest: neither Delta's idempotent transactions
        nor silver's marker ever see one again."""
        silver_path = self.config.table_path(Layer.SILVER, spec.name)
        applied = silver.applied_batch(self.spark, silver_path) if bronze.exists(self.spark, silver_path) else -1
        batch = max(last.batch if last is not None else 0, applied) + 1
        if spec.snapshots:
            checkpoint = self._plan(conn, spec, schema, batch=batch, generation=batch)
        else:  # a table that starts at a binlog position starts there again
            position = self._start_position(conn, spec)
            checkpoint = Checkpoint(spec.name, batch, Phase.BINLOG, self.run_id, position=position,
                                    gtid=gtid_position_at(conn, position) or None, generation=batch)
        rows = self.spark.createDataFrame([], bronze.bronze_schema(described_schema(schema)))
        bronze.append(rows, path, checkpoint, replace_all=True)
        log.info("%s: full refresh: bronze starts again at batch %d; silver keeps its state until the new "
                 "snapshot is read", spec.name, batch)
        return checkpoint

    def _start_without_snapshot(self, conn: pymysql.connections.Connection, spec: TableSpec,
                                schema: TableSchema, path: str) -> Checkpoint:
        """``startup`` other than initial: create bronze with one empty commit whose checkpoint
        is the start position (see ``cdc.startpoints``); this same run's catch-up reads on from it."""
        position = self._start_position(conn, spec)
        checkpoint = Checkpoint(spec.name, 1, Phase.BINLOG, self.run_id, position=position,
                                gtid=gtid_position_at(conn, position) or None)
        bronze.append_batch(self.spark, path, [], described_schema(schema), checkpoint)
        log.info("%s: no snapshot (startup %s): silver takes the changes after %s", spec.name,
                 spec.startup, position)
        return checkpoint

    def _start_position(self, conn: pymysql.connections.Connection, spec: TableSpec) -> BinlogPosition:
        given = spec.start_at()
        if given is not None:
            check_on_source(conn, given, spec.name)
            return given
        read = BinlogSource(self.config.source, server_id(self.config), self.config.source.database, {}).transactions
        if spec.start_gtid is not None:
            return startpoints.after_gtid(conn, read, spec.start_gtid, spec.name)
        epoch = spec.start_epoch()
        if epoch is not None:
            return startpoints.at_time(conn, read, epoch, spec.name)
        return current_position(conn)
