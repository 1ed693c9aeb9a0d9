"""A DDL met mid-stream, applied to a captured table at its exact binlog position.

Per the table's ``on_schema_change``, a DDL stops the table (``stop``), is ignored with the rows
cut to the lake's columns from then on (``ignore``), or is applied: the table's rows before it
are committed first, then its effect (``cdc.evolution`` plans it, ``sink.evolve`` commits it to
bronze with the checkpoint at the DDL's end), so every bronze batch has one set of columns. A
TRUNCATE is recorded as a delete of every key. Chunks of a snapshot read after the DDL hold rows
it already changed, read with the old columns: they are read again. A DDL that cannot be applied
exactly stops the table.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pymysql
from pyspark.sql import SparkSession

from ..config.project import Layer, ProjectConfig, SchemaPolicy
from ..sink import bronze, evolve, history
from ..source import ddl as ddl_text
from ..source.introspect import describe_table
from ..source.typemap import described_schema
from ..state.checkpoint import Checkpoint, Phase, SnapshotProgress
from ..state.lakechange import Kind, LakeChange
from ..state.positions import BinlogPosition, sequence
from ..tables import CascadePolicy
from .binlog import SchemaChange, Transaction
from .commits import Commits
from .evolution import plan
from .tablecapture import TableCapture, as_table_error, schema_changed, table_stopped

log = logging.getLogger(__name__)

# A DDL that may add, drop or change a foreign key.
FOREIGN_KEY_DDL = re.compile(r"\b(FOREIGN\s+KEY|REFERENCES|DROP\s+CONSTRAINT)\b", re.IGNORECASE)
# Columns of the lake's own, which a source column must never take (nor overwrite in a rewrite).
LAKE_COLUMNS = frozenset({*bronze.META_COLUMNS, *history.CHANGE_META, *history.HISTORY_META, "_rank", "_at"})


class SchemaChanges:
    """Applies the DDL of one catch-up's transactions to the tables they change."""

    def __init__(self, config: ProjectConfig, spark: SparkSession, run_id: str, commits: Commits):
        self.config = config
        self.spark = spark
        self.run_id = run_id
        self.commits = commits

    def apply(self, conn: pymysql.connections.Connection, transaction: Transaction,
              by_source: Mapping[str, TableCapture], before: BinlogPosition) -> None:
        """Apply a DDL to each captured table it changes, after committing that table's rows up
        to ``before`` (the end of the previous transaction)."""
        for change in transaction.schema_changes:
            capture = by_source.get(change.table)
            if capture is None or capture.failure is not None or transaction.end <= capture.start:
                continue
            try:
                self._apply(conn, capture, change, transaction, before)
            except Exception as exc:  # this table stops; the others go on
                capture.fail(as_table_error(exc, capture.spec.name, self.config.lake_root))

    def _apply(self, conn: pymysql.connections.Connection, capture: TableCapture, change: SchemaChange,
               transaction: Transaction, before: BinlogPosition) -> None:
        name = capture.spec.name
        what = f"{change.statement[:200]!r} at {change.position}"
        if capture.spec.on_cascade is CascadePolicy.APPLY and FOREIGN_KEY_DDL.search(change.statement):
            # The cascades applied are those the run began with: from here on they may be others.
            raise table_stopped(name, f"schema change {what} may change the foreign keys whose cascades it applies "
                                "(on_cascade='apply')", change.position)
        policy = capture.spec.on_schema_change
        if policy is SchemaPolicy.STOP:
            raise table_stopped(name, f"schema change {what} (the table module sets on_schema_change='stop')",
                                change.position)
        if policy is SchemaPolicy.IGNORE:
            log.warning("%s: schema change %s ignored (on_schema_change='ignore'): the lake keeps its columns, "
                        "a column the source added is left out, one it removed is NULL from now on", name, what)
            capture.project = True
            return
        # Chunks read at or after the DDL's position hold rows the DDL already changed, read with
        # the columns the run started with.
        progress = capture.checkpoint.snapshot
        read_after = sorted(i for i, at in (progress.done if progress else {}).items() if at >= transaction.end)
        if read_after and not capture.spec.followed:
            raise schema_changed(name, f"{what}, while the snapshot's chunks were read", change.position)
        parsed = ddl_text.parse(change.statement)
        if parsed.truncate:
            checkpoint = self._truncate(capture, change, transaction, before, progress, read_after)
        else:
            evolved = self._evolve(conn, capture, change, transaction, before, parsed, progress, read_after, what)
            if evolved is None:
                return
            checkpoint = evolved
        capture.checkpoint = checkpoint
        capture.start = transaction.end
        capture.recent.clear()  # silver reads bronze from here on: its batches changed shape

    def _truncate(self, capture: TableCapture, change: SchemaChange, transaction: Transaction,
                  before: BinlogPosition, progress: SnapshotProgress | None, read_after: Sequence[int]) -> Checkpoint:
        """Record a TRUNCATE in bronze (a delete of every key); returns the checkpoint committed."""
        self.commits.commit_before(capture, before)
        checkpoint = self._ddl_checkpoint(capture, change, transaction)
        assert progress is not None or not read_after
        evolve.truncate_bronze(self.spark, self.config.table_path(Layer.BRONZE, capture.spec.name),
                               capture.schema.key, checkpoint, transaction.end, transaction.timestamp or 0,
                               self.run_id, [sequence(progress.done[i]) for i in read_after] if progress else [])
        log.info("%s: TRUNCATE at %s recorded (silver is emptied there)", capture.spec.name, change.position)
        return checkpoint

    def _evolve(self, conn: pymysql.connections.Connection, capture: TableCapture, change: SchemaChange,
                transaction: Transaction, before: BinlogPosition, parsed: ddl_text.TableDdl,
                progress: SnapshotProgress | None, read_after: Sequence[int], what: str) -> Checkpoint | None:
        """Apply a DDL's effect on the columns to bronze; returns the checkpoint committed, or None
        when it changes no column."""
        name = capture.spec.name
        now = describe_table(conn, self.config.source.database, capture.schema.table, capture.spec.key)
        evolution = plan(capture.schema, parsed, now, LAKE_COLUMNS)
        if isinstance(evolution, str):
            raise schema_changed(name, f"{what}: {evolution}", change.position)
        if not evolution.changes:
            log.info("%s: schema change %s changes no column (%s)", name, what, "; ".join(parsed.ignored))
            return None
        self.commits.commit_before(capture, before)
        checkpoint = replace(self._ddl_checkpoint(capture, change, transaction), schema_changes=evolution.changes)
        if read_after:
            assert progress is not None
            checkpoint = self._read_again(capture, checkpoint, progress, read_after, what)
        evolve.evolve_bronze(self.spark, self.config.table_path(Layer.BRONZE, name), checkpoint.schema_changes,
                             described_schema(evolution.schema), checkpoint, self.config.defaults.table_features)
        capture.schema = evolution.schema  # (its image converters follow: ``TableCapture.converter``)
        log.info("%s: schema change %s applied to bronze (%s)", name, what,
                 ", ".join(f"{c.kind.value} {c.column}" for c in evolution.changes))
        return checkpoint

    @staticmethod
    def _read_again(capture: TableCapture, checkpoint: Checkpoint, progress: SnapshotProgress,
                    chunks: Sequence[int], what: str) -> Checkpoint:
        """``checkpoint`` with ``chunks`` to be read again, and their rows removed from the lake
        (by the same commit as the schema change: their ``_seq`` is their read's watermark)."""
        seqs = sorted({str(sequence(progress.done[i])) for i in chunks})
        pending = replace(progress, done={i: at for i, at in progress.done.items() if i not in set(chunks)})
        log.info("%s: schema change %s came while the snapshot was read: %d chunk(s) read after it are read "
                 "again with the new columns", capture.spec.name, what, len(chunks))
        forget = LakeChange(Kind.FORGET, "_seq", value=",".join(seqs))
        return replace(checkpoint, phase=Phase.SNAPSHOT, snapshot=pending,
                       schema_changes=(*checkpoint.schema_changes, forget))

    def _ddl_checkpoint(self, capture: TableCapture, change: SchemaChange, transaction: Transaction) -> Checkpoint:
        gtid = self.commits.gtid.text_after(transaction)
        checkpoint = capture.checkpoint.advanced_to(transaction.end, self.run_id, gtid=gtid)
        return replace(checkpoint, ddl=change.statement[:200])
