"""Silver: the current state per key, fed from bronze by MERGE with a sequence guard.

Each MERGE records the bronze batch it has applied (commit ``userMetadata``), so a crash between
the bronze and the silver commit heals on the next run, and re-applying is a no-op.

Each silver commit is also an idempotent Delta transaction (``silver:<table>``, version = the
bronze batch applied), so a run that merges an older batch after another run merged a newer one
is skipped rather than moving silver back; a MERGE that loses a race to another run's commit is
a Delta conflict, reported as a retriable error.

What keeps a small MERGE into a big silver table small:

- Deletion vectors (``delta.enableDeletionVectors``): a MERGE marks the rows it updates or deletes
  as gone from their files and writes only the new row versions, instead of copying every other
  row of each touched file into a new one. Silver is created with them; a silver table created
  without them (by an older version, or by the snapshot's file commits) gets them at its next
  MERGE, by one metadata commit.
- The ON condition also bounds the target's key to the batch's min/max (numeric and date keys),
  so Delta skips, by its file statistics, the files that cannot hold a key of the batch. Only
  for types whose Spark order agrees with Spark's equality and whose statistics are exact: a
  bound must never exclude a row the key equality would match.
- A batch in the driver's memory (up to ``LOCAL_BATCH_ROWS``, or the batches this process just
  committed to bronze) is merged by :mod:`dvmerge`: the same rule in Arrow, rows removed by
  deletion vectors and the new versions in one new file, committed through Delta's transaction,
  with no Spark job (Delta's MERGE costs about twenty, 2-4 s a batch). Tables whose writers have
  duties it does not carry out (change data feed, constraints, ...) get Delta's MERGE.
- Snapshot rows (``_op = 'r'``) come from disjoint key ranges, one row per key: batches holding
  nothing else are appended without the per-key window (a full shuffle and sort), and without a
  MERGE when silver holds nothing but earlier snapshot rows. A repair's snapshot rows re-read
  keys silver holds: their batch (its checkpoint marked ``repair``) is always MERGEd.

:func:`rebuild` makes silver anew from the whole of bronze with the same rule as the MERGE (the
newest change of each key wins, a delete removes it), so it equals the incremental silver.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import Column, DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import ConcurrentRunError, ConfigError, FatalError
from ..identifiers import quote_ident
from ..ops import Op
from ..state.checkpoint import Checkpoint
from ..state.lakechange import LakeChange
from . import bronze, columnmap, dvmerge, evolve, history
from .bronze import latest_per_key
from .log import deltalog, localfiles, transaction

log = logging.getLogger(__name__)

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
# Delta's idempotent DML: a MERGE whose version is not above the app id's last one is skipped.
TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
MATERIALIZE_SOURCE_CONF = "spark.databricks.delta.merge.materializeSource"
SILVER_META = history.CHANGE_META
# A batch of up to this many bronze rows is merged from the driver's memory (Arrow): its facts
# need no Spark job and the MERGE reads it in each pass without going back to bronze.
LOCAL_BATCH_ROWS = 50_000
# Bronze rows a catch-up holds for silver, as it committed them, before silver takes them (about
# 100 MB of Arrow for a table of 20 mostly short columns): a 500k-row batch merges from memory in
# a few seconds, where Delta's MERGE takes about 15 s on 2 cores.
HELD_ROWS = 500_000
DELETION_VECTORS = "delta.enableDeletionVectors"
# Key types whose min/max may bound the MERGE's target: Spark orders them consistently with its
# equality and Delta's statistics of them are exact (not strings, whose statistics are
# truncated prefixes, nor floats with NaN, nor timestamps, kept at millisecond precision).
RANGE_KEY_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType, T.DateType)
# An open cost this large gives every input file a read partition of its own: rows copied from
# bronze keep its files' key ranges (snapshot chunks), which the MERGE's key bounds then skip.
ONE_PARTITION_PER_FILE = {"spark.sql.files.openCostInBytes": str(1 << 40)}
Transform = Callable[[DataFrame], DataFrame]


@dataclass(frozen=True)
class BatchFacts:
    """What the MERGE needs to know of the bronze rows it applies, from one aggregate."""

    rows: int
    snapshot_only: bool  # every row is a snapshot row (_op = 'r')
    key_bounds: tuple[tuple[str, Any, Any], ...]  # (key column, min, max) of range-able keys


def rebuild(spark: SparkSession, *, bronze_path: str, silver_path: str, key: Sequence[str],
            transform: Transform | None = None, table: str, scd_type: int = 1) -> int:
    """Write silver anew from every bronze batch; returns the last batch, which the new silver
    records as applied (incremental merges go on from there).

    One Delta commit: an overwrite of an existing silver (atomic; earlier versions stay
    readable until VACUUM) or the table's creation. The caller holds the table's lock."""
    checkpoint = bronze.latest_checkpoint(spark, bronze_path)
    if checkpoint is None:
        raise ConfigError(f"table {table} has not been ingested yet (no bronze batch to rebuild silver from): "
                          f"run `make ingest TABLE={table}`", table=table)
    if not checkpoint.chunks_read:
        assert checkpoint.snapshot is not None
        raise ConfigError(
            f"table {table}: bronze holds {len(checkpoint.snapshot.done)} of the {len(checkpoint.snapshot.chunks)} "
            f"chunks of its snapshot, too few to make silver from: run `make ingest TABLE={table}` to finish it "
            "(silver is then made anew from bronze)", table=table)
    changes = bronze.read_batches(spark, bronze_path, -1, checkpoint.batch)
    if scd_type == 2:
        rows = history.versions(history.shaped(changes, transform), key)
    else:
        columns = [quote_ident(c) for c in changes.columns if c not in bronze.META_COLUMNS]
        rows = _shaped(latest_per_key(changes, key).select(*columns, *SILVER_META), transform)
    # No idempotent-transaction options: silver's app id has committed this batch already, so
    # Delta would skip the write; the next MERGE's higher batch number is accepted as usual.
    marker = Commit("", checkpoint.batch, table, checkpoint.run_id, checkpoint.generation).marker
    writer = rows.write.format("delta").option("userMetadata", marker)
    try:
        if bronze.exists(spark, silver_path):
            # Bronze's columns may have changed since silver was made (a DDL replayed by rebuilding).
            writer.mode("overwrite").option("overwriteSchema", "true").save(silver_path)
        else:
            (writer.option(DELETION_VECTORS, "true").options(**columnmap.creation_properties(rows.columns))
             .mode("errorifexists").save(silver_path))
    except (CapturedException, Py4JJavaError) as exc:
        if not bronze.is_commit_conflict(exc):
            raise
        raise concurrent_silver_write(table) from None
    return checkpoint.batch


def applied_batch(spark: SparkSession, path: str) -> int:
    """The last bronze batch merged into silver; -1 when silver does not exist yet."""
    return int(marker(spark, path).get("bronze_batch", -1))


def marker(spark: SparkSession, path: str) -> dict[str, Any]:
    """The newest silver commit's marker: ``bronze_batch`` (the last bronze batch merged) and,
    after a schema change, ``schema_batch`` (the last bronze schema change replayed)."""
    for commit in deltalog.commits_back(spark, path):
        if commit.user_metadata is not None:  # not on table creation or maintenance commits
            return dict(json.loads(commit.user_metadata))
    return {}


def pending_schema_changes(spark: SparkSession, bronze_path: str, silver_path: str,
                           upto: int) -> list[tuple[int, tuple[LakeChange, ...]]]:
    """The bronze schema changes silver has yet to replay, oldest first: (batch, changes)."""
    saved = marker(spark, silver_path)
    replayed = max(int(saved.get("bronze_batch", -1)), int(saved.get("schema_batch", -1)))
    found = []
    for commit in deltalog.commits_back(spark, bronze_path):
        if commit.operation != "WRITE" or commit.user_metadata is None:
            continue
        checkpoint = Checkpoint.from_json(commit.user_metadata)
        if checkpoint.batch <= replayed:
            break
        if checkpoint.batch <= upto and checkpoint.schema_changes:
            found.append((checkpoint.batch, checkpoint.schema_changes))
    return found[::-1]


def apply(
    spark: SparkSession,
    *,
    bronze_path: str,
    silver_path: str,
    key: Sequence[str],
    upto_batch: int,
    transform: Transform | None = None,
    table: str | None = None,
    recent: Mapping[int, pa.Table] | None = None,
    scd_type: int = 1,
    table_features: Collection[str] = (),
) -> int:
    """Merge bronze batches ``(applied, upto_batch]`` into silver; returns batches applied.
    ``scd_type`` 2 keeps every version of each key (``history``) instead of the newest only.
    ``table_features``: the Delta features a schema change may switch on (``evolve_silver``).

    ``table`` names the table in errors (default: the last part of ``silver_path``). ``recent``
    holds bronze batches this process just committed, as written: when it has every batch to
    apply, silver takes them from memory instead of reading bronze back. Raises
    ``ConcurrentRunError`` when another run committed to silver concurrently."""
    name = table or silver_path.rstrip("/").rsplit("/", 1)[-1]
    saved = marker(spark, silver_path)
    done = int(saved.get("bronze_batch", -1))
    lineage = _lineage(spark, bronze_path, upto_batch, done)
    exists = deltalog.newest_version(spark, silver_path) >= 0  # a rebuild returns; nothing else creates it
    if exists:
        lineage.check(saved, name)
        if lineage.generation not in (None, int(saved.get("generation", 0))):
            # A full refresh replaced bronze's rows: silver keeps the state before it until every
            # chunk is in bronze, then is replaced in one commit (never merged into: its keys and
            # bronze's would mix two copies of the table).
            if not lineage.chunks_read:
                log.info("table %s: a full refresh is under way: silver keeps its state until every chunk "
                         "is read", name)
                return 0
            log.info("table %s: the full refresh's chunks are all read: silver is made anew from bronze", name)
            return rebuild(spark, bronze_path=bronze_path, silver_path=silver_path, key=key, transform=transform,
                           table=name, scd_type=scd_type) - done
    if done >= upto_batch:
        return 0
    if exists:
        replay = pending_schema_changes(spark, bronze_path, silver_path, upto_batch)
        if replay and (scd_type != 1 or transform is not None):
            # A transform's or history's columns follow from bronze's only through their code:
            # silver is made anew from bronze, which already holds the changes.
            return rebuild(spark, bronze_path=bronze_path, silver_path=silver_path, key=key,
                           transform=transform, table=name, scd_type=scd_type) - done
        if replay:
            # Bronze's rows already have the new columns: silver takes them first, then merges.
            evolved = json.dumps({**saved, "schema_batch": replay[-1][0]})
            evolve.evolve_silver(spark, silver_path, [c for _, changes in replay for c in changes],
                                 SILVER_META, evolved, table_features)
            recent = None
    changes = bronze.read_batches(spark, bronze_path, done, upto_batch)
    columns = [quote_ident(c) for c in changes.columns if c not in bronze.META_COLUMNS]
    commit = Commit(app_id=f"silver:{name}", batch=upto_batch, table=name, run=lineage.run,
                    generation=lineage.generation or 0)
    if scd_type == 2:
        _apply_history(spark, silver_path, changes, key, transform, commit)
        return upto_batch - done
    if not exists:
        snapshot_only = (changes.where(F.col("_op") != Op.READ.value).isEmpty()  # Parquet statistics answer
                         and not bronze.repaired_after(spark, bronze_path, done))
        rows = changes if snapshot_only else latest_per_key(changes, key)
        _create(spark, silver_path, _shaped(rows.select(*columns, *SILVER_META), transform), commit,
                keep_files=snapshot_only)
        return upto_batch - done
    in_memory = _held(recent, done, upto_batch)
    if in_memory is None:
        in_memory = _collect_small(changes, LOCAL_BATCH_ROWS)
    if in_memory is not None:
        # Batches are laid out in the source's column order; bronze's may differ (a column added
        # by a DDL is last in bronze, wherever the source put it).
        in_memory = in_memory.select(changes.columns)
        facts = arrow_facts(in_memory, key, changes.schema)
    else:
        facts = batch_facts(changes, key)
    if facts.rows == 0 and localfiles.is_local(silver_path):
        _record_applied(spark, silver_path, commit)
        return upto_batch - done
    appends = facts.rows == 0 or (facts.snapshot_only and _snapshot_only_until(spark, bronze_path, done)
                                  and not bronze.repaired_after(spark, bronze_path, done))
    if not appends:
        enable_deletion_vectors(spark, silver_path, name)
        if in_memory is not None and transform is None and _merge_in_arrow(spark, silver_path, in_memory, key,
                                                                           facts, commit):
            return upto_batch - done
    if in_memory is not None:
        changes = spark.createDataFrame(in_memory, schema=changes.schema)
    if appends:
        _append(spark, silver_path, _shaped(changes.select(*columns, *SILVER_META), transform), commit)
        return upto_batch - done
    latest = _shaped(latest_per_key(changes, key).select(*columns, *SILVER_META), transform, drop_deletes=False)
    # A transform may rewrite key values: bounds taken before it could exclude a match.
    _merge(spark, silver_path, latest, key, facts.key_bounds if transform is None else (), commit,
           source_in_memory=in_memory is not None)
    return upto_batch - done


@dataclass(frozen=True)
class Commit:
    """The idempotent transaction and marker a silver commit carries."""

    app_id: str
    batch: int
    table: str
    # Of bronze's commit of ``batch``: the run that made it and the generation it belongs to
    # (``Checkpoint.generation``). A batch number alone can come back: a bronze commit lost from
    # its log (edited by hand, restored from an older copy) is taken by the next run's batch.
    run: str | None = None
    generation: int = 0

    @property
    def marker(self) -> str:
        body: dict[str, Any] = {"bronze_batch": self.batch}
        if self.run is not None:
            body["bronze_run"] = self.run
        if self.generation:
            body["generation"] = self.generation
        return json.dumps(body)


@dataclass(frozen=True)
class Lineage:
    """What bronze says of the batches silver has merged and is about to merge."""

    newest: int  # bronze's newest batch (-1: none)
    run: str | None  # the run of the batch to merge
    generation: int | None  # the generation of the batch to merge (None: bronze has no such batch)
    chunks_read: bool  # whether that batch's checkpoint has every snapshot chunk read
    done_run: str | None  # the run of bronze's batch silver has merged, when bronze still has it

    def check(self, marker: Mapping[str, Any], table: str) -> None:
        """Stop when silver's marker names a bronze batch bronze does not hold as silver saw it:
        silver's state then cannot be placed in bronze's changelog, and merging on would leave
        it wrong for good (the batch number would be taken as merged)."""
        done = int(marker.get("bronze_batch", -1))
        if done < 0 or self.generation is None or int(marker.get("generation", 0)) != self.generation:
            return
        if self.newest < done:
            found = f"bronze's newest batch is {self.newest}"
        elif marker.get("bronze_run") not in (None, self.done_run) and self.done_run is not None:
            found = f"bronze's batch {done} is another run's ({self.done_run}, silver merged {marker['bronze_run']}'s)"
        else:
            return
        raise FatalError(
            f"table {table}: silver has merged bronze batch {done}, but {found}: bronze lost commits (its "
            f"_delta_log was edited or restored from an older copy); make silver anew from bronze with "
            f"`make rebuild TABLE={table}`, then ingest again", table=table)


def _lineage(spark: SparkSession, bronze_path: str, upto: int, done: int) -> Lineage:
    """Bronze's checkpoints from its newest back to batch ``done``, read once."""
    newest, at_upto, done_run = -1, None, None
    for checkpoint in bronze.checkpoints_back(spark, bronze_path):
        newest = max(newest, checkpoint.batch)
        if checkpoint.batch == upto:
            at_upto = checkpoint
        if checkpoint.batch == done:
            done_run = checkpoint.run_id
        if checkpoint.batch <= done or (done < 0 and checkpoint.batch <= upto):
            break
    if at_upto is None:
        return Lineage(newest, None, None, True, done_run)
    return Lineage(newest, at_upto.run_id, at_upto.generation, at_upto.chunks_read, done_run)


