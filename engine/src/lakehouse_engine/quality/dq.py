"""Quality checks: silver compared with the source at one exact binlog position, read-only.

``dq`` never writes to the lake. A scheduled check is therefore safe next to an ingest or a
``follow`` run of the same tables (it takes no table lock and cannot race their commits), and it
never snapshots or catches up a table: a table missing from the lake (a fresh CI runner whose
lake is empty, say) is one failed check naming the lake, not a copy of the source.

How one table is compared, for every selected table at once:

1. Silver's newest merge names the bronze batch it applied; that batch's checkpoint says up to
   which binlog position ``R`` silver holds every change. Silver is read at the Delta version
   looked at, so a merge committed meanwhile by another run does not move it.
2. The source is counted inside one consistent snapshot, at an exact position ``P``.
3. The binlog between ``R`` and ``P`` is read (as a replica, nothing is written) and the table's
   net row change in it carries the count from ``P`` back (or forward) to ``R``. Silver is
   checked against that count: both sides are the table at ``R``, the compared position.
4. In the same read view, silver is reconciled with the source value by value (``reconcile``):
   row fingerprints summed per key bucket on both sides, the keys changed between ``R`` and
   ``P`` left out of both, differing buckets compared key by key and named in the report.

On a local lake these steps are taken without a JVM for every table whose check passes
(``localdq``: silver read from its files, fingerprints over Arrow); Spark, here, checks the rest
in the same read view, and every table of a lake it alone can read.

A table whose snapshot's watermark window is still open (changes of the table between ``R`` and
the window's end, which its next ingest filters) has no single position yet: its check fails,
asking for an ingest first.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import pymysql
from pyspark.sql import DataFrame, SparkSession

from ..cdc.binlog import BinlogSource, RowChange, Transaction
from ..config.project import Layer, ProjectConfig, SourceProfile
from ..errors import DataQualityError, IngestError
from ..sink import history
from ..sink.log import deltalog, localfiles
from ..sink.log.commitfile import Commit
from ..source.connection import binlog_sizes, connection
from ..source.introspect import TableSchema
from ..source.serverids import ServerIds
from ..source.typemap import binlog_converter
from ..state.checkpoint import Checkpoint
from ..state.positions import BinlogPosition
from ..tables import TableSpec
from . import gxload
from .freshness import LagMeasurement, silver_lag
from .reconcile import DRILLED_BUCKETS, Reconciliation, too_many_changed
from .silverpass import KeyFacts, key_facts
from .sourceview import PendingView
from .sums import ToReconcile, reconcile_all
from .uniqueness import compared_bytewise, key_uniqueness

if TYPE_CHECKING:
    from .checks import QualityResult, UniqueKey
    from .expectations import Measured

log = logging.getLogger(__name__)

ALIGNMENT_CHECK = "silver at one source binlog position"


@dataclass(frozen=True)
class SilverState:
    """Silver as of its newest merge: the Delta version to read, and the binlog position it is
    exact at (``position``) unless the table changed before ``window_end`` (its snapshot's high
    watermark while the watermark window is open, else ``position`` itself)."""

    version: int
    batch: int
    position: BinlogPosition
    window_end: BinlogPosition
    synced_at: float | None = None  # when ``position`` was last the source's head (freshness)


class NotComparable(DataQualityError):
    """Silver of a table cannot be compared with the source (yet); the message says why."""


class LakeLog(Protocol):
    """How ``dq`` reads a Delta table's commits: through Delta (:class:`SparkLog`) or, on a local
    lake, from the commit files themselves (:class:`LocalLog`), which needs no JVM."""

    def newest_version(self, path: str) -> int: ...  # -1: no table

    def commits_back(self, path: str, newest: int | None = None) -> Iterator[Commit]: ...


@dataclass(frozen=True)
class SparkLog:
    spark: SparkSession

    def newest_version(self, path: str) -> int:
        return deltalog.newest_version(self.spark, path)

    def commits_back(self, path: str, newest: int | None = None) -> Iterator[Commit]:
        return deltalog.commits_back(self.spark, path, newest)


class LocalLog:
    """A local table's commit files, read as files (both readers stop where a file is gone)."""

    def newest_version(self, path: str) -> int:
        newest = localfiles.newest_version(localfiles.log_dir(path))
        return -1 if newest is None else newest

    def commits_back(self, path: str, newest: int | None = None) -> Iterator[Commit]:
        return (c for c in localfiles.commits_back(localfiles.log_dir(path)) if newest is None or c.version <= newest)


