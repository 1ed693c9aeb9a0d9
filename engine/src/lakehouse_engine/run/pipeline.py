"""Orchestration: snapshot what is not yet snapshotted, catch up on the binlog, merge silver.

One run is bounded: the binlog is read up to the position current when the run started (or a
given stop position, which the quality checks use to compare silver with the source at one
exact position). Progress is committed with the rows, so a killed run resumes where it stopped.
One table's failure never stops the others: each is recorded on its result, the rest go on, and
the run ends with ``TablesFailed`` naming every failed table.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import pyarrow as pa
import pymysql
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from ..cdc import startpoints
from ..cdc.binlog import BinlogSource
from ..cdc.capture import CatchUp, RetryPolicy, server_id
from ..cdc.feed import BinlogFeed
from ..cdc.tablecapture import TableCapture, as_table_error, new_capture, resume_position, schema_changed
from ..config.project import Layer, ProjectConfig, SchemaPolicy, SnapshotMode, Startup
from ..errors import ConfigError, FatalError, IngestError, SourceUnavailableError
from ..logs import PROGRESS
from ..sink import bronze, silver
from ..sink.layout import apply_layout
from ..snapshot.chunking import plan_chunks, reading_order
from ..snapshot.reader import snapshot_batch
from ..snapshot.window import LowWatermarks, Window, resolve
from ..source.cascades import Cascade, CascadeCheck
from ..source.connection import (
    check_on_source,
    connect,
    current_position,
    gtid_position_at,
    reports_snapshot_positions,
)
from ..source.introspect import TableSchema, describe_table
from ..source.preflight import run_preflight
from ..source.typemap import described_column, described_schema, spark_schema, spark_type
from ..state.checkpoint import Checkpoint, Phase, SnapshotProgress
from ..state.positions import BinlogPosition
from ..tables import TableSpec
from .results import RunStatus

log = logging.getLogger(__name__)

@dataclass
class TableResult:
    table: str
    status: RunStatus = RunStatus.SUCCESS
    snapshot_rows: int = 0
    binlog_rows: int = 0
    batch: int = 0
    position: str | None = None
    gtid: str | None = None  # of the transaction ending at ``position``, when known
    seconds: float = 0.0
    message: str = ""
    category: str = ""
    setting: str | None = None  # of the error: the setting to change, when one is at fault
    error_position: str | None = None  # of the error: the binlog position it happened at
    copied: bool = False  # a snapshot-only table is wholly copied: later runs leave it as it is


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


# Failures of the shared source connection outside any one table's work (the binlog position
# after the snapshots, a catch-up): they stop every table still going, each with its own line.
SOURCE_LOST = (pymysql.err.OperationalError, pymysql.err.InterfaceError, SourceUnavailableError)


class TablesFailed(FatalError):
    """Some tables failed; the others finished. ``results`` holds every table's result,
    ``errors`` the error of each failed table (by table name)."""

    def __init__(self, results: Sequence[TableResult], errors: Mapping[str, IngestError] | None = None):
        failed = [r for r in results if r.status != RunStatus.SUCCESS]
        super().__init__(f"{len(failed)} of {len(results)} table(s) failed: "
                         + "; ".join(r.message for r in failed))
        self.results = list(results)
        self.failed = failed
        self.errors = dict(errors or {})


@dataclass
class _Table:
    """One table's way through a run."""

    spec: TableSpec
    result: TableResult
    schema: TableSchema | None = None
    checkpoint: Checkpoint | None = None
    error: IngestError | None = field(default=None, repr=False)
    recent: dict[int, pa.Table] = field(default_factory=dict, repr=False)  # bronze batches held
    cascades: tuple[Cascade, ...] = ()  # the foreign keys whose cascades it applies (on_cascade='apply')

    @property
    def ok(self) -> bool:
        return self.error is None

    def fail(self, exc: BaseException, lake_root: str | None = None) -> None:
        self.error = as_table_error(exc, self.spec.name, lake_root)
        self.result.status = RunStatus.ERROR
        self.result.message = str(self.error)
        self.result.category = self.error.category
        self.result.setting, self.result.error_position = self.error.setting, self.error.position
        log.error("%s: %s", self.spec.name, self.error)