def _held(recent: Mapping[int, pa.Table] | None, done: int, upto: int) -> pa.Table | None:
    """Batches ``(done, upto]`` from ``recent``, when it holds every one of them."""
    wanted = range(done + 1, upto + 1)
    if not recent or any(batch not in recent for batch in wanted):
        return None
    return pa.concat_tables([recent[batch] for batch in wanted])


def _collect_small(changes: DataFrame, limit: int) -> pa.Table | None:
    """The batch's rows as Arrow, when there are at most ``limit`` of them (else ``None``)."""
    rows = changes.limit(limit + 1).toArrow()
    return rows if rows.num_rows <= limit else None


def arrow_facts(rows: pa.Table, key: Sequence[str], schema: T.StructType) -> BatchFacts:
    """:func:`batch_facts` of rows in memory."""
    types = {f.name: f.dataType for f in schema.fields}
    bounds = []
    for k in key:
        if isinstance(types[k], RANGE_KEY_TYPES):
            low, high = (v.as_py() for v in pc.min_max(rows[k]).values())
            if low is not None:
                bounds.append((k, low, high))
    snapshot_only = rows.num_rows == 0 or bool(pc.all(pc.equal(rows["_op"], Op.READ.value)).as_py())
    return BatchFacts(rows=rows.num_rows, snapshot_only=snapshot_only, key_bounds=tuple(bounds))