def silver_state(lake: SparkSession | LakeLog, config: ProjectConfig, spec: TableSpec) -> SilverState:
    """Where silver of ``spec`` stands; ``NotComparable`` when it is not in the lake or its
    snapshot is not finished. ``lake``: how its commits are read (a Spark session: through Delta)."""
    if not isinstance(lake, SparkLog | LocalLog):  # a Spark session, classic or Spark Connect's
        lake = SparkLog(lake)  # type: ignore[arg-type]
    bronze_path = config.table_path(Layer.BRONZE, spec.name)
    merged = _newest_merge(lake, config.table_path(Layer.SILVER, spec.name))
    if merged is None:
        raise NotComparable(
            f"table {spec.name} is not in the lake at {config.lake_root}: dq checks the lake that "
            f"ingestion writes and never copies a table itself; run `make ingest TABLE={spec.name}` "
            "there, or point lake_root at that lake", table=spec.name)
    version, batch = merged
    checkpoint = _checkpoint_of_batch(lake, bronze_path, batch)
    if checkpoint is None:
        raise NotComparable(f"table {spec.name}: silver applied bronze batch {batch}, which bronze at "
                            f"{bronze_path} does not have; run `make ingest TABLE={spec.name}`", table=spec.name)
    progress = checkpoint.snapshot
    if progress is not None and not progress.complete:
        raise NotComparable(
            f"table {spec.name}: its snapshot is not finished ({len(progress.done)} of "
            f"{len(progress.chunks)} chunks); run `make ingest TABLE={spec.name}`", table=spec.name)
    position = checkpoint.position or (progress.low_watermark if progress is not None else None)
    if position is None:
        raise NotComparable(f"table {spec.name}: bronze batch {batch} has no binlog position; "
                            f"run `make ingest TABLE={spec.name}`", table=spec.name)
    window_end = max(position, progress.high_watermark) if progress is not None else position
    return SilverState(version, batch, position, window_end, checkpoint.synced_at)


def net_row_change(changes: Iterable[RowChange]) -> int:
    """Rows added minus rows removed by ``changes`` (in binlog order).

    An UPDATE that changes the key arrives as a delete of the old key followed, in the same rows
    event, by an update to the new one: the pair keeps the count, so the update counts +1 there.
    Any other update keeps the count."""
    net = 0
    previous: RowChange | None = None
    for change in changes:
        if change.op == "c":
            net += 1
        elif change.op == "d":
            net -= 1
        elif (previous is not None and previous.op == "d" and previous.position == change.position
              and previous.row_index == change.row_index - 1):
            net += 1  # the new key of a key-changing update
        previous = change
    return net


def count_change(counted_at: BinlogPosition, silver: SilverState, table: str,
                 transactions: Sequence[Transaction]) -> int:
    """What to add to ``table``'s row count at ``counted_at`` for its count at ``silver.position``,
    from the binlog ``transactions`` covering both positions and ``silver.window_end``: known
    before the count itself (which comes with the source's sums), and raising
    :class:`NotComparable` as early where the count at silver's position cannot be known."""
    low, high = sorted((counted_at, silver.position))
    between: list[RowChange] = []
    for transaction in transactions:
        mine = transaction.changes_of(table)
        problems = [p.reason for p in transaction.problems if p.table == table]
        problems += [f"schema change {c.statement[:200]!r}" for c in transaction.schema_changes if c.table == table]
        if silver.position < transaction.end <= silver.window_end and (mine or problems):
            raise NotComparable(
                f"table {table}: changed at {transaction.end}, inside its snapshot's watermark window "
                f"(ending at {silver.window_end}); run `make ingest TABLE={table}` first", table=table)
        if low < transaction.end <= high:
            if problems:
                raise NotComparable(f"table {table}: its changes between {low} and {high} cannot be "
                                    f"counted ({problems[0]} at {transaction.end})", table=table)
            between.extend(mine)
    net = net_row_change(between)
    return -net if silver.position <= counted_at else net


