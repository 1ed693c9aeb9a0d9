"""When a catch-up commits its tables, and in what order.

A flush commits each table's buffered rows at a transaction boundary, as one bronze batch whose
checkpoint (the binlog position, and the GTID position there when known) is in the same Delta
commit as the rows: the batch and the position it reaches land together or not at all. For each
table, in order: the rows its pending parent changes cascade into it are derived (``cascading``),
bronze is appended (:func:`bronze.append_batch`), the capture moves its start past the batch, and
the batch is held for silver, which merges the held batches midway once they reach
``silver.HELD_ROWS`` rows (the rest after the catch-up). A table that fails here stops on its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pymysql
from pyspark.sql import SparkSession

from ..config.project import Layer, ProjectConfig
from ..sink import bronze
from ..sink.arrows import arrow_schema
from ..sink.silver import HELD_ROWS
from ..source.cascades import Cascade
from ..source.connection import gtid_position_at
from ..source.typemap import binlog_converter, spark_schema
from ..state.checkpoint import Phase
from ..state.positions import BinlogPosition, after_transaction
from . import cascading
from .binlog import Transaction
from .bronzerows import BronzeRows
from .routing import meta, read_with
from .tablecapture import TableCapture, as_table_error

log = logging.getLogger(__name__)


class GtidTrail:
    """The GTID position at the last transaction read (its end, and the GTID position there), kept
    up to date from each transaction's GTID; None where unknown. Each commit records it."""

    def __init__(self, known: tuple[BinlogPosition, str] | None):
        """``known``: a binlog position and the GTID position there, from an earlier catch-up
        (asking the server costs it a read of the binlog file up to the position)."""
        self.at = known

    def start(self, conn: pymysql.connections.Connection, position: BinlogPosition) -> None:
        """Reading starts at ``position``: ask the server for the GTID position there, unless known."""
        if self.at is None or self.at[0] != position:
            known = gtid_position_at(conn, position)
            self.at = (position, known) if known is not None else None

    def after(self, transaction: Transaction) -> tuple[BinlogPosition, str] | None:
        """The GTID position once ``transaction`` (the next one read) is logged."""
        if self.at is None:
            return None
        after = after_transaction(self.at[1], transaction.gtid)
        return (transaction.end, after) if after is not None else None

    def advance(self, transaction: Transaction) -> None:
        self.at = self.after(transaction)

    def text(self, position: BinlogPosition) -> str | None:
        """The GTID position at ``position``, for its checkpoint (None where unknown)."""
        return _text(self.at, position)

    def text_after(self, transaction: Transaction) -> str | None:
        """The GTID position at the end of ``transaction`` (the next one read), for its checkpoint."""
        return _text(self.after(transaction), transaction.end)


def _text(at: tuple[BinlogPosition, str] | None, position: BinlogPosition) -> str | None:
    """The GTID position ``at`` holds for ``position``: None when it holds another position's,
    or none logged yet."""
    if at is None or at[0] != position:
        return None
    return at[1] or None