def batch_facts(changes: DataFrame, key: Sequence[str]) -> BatchFacts:
    """Row count, whether all rows are snapshot rows, and the bounds of range-able key columns."""
    types = {f.name: f.dataType for f in changes.schema.fields}
    bounded = [k for k in key if isinstance(types[k], RANGE_KEY_TYPES)]
    aggregates = [F.count(F.lit(1)), F.max((F.col("_op") != Op.READ.value).cast("int"))]
    for k in bounded:
        aggregates += [F.min(F.col(quote_ident(k))), F.max(F.col(quote_ident(k)))]
    row = changes.agg(*aggregates).first()
    assert row is not None  # a global aggregate always yields one row
    bounds = tuple((k, row[2 + 2 * i], row[3 + 2 * i]) for i, k in enumerate(bounded))
    return BatchFacts(rows=int(row[0]), snapshot_only=not row[1],
                      key_bounds=tuple(b for b in bounds if b[1] is not None))


def merge_condition(key: Sequence[str], bounds: Sequence[tuple[str, Any, Any]],
                    types: dict[str, T.DataType]) -> Column:
    """Key equality, plus each bounded key column between the batch's min and max: a
    target-only predicate, which Delta uses to skip files by their statistics."""
    terms = [F.col(f"t.{quote_ident(k)}") == F.col(f"s.{quote_ident(k)}") for k in key]
    for k, low, high in bounds:
        column = F.col(f"t.{quote_ident(k)}")
        terms.append(column.between(F.lit(low).cast(types[k]), F.lit(high).cast(types[k])))
    return reduce(lambda a, b: a & b, terms)


