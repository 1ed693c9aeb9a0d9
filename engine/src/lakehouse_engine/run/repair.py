"""Repair: re-read from the source only the rows reconciliation found wrong in silver.

A repair of one table, under its ingest lock (capture of every other table goes on; a table a
``follow`` holds is repaired by that follow between two cycles, see ``run.repairs``):

1. Catch up (an ordinary ingest), so the table follows the binlog from a checkpoint ``C``.
2. Reconcile silver with the source (``dq``'s comparison, every differing bucket compared key
   by key): the keys missing from silver, not in the source, or holding other values.
3. Inside one consistent snapshot at position ``W`` (``W >= C``), SELECT the rows of those keys.
   One bronze batch records them as snapshot reads (``r``) and the keys the source no longer has
   as deletes (``d``), every row sequenced at ``W`` above the snapshot reads made there; its
   checkpoint keeps position ``C`` and is marked ``repair``. Silver MERGEs the batch like any other.
4. Catch up again, from ``C``: the changes between ``C`` and ``W`` are read once more.

Why step 4 cannot undo step 3: silver applies a change only when its sequence is above the row's
(``_seq``), and every change at or before ``W`` sequences below the repair's rows; a key the
repair deleted can only come back by an insert after ``W`` (an insert before ``W`` was followed
by a delete before ``W``, as the key was absent at ``W``, and the newest change of a key wins).
Bronze stays a complete changelog: a rebuild of silver from it gives the repaired state.

5. Reconcile again and report both outcomes.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from pyspark.sql import SparkSession

from ..config.project import Layer, ProjectConfig
from ..errors import FatalError
from ..ops import Op
from ..quality.dq import Compared, NotComparable, compare_with_source, compares_values, silver_state
from ..quality.reconcile import KeyDifference
from ..sink import bronze, silver
from ..source.connection import (
    connection,
    literal_percent,
    qualified,
    query_keys,
    quote_ident,
    start_consistent_snapshot,
)
from ..source.introspect import TableSchema
from ..source.typemap import row_converter, select_list, spark_schema
from ..state.positions import BinlogPosition, sequence
from ..tables import TableSpec
from .results import RunStatus

log = logging.getLogger(__name__)

ALL_BUCKETS = 1_000_000  # repair compares every differing bucket key by key
MAX_REPAIRED_KEYS = 1_000_000  # more than this: a full refresh is the better repair


@dataclass
class RepairResult:
    """One table's ``repair`` outcome, as ``run_results.json`` records it."""

    table: str
    status: RunStatus = RunStatus.SUCCESS
    keys_found: int = 0  # differing keys found by the first reconciliation
    rows_reread: int = 0  # of those, rows the source holds: written again
    keys_deleted: int = 0  # keys the source does not hold: deleted from silver
    batch: int | None = None  # the bronze batch of the repair
    watermark: str | None = None  # the binlog position the rows were read at
    before: str = ""  # the first reconciliation's outcome
    after: str = ""  # the second one's
    message: str = ""
    category: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, recorded: dict[str, Any]) -> RepairResult:
        return cls(**{**recorded, "status": RunStatus(recorded["status"])})


def repair_or_error(config: ProjectConfig, spark: SparkSession, ingest: Any, spec: TableSpec,
                    run_id: str) -> RepairResult:
    """:func:`repair_table`, its failure recorded as the table's result (the others go on)."""
    from ..cdc.tablecapture import as_table_error

    try:
        return repair_table(config, spark, ingest, spec, run_id)
    except Exception as exc:
        error = as_table_error(exc, spec.name, config.lake_root)
        return RepairResult(spec.name, RunStatus.ERROR, message=str(error), category=error.category)


def repair_table(config: ProjectConfig, spark: SparkSession, ingest: Any, spec: TableSpec,
                 run_id: str) -> RepairResult:
    """Repair ``spec``'s silver (see the module docstring). ``ingest(specs)`` catches tables up
    (the pipeline's ``ingest``). A failed repair raises; a repair that leaves differences (the
    source changed those keys meanwhile, say) returns ``status`` fail."""
    result = RepairResult(spec.name)
    if not compares_values(spec):
        raise FatalError(f"table {spec.name}: silver cannot be compared with the source value by value "
                         "(it starts without a snapshot, has a silver transform or compare_values=False); "
                         f"re-snapshot it with `make ingest TABLE={spec.name} FULL_REFRESH=1`", table=spec.name)
    _catch_up(ingest, spec)
    compared = _compared(config, spark, spec)
    found = compared.values
    assert found is not None
    result.before = found.observed(spec.name)
    differing = found.differing_keys()
    result.keys_found = len(differing)
    if not differing:
        if not found.success:  # counts differ with no key to name: nothing a re-read can fix
            raise FatalError(f"table {spec.name}: {result.before}; no key could be named to re-read; re-snapshot "
                             f"it with `make ingest TABLE={spec.name} FULL_REFRESH=1`", table=spec.name)
        result.after = result.before
        log.info("%s: nothing to repair: %s", spec.name, result.before)
        return result
    if len(differing) > MAX_REPAIRED_KEYS:
        raise FatalError(f"table {spec.name}: {len(differing)} keys differ from the source; re-snapshot it "
                         f"with `make ingest TABLE={spec.name} FULL_REFRESH=1`", table=spec.name)
    batch, watermark, reread, deleted = rewrite_keys(config, spark, spec, compared.schema, differing, run_id)
    result.batch, result.watermark = batch, str(watermark)
    result.rows_reread, result.keys_deleted = reread, deleted
    log.info("%s: repair batch %d re-read %d rows and deleted %d keys at %s", spec.name, batch, reread,
             deleted, watermark)
    _catch_up(ingest, spec)
    after = _compared(config, spark, spec).values
    assert after is not None
    result.after = after.observed(spec.name)
    if not after.success:
        result.status, result.category = RunStatus.FAIL, "data quality"
        result.message = f"table {spec.name}: still differs after the repair: {result.after}"
    return result