def run_checks(config: ProjectConfig, spark: SparkSession, specs: Sequence[TableSpec], *,
               view: PendingView | None = None) -> list[Any]:
    """Check every table; a table that cannot be compared fails its check (with the reason) and
    the others are still checked. Reads the lake and the source, writes only ``gx/``. ``view``:
    the source's read view of ``specs``, begun before Spark started (``sourceview``); else one is
    begun here. It is closed before this returns."""
    with view or PendingView(config.source, specs, compares_values,
                                readers=config.dq_source_readers) as pending:
        states: dict[str, SilverState] = {}
        results: list[QualityResult] = []
        for spec in specs:
            try:
                states[spec.name] = silver_state(spark, config, spec)
            except NotComparable as exc:
                log.error("%s", exc)
                results.append(failed(spec.name, str(exc)))
        pending.drop(s.name for s in specs if s.name not in states)
        healthy = [s for s in specs if s.name in states]
        if not healthy:
            return in_order(specs, results)
        try:
            compared = compare_with_source(config, spark, healthy, states, view=pending)
        except IngestError as exc:
            log.error("comparing with the source: %s", exc)
            return in_order(specs, results + [failed(s.name, f"comparing with the source failed: {exc}")
                                               for s in healthy])
    checked_at = pending.started_at
    for spec in healthy:
        state, outcome = states[spec.name], compared.tables[spec.name]
        if isinstance(outcome, NotComparable):
            log.error("%s", outcome)
            results.append(failed(spec.name, str(outcome)))
            continue
        silver = _silver_at(spark, config, spec, state)
        uniqueness = key_uniqueness(silver, outcome.schema, config.source)
        results.append(check_table(config, spec, state, outcome, CheckedAt(compared.position, checked_at),
                                   uniqueness.frame, uniqueness.expectation(spec.name),
                                   _key_facts(spec, outcome, silver)))
    return in_order(specs, results)


@dataclass(frozen=True)
class CheckedAt:
    """The source's read view a table was compared in: its position, and when it was begun."""

    position: BinlogPosition
    started_at: float


def check_table(config: ProjectConfig, spec: TableSpec, state: SilverState, outcome: Compared, view: CheckedAt,
                frame: DataFrame | None, unique_key: UniqueKey, facts: KeyFacts | None) -> QualityResult:
    """The table's suite run by Great Expectations on silver (``frame``; None: nothing left for
    GX to read, every check was ``measured``) with what was measured against the source."""
    from .checks import run_quality_checks

    gxload.loaded()
    extra = list(spec.expectations()) if spec.expectations else []
    # Not for a snapshot-only table: it stays at its snapshot's end on purpose.
    lag = (silver_lag(config.target_dir, spec.name, state.position, state.synced_at, view.position,
                      view.started_at) if spec.followed else None)
    result = run_quality_checks(
        frame, table=spec.name, key_columns=outcome.schema.key,
        expected_row_count=outcome.expected_rows, extra_expectations=extra, gx_root=config.gx_dir,
        compared_at=str(state.position), unique_key=unique_key,
        measured=_measured(spec, config, outcome, lag, facts), measured_keys=facts is not None,
        batch_description={"silver table": config.table_path(Layer.SILVER, spec.name),
                           "Delta version": str(state.version), "compared at binlog": str(state.position)},
    )
    result = replace(result, lag_seconds=lag.lag_seconds if lag is not None else None)
    log.info("%s: quality %s at %s (silver batch %d; source rows %s there, %d at %s)", spec.name,
             "passed" if result.success else "FAILED", state.position, state.batch,
             "not compared" if outcome.expected_rows is None else outcome.expected_rows,
             outcome.source_rows, view.position)
    return result


def _key_facts(spec: TableSpec, outcome: Compared, silver: DataFrame) -> KeyFacts | None:
    """Silver's key facts where they decide the key and row-count checks (else GX's own
    expectations do): for every table whose values are compared, counted from a snapshot, with
    a key silver compares as the source does (a collated key keeps GX's uniqueness on its
    collation classes). Decided by the table alone, so its stored suite keeps one shape; the
    facts come from the reconciliation's sums where they equal the source's, else from a pass
    of their own (the sums differ, or were not made: too many changed keys, say). None where
    silver lacks a key column (GX reports it)."""
    if not (compares_values(spec) and outcome.expected_rows is not None
            and compared_bytewise(outcome.schema, silver.schema)):
        return None
    if outcome.values is not None and outcome.values.key_facts is not None:
        return outcome.values.key_facts
    return key_facts(silver, outcome.schema)