def enable_deletion_vectors(spark: SparkSession, path: str, table: str) -> None:
    """Turn deletion vectors on for a silver table that has the property unset (one metadata
    commit, once); a table where someone set it, to anything, is left as it is."""
    if deltalog.table_property(spark, path, DELETION_VECTORS) is not None:
        return
    try:
        spark.sql(f"ALTER TABLE delta.{quote_ident(path)} SET TBLPROPERTIES ('{DELETION_VECTORS}' = 'true')")
    except (CapturedException, Py4JJavaError) as exc:
        if not bronze.is_commit_conflict(exc):
            raise
        raise concurrent_silver_write(table) from None


def _shaped(rows: DataFrame, transform: Transform | None, *, drop_deletes: bool = True) -> DataFrame:
    if transform is not None:
        rows = transform(rows)
    return rows.where(F.col("_op") != Op.DELETE.value) if drop_deletes else rows


def _snapshot_only_until(spark: SparkSession, bronze_path: str, batch: int) -> bool:
    """Whether bronze batches up to ``batch`` (what silver holds) are all snapshot rows: then
    silver's keys are other snapshot chunks' keys, and new snapshot rows are new keys.

    Only asked when the batches being applied are snapshot rows, i.e. at the end of a snapshot;
    Parquet statistics of ``_op`` let it skip nearly every row group."""
    if batch < 0:
        return True
    return bronze.read_batches(spark, bronze_path, -1, batch).where(F.col("_op") != Op.READ.value).isEmpty()


