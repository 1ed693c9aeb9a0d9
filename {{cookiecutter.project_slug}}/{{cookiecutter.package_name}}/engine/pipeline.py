"""Orchestration: snapshot what is not yet snapshotted, catch up on the binlog, merge silver.

One run is bounded: the binlog is read up to the position current when the run started (or a
given stop position, which the quality checks use to compare silver with the source at one
exact position). Progress is committed with the rows, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pymysql
from pyspark.sql import SparkSession

from . import bronze, silver
from .binlog import BinlogSource, RowChange, Transaction
from .checkpoint import Checkpoint, SnapshotProgress
from .chunking import ChunkLocator, SortKeys, plan_chunks, reading_order
from .config import ProjectConfig
from .errors import ConfigError, FatalError
from .introspect import TableSchema, describe_table
from .positions import BinlogPosition, sequence
from .preflight import run_preflight
from .snapshot import snapshot_batch
from .source import connect, current_position
from .tables import TableSpec
from .typemap import row_converter, spark_schema

log = logging.getLogger(__name__)


@dataclass
class TableResult:
    table: str
    status: str = "success"
    snapshot_rows: int = 0
    binlog_rows: int = 0
    batch: int = 0
    position: str | None = None
    seconds: float = 0.0
    message: str = ""


@dataclass
class _Capture:
    """Binlog-phase state of one table during a catch-up."""

    spec: TableSpec
    schema: TableSchema
    checkpoint: Checkpoint
    start: BinlogPosition  # changes at or before this are already in bronze
    locator: ChunkLocator | None  # set while binlog changes may fall inside a chunk's window
    convert: Callable[[dict], tuple]
    rows: list[tuple] = field(default_factory=list)


class Pipeline:
    def __init__(self, config: ProjectConfig, spark: SparkSession, run_id: str):
        self.config = config
        self.spark = spark
        self.run_id = run_id

    # -- public -----------------------------------------------------------------------

    def ingest(
        self,
        specs: Sequence[TableSpec],
        *,
        full_refresh: bool = False,
        stop: BinlogPosition | None = None,
        require_snapshot: bool = False,
    ) -> list[TableResult]:
        conn = connect(self.config.source)
        try:
            run_preflight(conn)
            results = {s.name: TableResult(s.name) for s in specs}
            schemas = {s.name: describe_table(conn, self.config.source.database, s.source_table, s.key)
                       for s in specs}
            checkpoints: dict[str, Checkpoint] = {}
            for spec in specs:
                started = time.monotonic()
                if full_refresh:
                    self._drop_lake_tables(spec.name)
                checkpoint = self._snapshot(conn, spec, schemas[spec.name], results[spec.name],
                                            require_snapshot)
                checkpoints[spec.name] = checkpoint
                results[spec.name].seconds += time.monotonic() - started
            stop = stop or current_position(conn)
            started = time.monotonic()
            checkpoints = self._catch_up(conn, specs, schemas, checkpoints, stop, results)
            for spec in specs:
                silver.apply(
                    self.spark,
                    bronze_path=self.config.table_path("bronze", spec.name),
                    silver_path=self.config.table_path("silver", spec.name),
                    key=schemas[spec.name].key,
                    upto_batch=checkpoints[spec.name].batch,
                    transform=spec.transform,
                )
                result = results[spec.name]
                result.batch = checkpoints[spec.name].batch
                position = checkpoints[spec.name].position
                result.position = str(position) if position else None
                result.seconds += (time.monotonic() - started) / len(specs)
            return list(results.values())
        finally:
            conn.close()

    # -- snapshot ---------------------------------------------------------------------

    def _snapshot(
        self,
        conn: pymysql.connections.Connection,
        spec: TableSpec,
        schema: TableSchema,
        result: TableResult,
        require_snapshot: bool,
    ) -> Checkpoint:
        path = self.config.table_path("bronze", spec.name)
        checkpoint = bronze.latest_checkpoint(self.spark, path)
        if checkpoint is None:
            if require_snapshot:
                raise ConfigError(f"table {spec.name} has not been ingested yet: run `make ingest TABLE={spec.name}`")
            chunk_size = spec.chunk_size or self.config.defaults.chunk_size
            chunks = plan_chunks(conn, schema, chunk_size, self.config.defaults.even_distribution)
            log.info("%s: snapshot planned in %d chunk(s) of ~%d rows", spec.name, len(chunks), chunk_size)
            checkpoint = Checkpoint(spec.name, 0, "snapshot", self.run_id,
                                    snapshot=SnapshotProgress(schema.key, tuple(chunks)))
        elif checkpoint.snapshot is not None and checkpoint.snapshot.key != schema.key:
            raise FatalError(
                f"table {spec.name}: key changed from {checkpoint.snapshot.key} to {schema.key}; "
                f"re-snapshot with `make ingest TABLE={spec.name} FULL_REFRESH=1`"
            )
        else:
            lake_columns = [c for c in self.spark.read.format("delta").load(path).columns
                            if c not in bronze.META_COLUMNS]
            if lake_columns != list(schema.column_names):
                raise _schema_changed(spec.name, f"source columns {list(schema.column_names)} differ "
                                      f"from bronze columns {lake_columns}")
        if checkpoint.phase != "snapshot" or checkpoint.snapshot is None:
            return checkpoint
        pending = reading_order(checkpoint.snapshot.pending)
        total = len(checkpoint.snapshot.chunks)
        per_commit = self.config.defaults.chunks_per_commit
        started = time.monotonic()
        for first in range(0, len(pending), per_commit):
            batch = pending[first : first + per_commit]
            attempt = Checkpoint(spec.name, checkpoint.batch + 1, "snapshot", self.run_id,
                                 snapshot=checkpoint.snapshot)
            watermarks, rows = snapshot_batch(
                self.spark, profile=self.config.source, table=schema, chunks=batch,
                bronze_path=path, checkpoint=attempt,
            )
            checkpoint = Checkpoint(spec.name, attempt.batch, "snapshot", self.run_id,
                                    snapshot=checkpoint.snapshot.with_done(watermarks))
            result.snapshot_rows += rows
            elapsed = max(time.monotonic() - started, 1e-6)
            log.info("%s: snapshot chunks %d/%d, %d rows, %.0f rows/s", spec.name,
                     len(checkpoint.snapshot.done), total, result.snapshot_rows,
                     result.snapshot_rows / elapsed)
        return checkpoint

    # -- binlog -----------------------------------------------------------------------

    def _catch_up(
        self,
        conn: pymysql.connections.Connection,
        specs: Sequence[TableSpec],
        schemas: dict[str, TableSchema],
        checkpoints: dict[str, Checkpoint],
        stop: BinlogPosition,
        results: dict[str, TableResult],
    ) -> dict[str, Checkpoint]:
        captures = {s.name: self._capture(conn, s, schemas[s.name], checkpoints[s.name]) for s in specs}
        by_source = {c.schema.table: c for c in captures.values()}
        start = min(c.start for c in captures.values())
        if start >= stop:
            return {name: c.checkpoint for name, c in captures.items()}
        source = BinlogSource(
            self.config.source, self._server_id(), self.config.source.database,
            {c.schema.table: c.schema.key for c in captures.values()},
        )
        log.info("binlog: reading %s .. %s", start, stop)
        position = start
        buffered = 0
        started = time.monotonic()
        for transaction in source.transactions(start, stop):
            buffered += self._route(transaction, by_source)
            position = transaction.end
            if buffered >= self.config.defaults.flush_rows:
                self._flush(captures, position, results)
                buffered = 0
                log.info("binlog: at %s of %s, %.0f s in", position, stop, time.monotonic() - started)
        self._flush(captures, max(position, start), results)
        return {name: c.checkpoint for name, c in captures.items()}

    def _capture(self, conn: pymysql.connections.Connection, spec: TableSpec,
                 schema: TableSchema, checkpoint: Checkpoint) -> _Capture:
        delivery = spec.delivery or self.config.defaults.delivery
        progress = checkpoint.snapshot
        if checkpoint.position is not None:
            start = checkpoint.position
        elif progress is not None and progress.done:
            start = progress.low_watermark
        else:
            raise FatalError(f"table {spec.name}: checkpoint has neither a position nor chunks")
        locator = None
        if delivery == "exactly_once" and progress is not None and start < progress.high_watermark:
            locator = ChunkLocator(progress.chunks, SortKeys(conn, schema.key_columns))
        return _Capture(spec, schema, checkpoint, start, locator, row_converter(schema, "binlog"))

    def _route(self, transaction: Transaction, by_source: dict[str, _Capture]) -> int:
        if transaction.ddl is not None:
            capture = by_source.get(transaction.ddl.table)
            if capture is not None and transaction.end > capture.start:
                raise _schema_changed(capture.spec.name,
                                      f"{transaction.ddl.statement!r} at {transaction.end}")
        changes: dict[str, list[RowChange]] = {}
        for change in transaction.changes:
            capture = by_source.get(change.table)
            if capture is not None and change.position > capture.start:
                changes.setdefault(change.table, []).append(change)
        added = 0
        for table, rows in changes.items():
            capture = by_source[table]
            for change in self._after_watermarks(capture, rows):
                capture.rows.append(self._bronze_row(capture, change))
                added += 1
        return added

    @staticmethod
    def _after_watermarks(capture: _Capture, changes: list[RowChange]) -> list[RowChange]:
        """Exactly-once: drop a change its chunk's snapshot read already contains."""
        progress = capture.checkpoint.snapshot
        if capture.locator is None or progress is None:
            return changes
        window = [c for c in changes if c.position <= progress.high_watermark]
        if not window:
            return changes
        keys = [tuple(c.values[k] for k in capture.schema.key) for c in window]
        chunks = capture.locator.locate(keys)
        stale = {id(c) for c, chunk in zip(window, chunks, strict=True)
                 if c.position <= progress.done[chunk.index]}
        return [c for c in changes if id(c) not in stale]

    def _bronze_row(self, capture: _Capture, change: RowChange) -> tuple:
        if len(change.values) != len(capture.schema.columns) or any(
            name not in change.values for name in capture.schema.column_names
        ):
            raise _schema_changed(capture.spec.name, f"a row at {change.position} has columns "
                                  f"{sorted(change.values)}")
        values = capture.convert(change.values)
        return (
            *values,
            change.op,
            sequence(change.position, change.row_index),
            change.position.file,
            change.position.offset,
            dt.datetime.fromtimestamp(change.timestamp, dt.UTC),
            dt.datetime.now(dt.UTC),
            self.run_id,
            capture.checkpoint.batch + 1,
        )

    def _flush(self, captures: dict[str, _Capture], position: BinlogPosition,
               results: dict[str, TableResult]) -> None:
        for name, capture in captures.items():
            if position <= capture.start and not capture.rows:
                continue
            target = max(position, capture.start)
            checkpoint = capture.checkpoint.advanced_to(target, self.run_id)
            schema = bronze.bronze_schema(spark_schema(capture.schema))
            frame = self.spark.createDataFrame(capture.rows, schema)
            bronze.append(frame, self.config.table_path("bronze", name), checkpoint)
            results[name].binlog_rows += len(capture.rows)
            capture.checkpoint = checkpoint
            capture.start = target
            capture.rows = []
            if capture.locator is not None and checkpoint.snapshot is None:
                capture.locator = None

    # -- helpers ----------------------------------------------------------------------

    def _server_id(self) -> int:
        low, high = self.config.server_ids
        return low + os.getpid() % (high - low + 1)

    def _drop_lake_tables(self, name: str) -> None:
        jvm = self.spark._jvm  # Hadoop FileSystem works for local paths and s3a:// alike
        hadoop_conf = self.spark._jsc.hadoopConfiguration()
        for layer in ("bronze", "silver"):
            path = jvm.org.apache.hadoop.fs.Path(self.config.table_path(layer, name))
            path.getFileSystem(hadoop_conf).delete(path, True)
        log.info("%s: full refresh, dropped bronze and silver", name)


def _schema_changed(table: str, detail: str) -> FatalError:
    return FatalError(
        f"table {table}: schema change ({detail}) is not supported yet; nothing was written past "
        f"the last checkpoint; re-snapshot with `make ingest TABLE={table} FULL_REFRESH=1`"
    )
