"""``dq`` on a local lake without a JVM: the passing case of every table, in Python and Arrow.

With Spark, ``dq`` could not be quicker than the JVM's start plus one cold pass over silver,
which together exceed half the snapshot they check (make bench's 2M-row ``customer``: 4.7-6.5 s
and 7.5 s of its 15-21 s). Nothing in a check that passes needs Spark: silver's position is in
its commit files, its rows in its Parquet files and deletion vectors (``arrowsilver``), its
fingerprints and buckets are arithmetic (``arrowprint``), and Great Expectations only records
what the engine measured (the key, row-count and value checks are measured already on the Spark
path for such tables). So each table is compared here exactly as :mod:`dq` compares it, in the
same read view of the source, and checked by GX without data.

Spark stays the reference. A table goes to it (:attr:`LocalRun.for_spark`), in the same read
view, whenever this path would have to do something else than report a pass with the same
suite: the table's own expectations (GX reads silver for them), silver or its log not readable
here, a column whose values are not fingerprinted here, a key in a collation that calls other
spellings equal, too many changed keys to leave out, and every difference from the source
(Spark's pass names the differing keys and counts the keys in full). A table that cannot be
compared at all (not in the lake, a purged position, a change inside its watermark window) fails
here with the Spark path's own message. ``dq`` takes this path where the project allows it for
every table (:func:`qualifies`: a local lake, values compared); a table its key sends to Spark
has Spark started at once, beside the others' checks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pymysql

from ..config.project import Layer, ProjectConfig
from ..errors import IngestError
from ..sink.log import localfiles
from ..source.connection import connection
from ..source.introspect import ColumnInfo, TableSchema, describe_table
from ..tables import TableSpec
from . import gxload
from .arrowprint import Unprintable
from .arrowsilver import Unreadable, silver_parts
from .bucketing import Bucketing
from .collation import collation_rule
from .dq import (
    CheckedAt,
    Compared,
    LocalLog,
    NotComparable,
    SilverState,
    binlog_between,
    changed_keys,
    check_table,
    compares_values,
    count_change,
    failed,
    purged_positions,
    silver_state,
)
from .localpass import Fingerprinted, fingerprinted, summed
from .reconcile import Reconciliation, add_rows, differing_buckets, source_rows_of, too_many_changed
from .silverpass import SilverPass
from .sourceview import PendingView
from .uniqueness import Key

if TYPE_CHECKING:
    from .checks import QualityResult, UniqueKey

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LocalRun:
    """The tables checked here, and those Spark must check (with why, for the log)."""

    results: list[QualityResult] = field(default_factory=list)
    for_spark: dict[str, str] = field(default_factory=dict)


def qualifies(config: ProjectConfig, specs: Sequence[TableSpec]) -> bool:
    """Whether every table may be checked without Spark, as far as the project tells: a local
    lake, values compared (snapshotted, no transform). A table's own expectations are asked for
    only once GX is imported (``gxload``): a table with some goes to Spark then."""
    if not localfiles.is_local(config.lake_root):
        return False
    return all(compares_values(s) for s in specs)


@dataclass(frozen=True)
class _Summed:
    spec: TableSpec
    state: SilverState
    count_change: int  # to the source's count in the view, for its count at silver's position
    changed: list[Key]
    silver: SilverPass


def run_local_checks(config: ProjectConfig, specs: Sequence[TableSpec], view: PendingView,
                     columns: Mapping[str, TableSchema] | None = None) -> LocalRun:
    """Check ``specs`` in ``view`` (left open for Spark's tables); see the module docstring.
    ``columns``: the source's columns of ``specs`` as :func:`source_columns` read them just before.

    Silver is read and fingerprinted first, while the view's thread opens the read view and
    sums the source (seconds on a big table), in the columns the source has just before; a
    table whose columns the view then sees otherwise (a DDL in between) is fingerprinted again."""
    run = LocalRun()
    lake = LocalLog()
    states: dict[str, SilverState] = {}
    for spec in specs:
        try:
            states[spec.name] = silver_state(lake, config, spec)
        except NotComparable as exc:
            log.error("%s", exc)
            run.results.append(failed(spec.name, str(exc)))
    for name, purged in purged_positions(config.source, states).items():
        log.error("%s", purged)
        run.results.append(failed(name, str(purged)))
        del states[name]
    healthy = [s for s in specs if s.name in states]
    view.drop(s.name for s in specs if s.name not in states)
    if not healthy:
        return run
    if columns is None:
        columns = source_columns(config, healthy)
    prints = {s.name: _fingerprint(config, s, states[s.name], columns[s.name]) for s in healthy
              if s.name in columns}
    # Only now: importing GX (3 s of Python) beside the fingerprints made both slower than the
    # two one after the other (they share the interpreter lock; 5.4-6.6 s together against 2.4-2.7
    # s and 2.8-3.0 s alone, make bench's 2M rows). From here it overlaps the source's sums.
    gxload.load_in_background()
    opened = view.opened()
    try:
        transactions = binlog_between(config, opened.position, [states[s.name] for s in healthy],
                                      {s.source_table: opened.tables[s.name].schema.key for s in healthy})
    except IngestError as exc:
        log.error("comparing with the source: %s", exc)
        run.results.extend(failed(s.name, f"comparing with the source failed: {exc}") for s in healthy)
        return run
    summed_tables: list[_Summed] = []
    for spec in healthy:
        state, planned = states[spec.name], opened.tables[spec.name]
        try:
            change = count_change(opened.position, state, spec.source_table, transactions)
        except NotComparable as exc:
            log.error("%s", exc)
            run.results.append(failed(spec.name, str(exc)))
            continue
        reason = spark_reason(planned.bucketing)
        low, high = sorted((state.position, opened.position))
        changed = changed_keys(transactions, spec.source_table, low, high, planned.schema)
        if reason is None and too_many_changed(changed) is not None:
            reason = f"{len(changed)} keys changed between the compared positions"
        if reason is None:
            rows = prints.get(spec.name)
            if not isinstance(rows, Fingerprinted) or rows.schema != planned.schema:
                rows = _fingerprint(config, spec, state, planned.schema)
            if isinstance(rows, str):
                reason = rows
            else:
                assert planned.bucketing is not None
                summed_tables.append(_Summed(spec, state, change, changed,
                                             summed(rows, planned.bucketing, changed)))
        if reason is not None:
            run.for_spark[spec.name] = reason
    sources, counts = view.sums(), view.rows()
    conn = opened.conn  # the view's thread is done with it
    gxload.loaded()  # a table module's expectations() may import GX
    for table in summed_tables:
        name, planned = table.spec.name, opened.tables[table.spec.name]
        if table.spec.expectations and list(table.spec.expectations()):
            run.for_spark[name] = "its own expectations read silver's rows"
            continue
        side = sources[name]
        changed_rows = source_rows_of(conn, side, table.changed)
        source = add_rows(side.sums, ((b, h) for b, h, _ in changed_rows), sign=-1)
        facts = table.silver.facts_where_equal(planned.schema.key)
        if differing_buckets(source, table.silver.sums) or facts is None:
            run.for_spark[name] = "silver's sums differ from the source's (Spark names the keys)"
            continue
        values = Reconciliation(len(source.keys() | table.silver.sums.keys()), (), len(table.changed),
                                key_facts=facts)
        counted = counts[name]
        outcome = Compared(planned.schema, counted, counted + table.count_change, values)
        run.results.append(check_table(config, table.spec, table.state, outcome,
                                       CheckedAt(opened.position, view.started_at), None,
                                       _unique(planned.schema.key), facts))
    for name, reason in run.for_spark.items():
        log.info("%s: checked with Spark (%s)", name, reason)
    return run


def source_columns(config: ProjectConfig, specs: Sequence[TableSpec]) -> dict[str, TableSchema]:
    """The source's columns of ``specs`` now, on a connection of its own (the view's is opening);
    none where they cannot be read here (the view then says why, or they are read after it)."""
    try:
        with connection(config.source) as conn:
            return {s.name: describe_table(conn, config.source.database, s.source_table, s.key) for s in specs}
    except (pymysql.err.MySQLError, IngestError):
        return {}


def _fingerprint(config: ProjectConfig, spec: TableSpec, state: SilverState,
                 schema: TableSchema) -> Fingerprinted | str:
    """Silver's rows fingerprinted in ``schema``'s columns, or why Spark must read them."""
    try:
        parts = silver_parts(config.table_path(Layer.SILVER, spec.name), state.version,
                             [c.name for c in schema.columns], current_only=spec.scd_type == 2,
                             repeating=[c.name for c in schema.columns if c.name not in schema.key])
        return fingerprinted(parts, schema)
    except (Unreadable, Unprintable) as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - Spark, the reference, checks it instead
        log.warning("%s: silver's pass without a JVM failed; checking it with Spark", spec.name, exc_info=True)
        return f"the pass without a JVM failed: {type(exc).__name__}: {exc}"


def spark_reason(bucketing: Bucketing | None) -> str | None:
    """Why a table planned so (its bucketing in the read view) is Spark's to check, before silver
    is read (None: it may be checked here)."""
    if bucketing is None:
        return "its values are not compared"
    return key_reason(bucketing.key)


def key_reason(key: Sequence[ColumnInfo]) -> str | None:
    """Why a table with these key columns is Spark's to check: a string key in a collation that
    calls other spellings equal needs Spark's grouping of them (``uniqueness``)."""
    for column in key:
        rule = collation_rule(column.collation, column.charset) if column.collation else None
        if rule is not None and not rule.exact and column.is_collated_string:
            return f"key column {column.name} is compared in its collation {column.collation}"
    return None


def _unique(key: Sequence[str]) -> UniqueKey:
    from .checks import UniqueKey  # GX is slow to import

    return UniqueKey(tuple(key))