def _writer(rows: DataFrame, commit: Commit) -> DataFrameWriter:
    """A Delta write of ``rows`` carrying ``commit``'s marker, as an idempotent transaction."""
    return (rows.write.format("delta").option("userMetadata", commit.marker)
            .option("txnAppId", commit.app_id).option("txnVersion", commit.batch))


def _create(spark: SparkSession, path: str, rows: DataFrame, commit: Commit, *, keep_files: bool) -> None:
    """Create silver with ``rows``; ``keep_files``: one file per input file (no shuffle)."""
    try:
        with _session_conf(spark, ONE_PARTITION_PER_FILE if keep_files else {}):
            (_writer(rows, commit).option(DELETION_VECTORS, "true")
             .options(**columnmap.creation_properties(rows.columns)).mode("errorifexists").save(path))
    except (CapturedException, Py4JJavaError) as exc:
        # Another run created silver since we looked: a creation conflict, or "path exists".
        created_meanwhile = isinstance(exc, AnalysisException) and bronze.exists(spark, path)
        if not (created_meanwhile or bronze.is_commit_conflict(exc)):
            raise
        raise concurrent_silver_write(commit.table) from None


def _append(spark: SparkSession, path: str, rows: DataFrame, commit: Commit) -> None:
    """Append new keys. Like the MERGE, Delta skips it when this app id has already committed
    this batch or a later one, and fails it when another run commits to silver meanwhile."""
    try:
        with _session_conf(spark, ONE_PARTITION_PER_FILE):
            _writer(rows, commit).mode("append").save(path)
    except (CapturedException, Py4JJavaError) as exc:
        if not bronze.is_commit_conflict(exc):
            raise
        raise concurrent_silver_write(commit.table) from None


