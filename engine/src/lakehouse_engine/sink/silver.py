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

This module decides how a batch goes to silver; :mod:`silverwrite` makes the commits,
:mod:`silverbatch` holds the batch in memory and its facts, :mod:`silverlineage` the marker and
the check that bronze still holds what silver merged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..errors import ConfigError
from ..identifiers import quote_ident
from ..ops import Op
from ..state.checkpoint import Checkpoint
from ..state.lakechange import LakeChange
from . import bronze, columnmap, evolve, history, silverbatch, silverlineage, silverwrite
from .bronze import latest_per_key
from .log import deltalog, localfiles
from .portable import spark_errors
from .silverlineage import Commit, Lineage
from .silverwrite import concurrent_silver_write

log = logging.getLogger(__name__)

SILVER_META = history.CHANGE_META
# A batch of up to this many bronze rows is merged from the driver's memory (Arrow): its facts
# need no Spark job and the MERGE reads it in each pass without going back to bronze.
LOCAL_BATCH_ROWS = 50_000
# Bronze rows a catch-up holds for silver, as it committed them, before silver takes them (about
# 100 MB of Arrow for a table of 20 mostly short columns): a 500k-row batch merges from memory in
# a few seconds, where Delta's MERGE takes about 15 s on 2 cores.
HELD_ROWS = 500_000
Transform = Callable[[DataFrame], DataFrame]


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
        rows = _shaped(latest_per_key(changes, key).select(*_columns(changes), *SILVER_META), transform)
    # No idempotent-transaction options: silver's app id has committed this batch already, so
    # Delta would skip the write; the next MERGE's higher batch number is accepted as usual.
    marker = Commit("", checkpoint.batch, table, checkpoint.run_id, checkpoint.generation).marker
    writer = rows.write.format("delta").option("userMetadata", marker)
    try:
        if bronze.exists(spark, silver_path):
            # Bronze's columns may have changed since silver was made (a DDL replayed by rebuilding).
            writer.mode("overwrite").option("overwriteSchema", "true").save(silver_path)
        else:
            (writer.options(**silverwrite.NEW_TABLE_PROPERTIES).options(**columnmap.creation_properties(rows.columns))
             .mode("error").save(silver_path))
    except spark_errors() as exc:
        if not bronze.is_commit_conflict(exc):
            raise
        raise concurrent_silver_write(table) from None
    return checkpoint.batch


def applied_batch(spark: SparkSession, path: str) -> int:
    """The last bronze batch merged into silver; -1 when silver does not exist yet."""
    return int(marker(spark, path).get("bronze_batch", -1))


def marker(spark: SparkSession, path: str, newest: int | None = None) -> dict[str, Any]:
    """The newest silver commit's marker: ``bronze_batch`` (the last bronze batch merged) and,
    after a schema change, ``schema_batch`` (the last bronze schema change replayed).
    ``newest``: the table's newest version when the caller has it (else the log is listed)."""
    for commit in deltalog.commits_back(spark, path, newest):
        if commit.user_metadata is not None:  # not on table creation or maintenance commits
            return dict(json.loads(commit.user_metadata))
    return {}


def pending_schema_changes(spark: SparkSession, bronze_path: str, silver_path: str, upto: int, *,
                           saved: Mapping[str, Any] | None = None,
                           bronze_newest: int | None = None) -> list[tuple[int, tuple[LakeChange, ...]]]:
    """The bronze schema changes silver has yet to replay, oldest first: (batch, changes).
    ``saved``: silver's :func:`marker` and ``bronze_newest`` bronze's newest version, when the
    caller read them (each saves a listing of a Delta log)."""
    saved = marker(spark, silver_path) if saved is None else saved
    replayed = max(int(saved.get("bronze_batch", -1)), int(saved.get("schema_batch", -1)))
    found = []
    for commit in deltalog.commits_back(spark, bronze_path, bronze_newest):
        if commit.operation != "WRITE" or commit.user_metadata is None:
            continue
        checkpoint = Checkpoint.from_json(commit.user_metadata)
        if checkpoint.batch <= replayed:
            break
        if checkpoint.batch <= upto and checkpoint.schema_changes:
            found.append((checkpoint.batch, checkpoint.schema_changes))
    return found[::-1]