class Commits:
    """The flush and commit policy of one catch-up."""

    def __init__(self, config: ProjectConfig, spark: SparkSession, run_id: str, gtid: GtidTrail,
                 merge_silver: Callable[[TableCapture], None] | None = None):
        """``merge_silver``: merges a table's batches held in ``recent`` into silver (see
        :meth:`_hold`); without it, silver reads batches beyond what may be held from bronze."""
        self.config = config
        self.spark = spark
        self.run_id = run_id
        self.gtid = gtid
        self.merge_silver = merge_silver

    def flush(self, by_source: Mapping[str, TableCapture], position: BinlogPosition, *,
              final: bool = False, synced_at: float | None = None) -> None:
        """Commit each table's buffered rows with ``position`` as its new checkpoint.

        A table without rows commits only its advance, and only at the end of the catch-up
        (a flush in between has nothing to save for it), unless its advance is held."""
        for capture in by_source.values():
            # Once per table (after its snapshot, or a checkpoint older than synced_at): an empty
            # commit, so its freshness is known from the first catch-up on, not only after a change.
            first_sync = synced_at is not None and capture.checkpoint.synced_at is None
            # Also once when its last chunks were read (again, after a DDL) and nothing followed
            # them: the commit ends its snapshot phase.
            must = first_sync or (final and capture.checkpoint.phase is Phase.SNAPSHOT
                                  and capture.checkpoint.snapshot is not None and capture.checkpoint.snapshot.complete)
            # And at the end of a run that no longer holds the table's idle advance (follow's
            # stop): what it read past its checkpoint in earlier cycles is committed, even when
            # this range was empty.
            must = must or (final and not capture.hold_idle and capture.checkpoint.position is not None
                            and capture.start > capture.checkpoint.position)
            if capture.failure is not None or (position <= capture.start and not capture.rows and not must
                                               and not capture.pending):
                continue
            if capture.pending:
                try:
                    self._derive_cascades(capture)
                except Exception as exc:  # this table stops; the others go on
                    capture.fail(as_table_error(exc, capture.spec.name, self.config.lake_root))
                    continue
            target = max(position, capture.start)
            if not capture.rows and not must and (not final or idle_advance_held(capture, target)):
                continue
            self._commit(capture, target, synced_at)

    def commit_before(self, capture: TableCapture, before: BinlogPosition) -> None:
        """Commit what ``capture`` buffered up to ``before`` (a DDL's effect is committed next);
        raises the table's failure if that commit failed."""
        if capture.rows or capture.pending:
            self.flush({capture.schema.table: capture}, before)
            if capture.failure is not None:
                raise capture.failure

    def _commit(self, capture: TableCapture, target: BinlogPosition, synced_at: float | None) -> None:
        checkpoint = capture.checkpoint.advanced_to(target, self.run_id, synced_at, self.gtid.text(target))
        try:
            source = spark_schema(capture.schema)
            rows = capture.rows.to_arrow(arrow_schema(bronze.bronze_schema(source)), len(source.fields))
            written = bronze.append_batch(self.spark, self.config.table_path(Layer.BRONZE, capture.spec.name),
                                          rows, source, checkpoint)
        except Exception as exc:  # one table's failed commit never stops the others
            capture.fail(as_table_error(exc, capture.spec.name, self.config.lake_root))
            return
        capture.binlog_rows += len(capture.rows)
        capture.checkpoint = checkpoint
        capture.start = target
        capture.rows = BronzeRows()
        if capture.locator is not None and checkpoint.snapshot is None:
            capture.locator = None
        self._hold(capture, checkpoint.batch, written)

    def _derive_cascades(self, capture: TableCapture) -> None:
        """Add to ``capture.rows`` the changes its pending parent changes cascade into it."""
        pending, capture.pending = capture.pending, []
        schema = capture.schema
        convert = {c.name: binlog_converter(c) for c in schema.columns}
        wanted: dict[Cascade, set[tuple[Any, ...]]] = {}
        for p in pending:
            old = tuple(cascading.normal(convert[c](p.change.before[pc]))
                        for c, pc in zip(p.cascade.columns, p.cascade.parent_columns, strict=True))
            wanted.setdefault(p.cascade, set()).add(old)
        current = cascading.candidates(self.spark, self.config.table_path(Layer.BRONZE, capture.spec.name),
                                       schema.column_names, schema.key, wanted)
        derived = cascading.derive(
            schema.column_names, schema.key, current, capture.rows, pending, convert,
            lambda op, change, index: meta(capture, op, change.position, index, change.timestamp, self.run_id),
            stale=None if capture.locator is None else lambda keys, at: read_with(capture, keys, [at] * len(keys)))
        if derived:
            log.info("%s: %d row(s) changed by %d cascading parent change(s) derived", capture.spec.name,
                     len(derived), len(pending))
        capture.rows.add_rows(derived, len(schema.columns))

    def _hold(self, capture: TableCapture, batch: int, written: pa.Table) -> None:
        """Keep the bronze batch just committed for silver. Once the held batches reach
        ``HELD_ROWS`` rows, a table past its snapshot has them merged into silver now (from memory,
        in Arrow unless the table needs Delta's MERGE, while the reader process decodes on), so a
        long catch-up holds a bounded number of rows and never leaves silver a batch too big to
        merge from memory. During the snapshot silver takes nothing but snapshot rows
        (``reader._seeds_silver``): the held batches are dropped and silver reads them from
        bronze at the end."""
        capture.recent[batch] = written
        if sum(t.num_rows for t in capture.recent.values()) < HELD_ROWS:
            return
        past_snapshot = capture.checkpoint.phase is Phase.BINLOG and capture.locator is None
        if self.merge_silver is not None and past_snapshot:
            self.merge_silver(capture)
        capture.recent.clear()


def idle_advance_held(capture: TableCapture, target: BinlogPosition) -> bool:
    """Whether a table with no new rows keeps its checkpoint instead of committing ``target``.

    Only in follow mode (``hold_idle``), only in the binlog phase, and never across a binlog
    file: the committed position then stays in the file being written, so purging older files
    never strands the table. The advance is not lost: follow mode reads on from it in memory
    (``new_capture(read_to=)``), and a restarted run re-reads a range with none of its rows."""
    durable = capture.checkpoint.position
    return capture.hold_idle and durable is not None and durable.file == target.file