def _record_applied(spark: SparkSession, path: str, commit: Commit) -> None:
    """Mark batches without rows as applied: a commit of no file, only the marker and the
    idempotent transaction (an empty append through Spark costs seconds of jobs for the same)."""
    try:
        transaction.record_version(spark, path, app_id=commit.app_id, version=commit.batch,
                                   user_metadata=commit.marker)
    except transaction.AlreadyCommitted:
        return  # as Delta skips an append of a version its app id has committed
    except (CapturedException, Py4JJavaError) as exc:
        if not bronze.is_commit_conflict(exc):
            raise
        raise concurrent_silver_write(commit.table) from None


def _merge(spark: SparkSession, path: str, latest: DataFrame, key: Sequence[str],
           bounds: Sequence[tuple[str, Any, Any]], commit: Commit, *, source_in_memory: bool) -> None:
    from delta.tables import DeltaTable

    types = {f.name: f.dataType for f in latest.schema.fields}
    values: dict[str, str | Column] = {quote_ident(c): f"s.{quote_ident(c)}" for c in latest.columns}
    conf = {USER_METADATA_CONF: commit.marker, TXN_APP_ID_CONF: commit.app_id,
            TXN_VERSION_CONF: str(commit.batch)}
    if source_in_memory:  # Delta would copy it once more, to read the same rows in each pass
        conf[MATERIALIZE_SOURCE_CONF] = "none"
    try:
        with _session_conf(spark, conf):
            (
                DeltaTable.forPath(spark, path)
                .alias("t")
                .merge(latest.alias("s"), merge_condition(key, bounds, types))
                .whenMatchedDelete(condition=f"s._op = '{Op.DELETE}' AND s._seq > t._seq")
                .whenMatchedUpdate(condition=f"s._op != '{Op.DELETE}' AND s._seq > t._seq", set=values)
                .whenNotMatchedInsert(condition=f"s._op != '{Op.DELETE}'", values=values)
                .execute()
            )
    except (CapturedException, Py4JJavaError) as exc:
        if not bronze.is_commit_conflict(exc):
            raise
        raise concurrent_silver_write(commit.table) from None