@dataclass(frozen=True)
class _Job:
    """One :func:`apply`'s arguments, as its steps share them."""

    bronze_path: str
    silver_path: str
    key: Sequence[str]
    upto: int  # the last bronze batch to apply
    done: int  # the last bronze batch silver has merged (-1: none)
    name: str  # the table, in errors
    transform: Transform | None
    scd_type: int


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
    # Each log is listed once here: a listing reads the whole _delta_log folder (on a local or
    # HDFS lake Hadoop stats every file in it, about 36 us each), and nothing below commits
    # before the steps that read them are done.
    newest, bronze_newest = deltalog.newest_version(spark, silver_path), deltalog.newest_version(spark, bronze_path)
    saved = marker(spark, silver_path, newest)
    job = _Job(bronze_path, silver_path, key, upto_batch, int(saved.get("bronze_batch", -1)),
               table or silver_path.rstrip("/").rsplit("/", 1)[-1], transform, scd_type)
    lineage = silverlineage.lineage(spark, bronze_path, upto_batch, job.done, bronze_newest)
    exists = newest >= 0  # a rebuild returns; nothing else creates it
    if exists:
        lineage.check(saved, job.name)
        if lineage.generation not in (None, int(saved.get("generation", 0))):
            return _refreshed(spark, job, lineage)
    if job.done >= upto_batch:
        return 0
    if exists:
        replay = pending_schema_changes(spark, bronze_path, silver_path, upto_batch, saved=saved,
                                        bronze_newest=bronze_newest)
        if replay and (scd_type != 1 or transform is not None):
            # A transform's or history's columns follow from bronze's only through their code:
            # silver is made anew from bronze, which already holds the changes.
            return _rebuilt(spark, job)
        if replay:
            _evolve(spark, job, saved, replay, table_features)
            recent = None
    changes = bronze.read_batches(spark, bronze_path, job.done, upto_batch)
    commit = Commit(app_id=f"silver:{job.name}", batch=upto_batch, table=job.name, run=lineage.run,
                    generation=lineage.generation or 0)
    if scd_type == 2:
        silverwrite.apply_history(spark, silver_path, changes, key, transform, commit)
    elif not exists:
        _create(spark, job, changes, commit)
    else:
        _merge_batches(spark, job, changes, commit, recent)
    return upto_batch - job.done


def _rebuilt(spark: SparkSession, job: _Job) -> int:
    """Silver made anew from bronze (:func:`rebuild`); returns the batches it applied."""
    return rebuild(spark, bronze_path=job.bronze_path, silver_path=job.silver_path, key=job.key,
                   transform=job.transform, table=job.name, scd_type=job.scd_type) - job.done


def _refreshed(spark: SparkSession, job: _Job, lineage: Lineage) -> int:
    """A full refresh replaced bronze's rows: silver keeps the state before it until every chunk
    is in bronze, then is replaced in one commit (never merged into: its keys and bronze's would
    mix two copies of the table)."""
    if not lineage.chunks_read:
        log.info("table %s: a full refresh is under way: silver keeps its state until every chunk "
                 "is read", job.name)
        return 0
    log.info("table %s: the full refresh's chunks are all read: silver is made anew from bronze", job.name)
    return _rebuilt(spark, job)


def _evolve(spark: SparkSession, job: _Job, saved: Mapping[str, Any],
            replay: Sequence[tuple[int, tuple[LakeChange, ...]]], table_features: Collection[str]) -> None:
    """Bronze's rows already have the new columns: silver takes them first, then merges."""
    evolved = json.dumps({**saved, "schema_batch": replay[-1][0]})
    evolve.evolve_silver(spark, job.silver_path, [c for _, changes in replay for c in changes],
                         SILVER_META, evolved, table_features)


def _create(spark: SparkSession, job: _Job, changes: DataFrame, commit: Commit) -> None:
    """Silver's first commit: the batches' rows, one file per bronze file when they are all
    snapshot rows (disjoint keys, no per-key window needed)."""
    snapshot_only = (changes.where(F.col("_op") != Op.READ.value).isEmpty()  # Parquet statistics answer
                     and not bronze.repaired_after(spark, job.bronze_path, job.done))
    rows = changes if snapshot_only else latest_per_key(changes, job.key)
    silverwrite.create(spark, job.silver_path, _shaped(rows.select(*_columns(changes), *SILVER_META), job.transform),
                       commit, keep_files=snapshot_only)


def _merge_batches(spark: SparkSession, job: _Job, changes: DataFrame, commit: Commit,
                   recent: Mapping[int, pa.Table] | None) -> None:
    """The batches into an existing silver: marked applied when empty, appended when they hold
    only new keys, else MERGEd (in Arrow by :mod:`dvmerge` when it can)."""
    in_memory = silverbatch.in_memory(changes, recent, job.done, job.upto, LOCAL_BATCH_ROWS)
    facts = (silverbatch.arrow_facts(in_memory, job.key, changes.schema) if in_memory is not None
             else silverbatch.batch_facts(changes, job.key))
    if facts.rows == 0 and localfiles.is_local(job.silver_path):
        silverwrite.record_applied(spark, job.silver_path, commit)
        return
    appends = facts.rows == 0 or (facts.snapshot_only and _snapshot_only_until(spark, job.bronze_path, job.done)
                                  and not bronze.repaired_after(spark, job.bronze_path, job.done))
    if not appends:
        silverwrite.set_table_properties(spark, job.silver_path, job.name)
        if in_memory is not None and job.transform is None and silverwrite.merge_in_arrow(
                spark, job.silver_path, in_memory, job.key, facts, commit):
            return
    columns = _columns(changes)
    if in_memory is not None:
        changes = spark.createDataFrame(in_memory, schema=changes.schema)
    if appends:
        silverwrite.append(spark, job.silver_path, _shaped(changes.select(*columns, *SILVER_META), job.transform),
                           commit)
        return
    latest = _shaped(latest_per_key(changes, job.key).select(*columns, *SILVER_META), job.transform,
                     drop_deletes=False)
    # A transform may rewrite key values: bounds taken before it could exclude a match.
    silverwrite.merge(spark, job.silver_path, latest, job.key, facts.key_bounds if job.transform is None else (),
                      commit, source_in_memory=in_memory is not None)


def _columns(changes: DataFrame) -> list[str]:
    """The row's own columns of bronze changes (not bronze's metadata), quoted."""
    return [quote_ident(c) for c in changes.columns if c not in bronze.META_COLUMNS]


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