def _catch_up(ingest: Any, spec: TableSpec) -> None:
    """Ingest ``spec``; its own error (not the run's summary of it) when it fails."""
    from .pipeline import TablesFailed

    try:
        ingest([spec])
    except TablesFailed as failed:
        raise failed.errors.get(spec.name, failed) from None


def _compared(config: ProjectConfig, spark: SparkSession, spec: TableSpec) -> Compared:
    """``spec`` reconciled with every differing bucket compared key by key."""
    state = silver_state(spark, config, spec)
    outcome = compare_with_source(config, spark, [spec], {spec.name: state}, drilled=ALL_BUCKETS,
                                  count_keys=False).tables[spec.name]
    if isinstance(outcome, NotComparable):
        raise outcome
    if outcome.values is None or outcome.values.not_compared is not None:
        reason = (outcome.values.observed(spec.name) if outcome.values is not None else
                  "it has no value comparison")
        raise FatalError(f"table {spec.name}: cannot repair: {reason}", table=spec.name)
    return outcome


def rewrite_keys(config: ProjectConfig, spark: SparkSession, spec: TableSpec, schema: TableSchema,
                 keys: Sequence[KeyDifference], run_id: str) -> tuple[int, BinlogPosition, int, int]:
    """Write the repair batch of ``keys`` to bronze and merge it into silver; returns the batch,
    the position the rows were read at, the rows re-read and the keys deleted."""
    bronze_path = config.table_path(Layer.BRONZE, spec.name)
    checkpoint = bronze.latest_checkpoint(spark, bronze_path)
    if checkpoint is None or checkpoint.position is None or checkpoint.snapshot is not None:
        raise FatalError(f"table {spec.name}: its snapshot window is still open; run "
                         f"`make ingest TABLE={spec.name}` and repair again", table=spec.name)
    wanted = [k.values for k in keys]
    watermark, rows = read_keys(config, schema, wanted)
    key_at = [schema.column_names.index(k) for k in schema.key]
    present = {tuple(row[i] for i in key_at) for row in rows}
    gone = [key for key in wanted if key not in present]
    batch = checkpoint.batch + 1
    now = dt.datetime.now(dt.UTC)

    def meta(op: Op, index: int) -> tuple[Any, ...]:
        # Above index 0, which snapshot rows read at this same position carry (a table unchanged
        # since its snapshot has W as its watermark): silver applies only a newer _seq. Deletes
        # before re-reads: if a key is listed both ways (one key spelled two ways, say), the
        # re-read row is the one silver keeps.
        return (op.value, sequence(watermark, index), watermark.file, watermark.offset, None, now, run_id, batch)

    written = [(*row, *meta(Op.READ, 2)) for row in rows]
    for key in gone:
        values: list[Any] = [None] * len(schema.columns)
        for index, value in zip(key_at, key, strict=True):
            values[index] = value
        written.append((*values, *meta(Op.DELETE, 1)))
    repair = replace(checkpoint, batch=batch, run_id=run_id, repair=True)
    bronze.append_batch(spark, bronze_path, written, spark_schema(schema), repair)
    silver.apply(spark, bronze_path=bronze_path, silver_path=config.table_path(Layer.SILVER, spec.name),
                 key=schema.key, upto_batch=batch, transform=spec.transform, table=spec.name,
                 scd_type=spec.scd_type, table_features=config.defaults.table_features)
    return batch, watermark, len(rows), len(gone)


def read_keys(config: ProjectConfig, schema: TableSchema,
              keys: Sequence[tuple[Any, ...]]) -> tuple[BinlogPosition, list[tuple[Any, ...]]]:
    """The source rows of ``keys`` (canonical tuples, like the snapshot's) in one read view,
    and the binlog position of that view."""
    convert = row_converter(schema, "select")
    names = ", ".join(quote_ident(k) for k in schema.key)
    head = literal_percent(f"SELECT {select_list(schema)} FROM {qualified(schema.schema, schema.table)} "
                           f"WHERE ({names}) IN ")
    with connection(config.source) as conn:
        watermark = start_consistent_snapshot(conn)
        rows = [convert(row) for row in query_keys(conn, head, len(schema.key), keys)]
        conn.commit()
    return watermark, rows