def _merge_in_arrow(spark: SparkSession, path: str, rows: pa.Table, key: Sequence[str], facts: BatchFacts,
                    commit: Commit) -> bool:
    """The MERGE of a batch in memory by :mod:`dvmerge` (no Spark job); False when Delta's MERGE
    must do it instead (nothing was written; the reason is logged once per table)."""
    columns = [c for c in rows.column_names if c not in bronze.META_COLUMNS] + list(SILVER_META)
    try:
        with _session_conf(spark, {USER_METADATA_CONF: commit.marker}):
            dvmerge.merge(spark, path, rows, key, facts.key_bounds, columns, app_id=commit.app_id,
                          batch=commit.batch)
    except dvmerge.Unsupported as exc:
        if (commit.table, str(exc)) not in _FALLBACKS_LOGGED:
            _FALLBACKS_LOGGED.add((commit.table, str(exc)))
            log.info("table %s: silver is merged by Delta's MERGE (%s)", commit.table, exc)
        return False
    except (CapturedException, Py4JJavaError) as exc:
        if not bronze.is_commit_conflict(exc):
            raise
        raise concurrent_silver_write(commit.table) from None
    return True


_FALLBACKS_LOGGED: set[tuple[str, str]] = set()


def _apply_history(spark: SparkSession, path: str, changes: DataFrame, key: Sequence[str],
                   transform: Transform | None, commit: Commit) -> None:
    """SCD type 2: the batch's versions, in one commit (see ``history``)."""
    changes = history.shaped(changes, transform)
    if deltalog.newest_version(spark, path) < 0:
        _create(spark, path, history.versions(changes, key), commit, keep_files=False)
        return
    rows = history.merge_rows(changes, spark.read.format("delta").load(path), key)
    enable_deletion_vectors(spark, path, commit.table)
    conf = {USER_METADATA_CONF: commit.marker, TXN_APP_ID_CONF: commit.app_id, TXN_VERSION_CONF: str(commit.batch)}
    try:
        with _session_conf(spark, conf):
            history.merge(spark, path, rows, key)
    except (CapturedException, Py4JJavaError) as exc:
        if not bronze.is_commit_conflict(exc):
            raise
        raise concurrent_silver_write(commit.table) from None


def concurrent_silver_write(table: str) -> ConcurrentRunError:
    return ConcurrentRunError(
        f"table {table}: another run changed silver while this run merged into it (two runs of "
        "this table on one lake, e.g. from two checkouts); this run's MERGE was not committed and "
        f"nothing is lost: run again (`make ingest TABLE={table}`), silver catches up from bronze",
        table=table,
    )


@contextmanager
def _session_conf(spark: SparkSession, conf: dict[str, str]) -> Iterator[None]:
    """Set session confs for one command; Delta reads MERGE's commit options only from them."""
    for name, value in conf.items():
        spark.conf.set(name, value)
    try:
        yield
    finally:
        for name in conf:
            spark.conf.unset(name)
