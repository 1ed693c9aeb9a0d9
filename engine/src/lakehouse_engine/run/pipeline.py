"""Orchestration: snapshot what is not yet snapshotted, catch up on the binlog, merge silver.

The snapshots are read by ``run.snapshots``, the lake's columns checked against the source's by
``run.lakeschema``; the catch-up is ``cdc.capture``'s and the merge ``sink.silver``'s.

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
from dataclasses import dataclass, field

import pyarrow as pa
import pymysql
from pyspark.sql import SparkSession

from ..cdc.capture import CatchUp, Feed, RetryPolicy
from ..cdc.headstart import HeadStart
from ..cdc.tablecapture import TableCapture, as_table_error, new_capture, resume_position
from ..config.project import Layer, ProjectConfig
from ..errors import FatalError, IngestError, SourceUnavailableError
from ..sink import bronze, silver
from ..sink.layout import apply_layout
from ..sink.resting import RestingSpark
from ..snapshot.localtasks import stop_workers
from ..source.cascades import Cascade, CascadeCheck
from ..source.connection import connect, current_position
from ..source.introspect import TableSchema, describe_table
from ..source.preflight import run_preflight
from ..source.typemap import spark_schema
from ..state.checkpoint import Checkpoint
from ..state.positions import BinlogPosition
from ..tables import TableSpec
from .lakeschema import capture_schema
from .results import RunStatus, TableResult
from .snapshots import SnapshotRunner, copied

log = logging.getLogger(__name__)

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


class Pipeline:
    """The ingests of one project on one Spark session, one after another (follow mode runs one
    per cycle): what it read of each table is kept between them."""

    def __init__(self, config: ProjectConfig, spark: SparkSession | RestingSpark, run_id: str,
                 retry: RetryPolicy | None = None, feed: Feed | None = None):
        """``feed``: one binlog reader for every catch-up of this pipeline (follow mode), which
        decodes on while the lake is written, or a catch-up's reader started before Spark
        (``cdc.headstart``, whose range then sets the stop); :meth:`close` stops it. ``spark``: a
        :class:`RestingSpark` lets the pipeline's session rest between ingests (:meth:`rest`)."""
        self.config = config
        self.feed = feed
        self._spark = spark if isinstance(spark, RestingSpark) else RestingSpark(spark)
        self.run_id = run_id
        self.retry = retry or RetryPolicy()
        # The newest checkpoint of each table this pipeline ingested successfully, and the
        # position its last catch-up read to, for follow mode's "nothing to read" test.
        self._checkpoints: dict[str, Checkpoint] = {}
        self._read_to: dict[str, BinlogPosition] = {}
        self._snapshots = SnapshotRunner(config, self._spark, run_id, self.retry)
        # The last catch-up's end and the GTID position there: the next one (follow mode) usually
        # starts there and need not ask the server.
        self._gtid_position: tuple[BinlogPosition, str] | None = None
        self._cascades = CascadeCheck()  # foreign keys whose cascades the binlog lacks

    # -- public -----------------------------------------------------------------------

    @property
    def spark(self) -> SparkSession:
        """The session, started again when it was resting: take it for each piece of work."""
        return self._spark.session

    def unused_for(self, seconds: float) -> bool:
        """Whether the session could rest and no ingest used it for ``seconds``."""
        return self._spark.unused_for(seconds)

    def rest(self) -> bool:
        """Stop the session's context (see ``sink.resting``) and the binlog feed's reader process
        (it reads the idle binlog every few seconds) until the next ingest, which starts both
        again; whether it rests now (a session that cannot start again does not)."""
        rested = self._spark.rest()
        if rested:
            stop_workers()  # a local master's snapshot workers, as Spark's context stops its own
            if self.feed is not None:
                self.feed.close()
        return rested

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
        catch-up finds none of their rows (follow mode; see ``commits.idle_advance_held``): this
        pipeline remembers how far it read and its next catch-up of the table starts there."""
        tables = [_Table(s, TableResult(s.name)) for s in specs]
        own_conn = conn is None
        if conn is None:
            conn = connect(self.config.source)
        try:
            run_preflight(conn)
            for table in tables:
                self._start_table(conn, table, full_refresh, require_snapshot)
            seen_at = None
            if stop is None:
                stop, seen_at = self._stop(conn, tables)
            self._finish_tables(conn, tables, stop, frozenset(hold_idle), seen_at)
        except SOURCE_LOST as exc:  # the source went away (or refused) mid-run: each table still going stops
            for table in tables:
                if table.ok:
                    table.fail(exc, self.config.lake_root)
        finally:
            self._spark.used()  # an ingest's Spark work ends with it, however long it took
            if own_conn:
                conn.close()
        self._remember(tables, stop)
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

    # -- the steps of a run ----------------------------------------------------------

    def _stop(self, conn: pymysql.connections.Connection, tables: Sequence[_Table]) -> tuple[BinlogPosition, float]:
        """Where the catch-up reads to, and the Unix time that was the source's head: the head
        now, or the one a reader started ahead reads to when the catch-up starts where it does
        (then the run reads what it would have read had it started a few seconds sooner)."""
        ahead = self.feed if isinstance(self.feed, HeadStart) else None
        starts = [resume_position(t.checkpoint) for t in tables
                  if t.ok and t.spec.followed and t.checkpoint is not None]
        known = [p for p in starts if p is not None]
        if ahead is not None and known and len(known) == len(starts) and min(known) == ahead.start:
            return ahead.stop, ahead.seen_at
        seen_at = time.time()  # just before: never later than the read
        return current_position(conn), seen_at

    def _start_table(self, conn: pymysql.connections.Connection, table: _Table, full_refresh: bool,
                     require_snapshot: bool) -> None:
        """Describe the table, check the cascades it applies, read what it can of its snapshot
        and, when it is followed, find the columns its binlog rows have at its checkpoint. A
        failure is recorded against the table; the others go on."""
        started = time.monotonic()
        try:
            table.schema = describe_table(conn, self.config.source.database, table.spec.source_table, table.spec.key)
            table.cascades = self._cascades.check(conn, table.schema, table.spec)  # before any write
            if table.cascades:
                self._snapshots.check_cascade_windows(conn, table.spec, full_refresh)
            table.checkpoint = self._snapshots.run(conn, table.spec, table.schema, table.result,
                                                   require_snapshot, refresh=full_refresh)
            if table.checkpoint.position is not None and table.spec.followed:
                table.schema = capture_schema(self.spark, table.spec, table.schema,
                                              self.config.table_path(Layer.BRONZE, table.spec.name))
        except Exception as exc:  # recorded against this table; the others go on
            table.fail(exc, self.config.lake_root)
        table.result.seconds += time.monotonic() - started

    def _finish_tables(self, conn: pymysql.connections.Connection, tables: Sequence[_Table], stop: BinlogPosition,
                       hold_idle: frozenset[str], seen_at: float | None) -> None:
        """Catch the followed tables up to ``stop``, read the chunks a DDL made stale, bring the
        snapshot-only tables to their snapshot's end, then merge silver; the time it takes is
        shared out among the tables."""
        started = time.monotonic()
        self._catch_up(conn, [t for t in tables if t.ok and t.spec.followed], stop, hold_idle, seen_at)
        self._read_chunks_again(conn, tables, hold_idle)
        for table in tables:
            if table.ok and not table.spec.followed:
                self._end_snapshot(conn, table)
        for table in tables:
            if table.ok:
                self._merge_silver(table)
            table.result.seconds += (time.monotonic() - started) / len(tables)

    def _remember(self, tables: Sequence[_Table], stop: BinlogPosition | None) -> None:
        """Keep each table's checkpoint and how far the run read, after a success; forget them
        after a failure (see :meth:`read_to`)."""
        for table in tables:
            if table.ok and table.checkpoint is not None and stop is not None:
                self._checkpoints[table.spec.name] = table.checkpoint
                self._read_to[table.spec.name] = stop
            else:
                self._checkpoints.pop(table.spec.name, None)
                self._read_to.pop(table.spec.name, None)

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
                    table.checkpoint = self._snapshots.run(conn, table.spec, table.schema, table.result, False)
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
        if not copied(table.checkpoint):
            assert table.checkpoint.snapshot is not None
            end = table.checkpoint.snapshot.high_watermark
            self._catch_up(conn, [table], end, frozenset(), None)
            if table.ok and not copied(table.checkpoint):
                # Every chunk was read at one position: no window to replay, nothing was committed.
                done = table.checkpoint.advanced_to(end, self.run_id)
                try:
                    bronze.append_batch(self.spark, self.config.table_path(Layer.BRONZE, table.spec.name), [],
                                        spark_schema(table.schema), done)
                except Exception as exc:  # recorded against this table; the others go on
                    table.fail(exc, self.config.lake_root)
                    return
                table.checkpoint = done
        if table.ok and copied(table.checkpoint):
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
        """Silver takes the batches a long catch-up holds, midway (see ``Commits._hold``). A
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