def _measured(spec: TableSpec, config: ProjectConfig, outcome: Compared,
              lag: LagMeasurement | None, facts: KeyFacts | None = None) -> list[Measured]:
    """The checks measured outside GX, for the table's suite: the lag and the values, and the key
    and row count when the reconciliation's pass counted them (``facts``)."""
    from .expectations import keys_measured, lag_measured, rows_measured, values_measured

    measured = []
    if facts is not None and outcome.expected_rows is not None:
        measured += [keys_measured(list(outcome.schema.key), facts), rows_measured(facts.rows, outcome.expected_rows)]
    if lag is not None:
        measured.append(lag_measured(lag, spec.max_lag_seconds or config.max_lag_seconds))
    if outcome.values is not None:
        measured.append(values_measured(spec.name, outcome.values))
    return measured


@dataclass(frozen=True)
class Compared:
    """One table compared with the source: ``expected_rows`` is the source's row count at
    silver's position (None: not compared, the table started without a snapshot), ``values``
    the value-by-value reconciliation (None: not made, see :func:`compares_values`)."""

    schema: TableSchema
    source_rows: int
    expected_rows: int | None
    values: Reconciliation | None


@dataclass(frozen=True)
class SourceComparison:
    position: BinlogPosition  # the source's read view
    tables: dict[str, Compared | NotComparable]


def compares_values(spec: TableSpec) -> bool:
    """Whether silver can be compared with the source value by value: it holds every row (the
    table was snapshotted) in the source's own columns (no silver transform)."""
    return spec.snapshots and spec.transform is None and spec.compare_values


def changed_keys(transactions: Iterable[Transaction], table: str, low: BinlogPosition, high: BinlogPosition,
                 schema: TableSchema) -> list[tuple[Any, ...]]:
    """The keys of ``table`` changed between ``low`` and ``high``, as silver stores them (both
    the old and the new key of a key-changing update), in binlog order without repeats."""
    key = [(binlog_converter(c), c.name) for c in schema.key_columns]
    seen: dict[tuple[Any, ...], None] = {}
    for transaction in transactions:
        if low < transaction.end <= high:
            for change in transaction.changes_of(table):
                seen[tuple(convert(change.values[name]) for convert, name in key)] = None
    return list(seen)


def compare_with_source(config: ProjectConfig, spark: SparkSession, specs: Sequence[TableSpec],
                        states: Mapping[str, SilverState], *, drilled: int = DRILLED_BUCKETS,
                        count_keys: bool = True, view: PendingView | None = None) -> SourceComparison:
    """Count (and, where possible, reconcile value by value) every table in one read view of the
    source at one position ``P``, carried back to each table's silver position through the binlog.

    The read view stays open while silver is summed: the keys changed between the positions are
    taken out of the source's sums in that same view. ``drilled``: differing buckets compared
    key by key per table; ``count_keys``: count silver's rows and keys beside its sums where
    ``dq`` checks them so (``silverpass``). ``view``: the read view, begun beforehand over (at
    least) ``specs`` (``sourceview``); else one is begun here. It is closed before this returns."""
    with view or PendingView(config.source, specs, compares_values,
                                readers=config.dq_source_readers) as pending:
        opened = pending.opened()
        position, planned = opened.position, opened.tables
        tables: dict[str, Compared | NotComparable] = dict(purged_positions(config.source, states))
        specs = [s for s in specs if s.name not in tables]
        states = {name: state for name, state in states.items() if name not in tables}
        schemas = {s.name: planned[s.name].schema for s in specs}
        transactions = binlog_between(config, position, list(states.values()),
                                       {s.source_table: schemas[s.name].key for s in specs})
        change: dict[str, int | None] = {}  # to the count at P, for the count at silver's position
        reconciled: dict[str, ToReconcile | Reconciliation] = {}
        for spec in specs:
            state, schema, bucketing = states[spec.name], schemas[spec.name], planned[spec.name].bucketing
            try:
                change[spec.name] = count_change(position, state, spec.source_table,
                                                 transactions) if spec.snapshots else None
            except NotComparable as exc:
                tables[spec.name] = exc
                continue
            if bucketing is not None:
                low, high = sorted((state.position, position))
                changed = changed_keys(transactions, spec.source_table, low, high, schema)
                silver = _silver_at(spark, config, spec, state)
                counted = count_keys and compared_bytewise(schema, silver.schema)
                reconciled[spec.name] = too_many_changed(changed) or ToReconcile(
                    schema, bucketing, silver, changed, counted)
        to_reconcile = {name: c for name, c in reconciled.items() if isinstance(c, ToReconcile)}
        pending.drop(name for name in planned if name not in change)  # not comparable: no count either
        pending.count_only(name for name in change if name not in to_reconcile)
        outcomes = {**reconciled, **reconcile_all(pending, spark, to_reconcile, drilled)}
        rows = pending.rows()
        for name, delta in change.items():
            values = outcomes.get(name)
            assert not isinstance(values, ToReconcile)
            tables[name] = Compared(schemas[name], rows[name], None if delta is None else rows[name] + delta, values)
    return SourceComparison(position, tables)