# How often one run reads chunks again after DDL made them stale before it gives up on the table.
REREAD_ROUNDS = 3


def _copied(checkpoint: Checkpoint) -> bool:
    """Whether the snapshot is over: every chunk read and its window replayed."""
    return checkpoint.phase == Phase.BINLOG and checkpoint.snapshot is None


class Pipeline:
    def __init__(self, config: ProjectConfig, spark: SparkSession, run_id: str,
                 retry: RetryPolicy | None = None, feed: BinlogFeed | None = None):
        """``feed``: one binlog reader for every catch-up of this pipeline (follow mode), which
        decodes on while the lake is written; :meth:`close` stops it."""
        self.config = config
        self.feed = feed
        self.spark = spark
        self.run_id = run_id
        self.retry = retry or RetryPolicy()
        # The newest checkpoint of each table this pipeline ingested successfully, and the
        # position its last catch-up read to, for follow mode's "nothing to read" test.
        self._checkpoints: dict[str, Checkpoint] = {}
        self._read_to: dict[str, BinlogPosition] = {}
        self._snapshot_mode: SnapshotMode | None = None  # resolved at the first snapshot
        # The last catch-up's end and the GTID position there: the next one (follow mode) usually
        # starts there and need not ask the server.
        self._gtid_position: tuple[BinlogPosition, str] | None = None
        self._cascades = CascadeCheck()  # foreign keys whose cascades the binlog lacks

    # -- public -----------------------------------------------------------------------

    def ingest(
        self,
        specs: Sequence[TableSpec],
        *,
        full_refresh: bool = False,
        stop: BinlogPosition | None = None,
        require_snapshot: bool = False,
        conn: pymysql.connections.Connection | None = None,
        hold_idle: Collection[str] = (),
    ) -> list[TableResult]:
        """Ingest every table; raises ``TablesFailed`` after the others finished when any failed.

        ``conn``: a source connection to use (and leave open) instead of a new one; follow mode
        keeps one for all its cycles. ``hold_idle``: tables whose checkpoint stays put when the
        catch-up finds none of their rows (follow mode; see ``capture.idle_advance_held``): this
        pipeline remembers how far it read and its next catch-up of the table starts there."""
        tables = [_Table(s, TableResult(s.name)) for s in specs]
        own_conn = conn is None
        if conn is None:
            conn = connect(self.config.source)
        try:
            run_preflight(conn)
            for table in tables:
                started = time.monotonic()
                try:
                    table.schema = describe_table(conn, self.config.source.database,
                                                  table.spec.source_table, table.spec.key)
                    table.cascades = self._cascades.check(conn, table.schema, table.spec)  # before any write
                    if table.cascades:
                        self._check_cascade_windows(conn, table.spec, full_refresh)
                    table.checkpoint = self._snapshot(conn, table.spec, table.schema, table.result,
                                                      require_snapshot, refresh=full_refresh)
                    if table.checkpoint.position is not None and table.spec.followed:
                        table.schema = self._capture_schema(
                            table.spec, table.schema, self.config.table_path(Layer.BRONZE, table.spec.name))
                except Exception as exc:  # recorded against this table; the others go on
                    table.fail(exc, self.config.lake_root)
                table.result.seconds += time.monotonic() - started
            seen_at = time.time() if stop is None else None  # just before: never later than the read
            stop = stop or current_position(conn)
            started = time.monotonic()
            self._catch_up(conn, [t for t in tables if t.ok and t.spec.followed], stop, frozenset(hold_idle),
                           seen_at)
            self._read_chunks_again(conn, tables, frozenset(hold_idle))
            for table in tables:
                if table.ok and not table.spec.followed:
                    self._end_snapshot(conn, table)
            for table in tables:
                if table.ok:
                    self._merge_silver(table)
                table.result.seconds += (time.monotonic() - started) / len(tables)
        except SOURCE_LOST as exc:  # the source went away (or refused) mid-run: each table still going stops
            for table in tables:
                if table.ok:
                    table.fail(exc, self.config.lake_root)
        finally:
            if own_conn:
                conn.close()
        for table in tables:
            if table.ok and table.checkpoint is not None and stop is not None:
                self._checkpoints[table.spec.name] = table.checkpoint
                self._read_to[table.spec.name] = stop
            else:
                self._checkpoints.pop(table.spec.name, None)
                self._read_to.pop(table.spec.name, None)
        results = [t.result for t in tables]
        errors = {t.spec.name: t.error for t in tables if t.error is not None}
        if errors:
            raise TablesFailed(results, errors)
        return results

    def close(self) -> None:
        """Stop the binlog feed's reader, if there is one."""
        if self.feed is not None:
            self.feed.close()

    def resume_position(self, table: str) -> BinlogPosition | None:
        """Where the next catch-up of ``table`` starts, as of this pipeline's last successful
        ingest of it (``None`` before one, and after a failed one)."""
        checkpoint = self._checkpoints.get(table)
        return resume_position(checkpoint) if checkpoint is not None else None

    def _read_past(self, table: str, checkpoint: Checkpoint) -> BinlogPosition | None:
        """How far this pipeline read past ``checkpoint`` without a row of ``table``; ``None``
        unless ``checkpoint`` is the one its last successful ingest of the table left (a
        checkpoint committed by someone else invalidates what this pipeline read)."""
        known = self._checkpoints.get(table)
        if known is None or known.batch != checkpoint.batch or known.position != checkpoint.position:
            return None
        return self._read_to.get(table)

    def read_to(self, table: str) -> BinlogPosition | None:
        """How far this pipeline's last successful ingest of ``table`` read the binlog: at least
        its resume position, and past it when nothing of the table followed its last
        transaction (e.g. the header of a new binlog file after a rotation). Only a hint for
        skipping idle cycles: the next catch-up still starts at the resume position."""
        resume = self.resume_position(table)
        read = self._read_to.get(table)
        if resume is None or read is None:
            return resume
        return max(resume, read)

    # -- snapshot ---------------------------------------------------------------------

    def _snapshot(
        self,
        conn: pymysql.connections.Connection,
        spec: TableSpec,
        schema: TableSchema,
        result: TableResult,
        require_snapshot: bool,
        refresh: bool = False,
    ) -> Checkpoint:
        path = self.config.table_path(Layer.BRONZE, spec.name)
        checkpoint = bronze.latest_checkpoint(self.spark, path)
        chunk_size = spec.chunk_size or self.config.defaults.chunk_size
        planned_now = refresh or checkpoint is None
        if refresh:
            checkpoint = self._begin_refresh(conn, spec, schema, path, checkpoint)
            if checkpoint.snapshot is None:
                return checkpoint
        elif checkpoint is not None and not spec.followed and _copied(checkpoint):
            return checkpoint  # left as it is, whatever the source became since (schema included)
        if checkpoint is None:
            if require_snapshot:
                raise ConfigError(f"table {spec.name} has not been ingested yet: run `make ingest TABLE={spec.name}`",
                                  table=spec.name)
            if not spec.snapshots:
                return self._start_without_snapshot(conn, spec, schema, path)
            checkpoint = self._plan(conn, spec, schema, batch=0)
        elif checkpoint.snapshot is not None and checkpoint.snapshot.key != schema.key:
            raise FatalError(
                f"table {spec.name}: key changed from {checkpoint.snapshot.key} to {schema.key}; "
                f"re-snapshot with `make ingest TABLE={spec.name} FULL_REFRESH=1`", table=spec.name,
            )
        elif checkpoint.phase == Phase.SNAPSHOT:
            if (checkpoint.position is not None and spec.followed and spec.on_schema_change is SchemaPolicy.EVOLVE
                    and not self._lake_matches(schema, path)):
                # A DDL since the chunks already read: the catch-up applies it first (it may send
                # more chunks back to be read), then the pending chunks are read with its columns.
                return checkpoint
            self._check_lake_schema(spec.name, schema, path)
        if checkpoint.phase != Phase.SNAPSHOT or checkpoint.snapshot is None:
            return checkpoint
        pending = reading_order(checkpoint.snapshot.pending)
        total = len(checkpoint.snapshot.chunks)
        per_commit = self.config.defaults.chunks_per_commit(chunk_size)
        started = time.monotonic()
        done_before = len(checkpoint.snapshot.done)
        mode = self._chunk_mode(conn)
        lows = LowWatermarks()
        if planned_now and checkpoint.position is not None:
            lows.sample(checkpoint.position)  # taken before the columns were read
        for first in range(0, len(pending), per_commit):
            if first and self._columns_changed(conn, spec, schema, checkpoint):
                break
            batch = pending[first : first + per_commit]
            window = None
            if mode is SnapshotMode.WINDOW:
                lows.sample(current_position(conn))
                window = Window(lows.low(), server_id(self.config), self.retry.read_timeout_s)
            # A table whose binlog phase began keeps its position: chunks read again after a DDL.
            attempt = replace(checkpoint, batch=checkpoint.batch + 1, phase=Phase.SNAPSHOT, run_id=self.run_id,
                              repair=False, ddl=None, schema_changes=())
            try:
                watermarks, rows = snapshot_batch(
                    self.spark, profile=self.config.source, table=schema, chunks=batch,
                    bronze_path=path, checkpoint=attempt, staging=self.config.target_dir / "staging",
                    # A silver transform is Spark code, and history has columns of its own: silver
                    # then takes the rows by MERGE only.
                    silver_path=(self.config.table_path(Layer.SILVER, spec.name)
                                 if spec.transform is None and spec.scd_type == 1 else None),
                    window=window, server_ids=self.config.server_ids,
                )
            except Exception:
                # A DDL since the columns were described can fail the batch's reads (a SELECT of a
                # dropped or renamed column; a window holding the DDL). Nothing of the batch was
                # committed: its chunks are read once the catch-up has applied the DDL.
                if self._columns_changed(conn, spec, schema, checkpoint):
                    break
                raise
            progress = checkpoint.snapshot.with_done(watermarks)
            checkpoint = replace(attempt, snapshot=progress)
            result.snapshot_rows += rows
            elapsed = max(time.monotonic() - started, 1e-6)
            log.info("%s: snapshot chunks %d/%d, %d rows, %.0f rows/s%s", spec.name,
                     len(progress.done), total, result.snapshot_rows,
                     result.snapshot_rows / elapsed,
                     eta(len(progress.done) - done_before, total - len(progress.done), elapsed), extra=PROGRESS)
        return checkpoint

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

    def _columns_changed(self, conn: pymysql.connections.Connection, spec: TableSpec, schema: TableSchema,
                         checkpoint: Checkpoint) -> bool:
        """Whether a DDL changed the table since its chunks began to be read (the next SELECT
        would read other columns, or none). A followed table that evolves leaves its remaining
        chunks to be read after the catch-up has applied the DDL (``_read_chunks_again``); any
        other table stops, naming the command that re-snapshots it."""
        if describe_table(conn, self.config.source.database, spec.source_table, spec.key) == schema:
            return False
        if spec.followed and spec.on_schema_change is SchemaPolicy.EVOLVE and checkpoint.position is not None:
            log.info("%s: the table's columns changed while its snapshot was read: its %d remaining chunk(s) "
                     "are read once the catch-up has applied the change", spec.name,
                     len(checkpoint.snapshot.pending) if checkpoint.snapshot is not None else 0)
            return True
        raise schema_changed(spec.name, "the table's columns changed while its snapshot was read")

    def _check_cascade_windows(self, conn: pymysql.connections.Connection, spec: TableSpec, refresh: bool) -> None:
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

    def _chunk_mode(self, conn: pymysql.connections.Connection) -> SnapshotMode:
        if self._snapshot_mode is None:
            self._snapshot_mode = resolve(self.config.defaults.snapshot_mode, partial(reports_snapshot_positions, conn))
            if self._snapshot_mode is SnapshotMode.WINDOW:
                log.info("snapshot chunks are read between a low and a high watermark, then the binlog "
                         "between them is replayed onto them (snapshot_mode %s)", self.config.defaults.snapshot_mode)
        return self._snapshot_mode

    def _check_lake_schema(self, name: str, schema: TableSchema, path: str) -> None:
        """Stop before writing when the source table no longer has bronze's columns and types: a
        changed type would otherwise surface as a Delta merge error deep inside a write."""
        lake = self._lake_fields(path)
        source = spark_schema(schema).fields
        if {f.name: f.dataType for f in lake} == {f.name: f.dataType for f in source}:
            return
        if [f.name for f in lake] != [f.name for f in source]:
            raise schema_changed(name, f"source columns {[f.name for f in source]} differ from bronze "
                                 f"columns {[f.name for f in lake]}")
        for was, now in zip(lake, source, strict=True):
            if was.dataType != now.dataType:
                column = schema.column(now.name)
                raise schema_changed(name, f"column {now.name} is now {column.column_type} "
                                     f"({now.dataType.simpleString()}), bronze has {was.dataType.simpleString()}")

    def _lake_matches(self, schema: TableSchema, path: str) -> bool:
        lake = {f.name: f.dataType for f in self._lake_fields(path)}
        return lake == {f.name: f.dataType for f in spark_schema(schema).fields}

    def _lake_fields(self, path: str) -> list[T.StructField]:
        return [f for f in self.spark.read.format("delta").load(path).schema.fields
                if f.name not in bronze.META_COLUMNS]

    def _capture_schema(self, spec: TableSpec, source: TableSchema, path: str) -> TableSchema:
        """The columns the binlog's rows have at the table's checkpoint: the source's, unless a DDL
        the binlog has yet to deliver changed them since. Then they are bronze's, as recorded in its
        schema (see ``typemap.described_schema``), and the catch-up evolves them at that DDL."""
        lake = self._lake_fields(path)
        same = {f.name: f.dataType for f in lake} == {f.name: f.dataType for f in spark_schema(source).fields}
        if not same and spec.on_schema_change is SchemaPolicy.STOP:
            self._check_lake_schema(spec.name, source, path)
        by_name = {c.name: c for c in source.columns}
        columns = []
        for f in lake:
            # Bronze's record is the truth at the checkpoint: the source's description may already
            # show a DDL the binlog has yet to deliver, even one that keeps the Spark type.
            info = described_column(f)
            if info is None and f.name in by_name and spark_type(by_name[f.name]) == f.dataType:
                info = by_name[f.name]  # a lake written before bronze recorded descriptions
            if info is None:
                self._check_lake_schema(spec.name, source, path)  # raises, naming the difference
                raise schema_changed(spec.name, f"bronze column {f.name} is not on the source")
            columns.append(info)
        if not set(source.key) <= {c.name for c in columns}:
            raise schema_changed(spec.name, f"key {source.key} is not among bronze's columns")
        if same and all(by_name[c.name] == c for c in columns):
            return replace(source, columns=tuple(columns))  # in bronze's order (added columns last)
        log.info("%s: bronze has columns %s, the source %s: the binlog's DDL since the checkpoint changes them",
                 spec.name, [c.name for c in columns], list(source.column_names))
        return replace(source, columns=tuple(columns))

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

    # -- binlog and silver -----------------------------------------------------------

    def _catch_up(self, conn: pymysql.connections.Connection, tables: Sequence[_Table],
                  stop: BinlogPosition, hold_idle: frozenset[str], stop_seen_at: float | None) -> None:
        delivery = self.config.defaults.delivery
        captures: dict[str, TableCapture] = {}
        for table in tables:
            assert table.schema is not None and table.checkpoint is not None
            name = table.spec.name
            try:
                captures[name] = new_capture(conn, table.spec, table.schema, table.checkpoint,
                                             table.spec.delivery_or(delivery),
                                             read_to=self._read_past(name, table.checkpoint),
                                             hold_idle=name in hold_idle, cascades=table.cascades)
            except Exception as exc:
                table.fail(exc, self.config.lake_root)
        catch_up = CatchUp(self.config, self.spark, self.run_id, self.retry, self._gtid_position, self.feed,
                           merge_silver=self._merge_held)
        catch_up.run(conn, list(captures.values()), stop, stop_seen_at)
        self._gtid_position = catch_up.gtid_position
        for table in tables:
            capture = captures.get(table.spec.name)
            if capture is None:
                continue
            table.checkpoint = capture.checkpoint
            table.recent = capture.recent
            table.result.binlog_rows += capture.binlog_rows
            if capture.failure is not None:
                table.fail(capture.failure)

    def _read_chunks_again(self, conn: pymysql.connections.Connection, tables: Sequence[_Table],
                           hold_idle: frozenset[str]) -> None:
        """Read the chunks a DDL made stale (it came while they were read; see ``CatchUp``) with
        the source's columns now, then catch those tables up again."""
        for _ in range(REREAD_ROUNDS):
            again = [t for t in tables if t.ok and t.checkpoint is not None and t.checkpoint.snapshot is not None
                     and not t.checkpoint.snapshot.complete]
            if not again:
                return
            for table in again:
                try:
                    table.schema = describe_table(conn, self.config.source.database, table.spec.source_table,
                                                  table.spec.key)
                    table.checkpoint = self._snapshot(conn, table.spec, table.schema, table.result, False)
                except Exception as exc:  # recorded against this table; the others go on
                    table.fail(exc, self.config.lake_root)
            seen_at = time.time()
            self._catch_up(conn, [t for t in again if t.ok], current_position(conn), hold_idle, seen_at)
        for table in tables:
            if table.ok and table.checkpoint is not None and table.checkpoint.snapshot is not None \
                    and not table.checkpoint.snapshot.complete:
                table.fail(FatalError(
                    f"table {table.spec.name}: DDL kept coming while its snapshot chunks were read again "
                    f"({REREAD_ROUNDS} rounds); run again once the schema changes are done", table=table.spec.name))

    def _end_snapshot(self, conn: pymysql.connections.Connection, table: _Table) -> None:
        """A snapshot-only table: the binlog read up to the position its last chunk was read at
        (the chunks' windows replayed, so silver is the source as of that one position), then
        no further."""
        assert table.checkpoint is not None and table.schema is not None
        if not _copied(table.checkpoint):
            assert table.checkpoint.snapshot is not None
            end = table.checkpoint.snapshot.high_watermark
            self._catch_up(conn, [table], end, frozenset(), None)
            if table.ok and not _copied(table.checkpoint):
                # Every chunk was read at one position: no window to replay, nothing was committed.
                done = table.checkpoint.advanced_to(end, self.run_id)
                try:
                    bronze.append_batch(self.spark, self.config.table_path(Layer.BRONZE, table.spec.name), [],
                                        spark_schema(table.schema), done)
                except Exception as exc:  # recorded against this table; the others go on
                    table.fail(exc, self.config.lake_root)
                    return
                table.checkpoint = done
        if table.ok and _copied(table.checkpoint):
            table.result.copied = True
            log.info("%s: snapshot only: copied as of %s; not followed further (FULL_REFRESH=1 copies it again)",
                     table.spec.name, table.checkpoint.position)

    def _apply_silver(self, spec: TableSpec, key: Sequence[str], upto_batch: int,
                      recent: Mapping[int, pa.Table]) -> None:
        silver.apply(
            self.spark,
            bronze_path=self.config.table_path(Layer.BRONZE, spec.name),
            silver_path=self.config.table_path(Layer.SILVER, spec.name),
            key=key,
            upto_batch=upto_batch,
            transform=spec.transform,
            recent=recent,
            scd_type=spec.scd_type,
            table=spec.name,
            table_features=self.config.defaults.table_features,
        )

    def _merge_held(self, capture: TableCapture) -> None:
        """Silver takes the batches a long catch-up holds, midway (see ``CatchUp._hold``). A
        failure only leaves them to the merge at the end of the run, which reports it."""
        try:
            self._apply_silver(capture.spec, capture.schema.key, capture.checkpoint.batch, capture.recent)
        except Exception as exc:  # the merge at the end of the run tries again from bronze
            log.warning("%s: silver not merged midway (%s); it is merged at the end of the run", capture.spec.name,
                        str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__)

    def _merge_silver(self, table: _Table) -> None:
        assert table.schema is not None and table.checkpoint is not None
        try:
            self._apply_silver(table.spec, table.schema.key, table.checkpoint.batch, table.recent)
            apply_layout(self.spark, self.config.table_path(Layer.SILVER, table.spec.name), table.spec.layout)
        except Exception as exc:
            table.fail(exc, self.config.lake_root)
            return
        table.result.batch = table.checkpoint.batch
        position = table.checkpoint.position
        table.result.position = str(position) if position else None
        table.result.gtid = table.checkpoint.gtid