def purged_positions(profile: SourceProfile, states: Mapping[str, SilverState]) -> dict[str, NotComparable]:
    """The tables whose silver position lies in a binlog file the source no longer has: their
    changes since can be neither counted nor caught up, so each fails alone, naming its fix, and
    the binlog is read for the others only. On a connection of its own: the read view's is busy
    summing the source meanwhile."""
    try:
        with connection(profile) as conn:
            files = binlog_sizes(conn)
    except pymysql.err.MySQLError:
        return {}  # no privilege to list them: the binlog reader reports a purged position itself
    return {name: NotComparable(
        f"table {name}: silver's binlog position {state.position} is no longer on the source (its binlog "
        f"files begin at {min(files, default='none')}), so the changes since can be neither compared nor "
        f"ingested; re-snapshot the table with `make ingest TABLE={name} FULL_REFRESH=1`", table=name)
        for name, state in states.items() if state.position.file not in files}


def failed(name: str, message: str) -> QualityResult:
    """A table's result when it could not be compared: one failed check saying why."""
    from .checks import CheckOutcome, QualityResult

    return QualityResult(name, False, (CheckOutcome(ALIGNMENT_CHECK, False, message),), None)


def in_order(specs: Sequence[TableSpec], results: list[Any]) -> list[Any]:
    order = {s.name: i for i, s in enumerate(specs)}
    return sorted(results, key=lambda r: order[r.table])


def _silver_at(spark: SparkSession, config: ProjectConfig, spec: TableSpec, state: SilverState) -> DataFrame:
    """Silver's rows at ``state``'s version: the table's state (current versions under SCD 2)."""
    silver = (spark.read.format("delta").option("versionAsOf", state.version)
              .load(config.table_path(Layer.SILVER, spec.name)))
    return history.current_rows(silver) if spec.scd_type == 2 else silver


def _newest_merge(lake: LakeLog, silver_path: str) -> tuple[int, int] | None:
    """Silver's newest Delta version and the last bronze batch merged into it (commits after
    that merge, such as maintenance or a manual fix, are part of what is checked)."""
    newest = lake.newest_version(silver_path)
    if newest < 0:
        return None
    for commit in lake.commits_back(silver_path, newest):
        if commit.user_metadata is not None:  # not on table creation or maintenance commits
            return newest, int(json.loads(commit.user_metadata)["bronze_batch"])
    return None


def _checkpoint_of_batch(lake: LakeLog, bronze_path: str, batch: int) -> Checkpoint | None:
    if lake.newest_version(bronze_path) < 0:
        return None
    for commit in lake.commits_back(bronze_path):
        if commit.operation == "WRITE" and commit.user_metadata is not None:
            checkpoint = Checkpoint.from_json(commit.user_metadata)
            if checkpoint.batch == batch:
                return checkpoint
            if checkpoint.batch < batch:
                return None
    return None


def binlog_between(config: ProjectConfig, counted_at: BinlogPosition, states: Sequence[SilverState],
                    keys: Mapping[str, Sequence[str]]) -> list[Transaction]:
    """The transactions of ``keys``' tables from the lowest to the highest position in play."""
    positions = [counted_at] + [p for s in states for p in (s.position, s.window_end)]
    start, stop = min(positions), max(positions)
    if start >= stop:
        return []
    source = BinlogSource(config.source, ServerIds.of(config.server_ids).checks(), config.source.database, keys)
    return list(source.transactions(start, stop))
