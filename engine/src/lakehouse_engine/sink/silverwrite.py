"""Silver's commits: creation, append, Delta's MERGE or :mod:`dvmerge`'s, history, a batch marked
applied.

Each is one Delta commit carrying the silver marker (:class:`~.silverlineage.Commit`) as an
idempotent transaction (``silver:<table>``, version = the bronze batch applied): Delta skips a
write of a version its app id has committed, and a commit losing a race to another run's is a
conflict, raised as :func:`concurrent_silver_write`. Delta reads MERGE's commit options only
from session confs, set for the one command by :func:`session_conf`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import reduce
from typing import Any

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import ConcurrentRunError
from ..identifiers import quote_ident
from ..ops import Op
from . import bronze, columnmap, dvmerge, history, portable, sqlmerge
from .log import deltalog, transaction
from .portable import spark_errors
from .silverbatch import BatchFacts
from .silverlineage import Commit

log = logging.getLogger(__name__)
_with_properties: set[str] = set()  # silver tables this process saw with NEW_TABLE_PROPERTIES set

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
# Delta's idempotent DML: a MERGE whose version is not above the app id's last one is skipped.
TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
MATERIALIZE_SOURCE_CONF = "spark.databricks.delta.merge.materializeSource"
DELETION_VECTORS = "delta.enableDeletionVectors"
# Silver checkpoints every 100 commits, as bronze does (see bronze.CHECKPOINT_INTERVAL), where
# Delta's default is 10: the checkpoint is a Spark job on the committing thread (1.5 s warm, 6 s
# and +110 MB of JVM heap as a snapshot's first job). A follow commits silver every cycle, so it
# paid one every tenth cycle; a 20M-row snapshot paid one at its tenth batch. The price is a
# reader's replay of up to 99 commit files after the checkpoint (measured in the README's bench
# section). A team's own interval stands.
SILVER_CHECKPOINT_INTERVAL = 100
# A new silver table's properties, wherever it is created (a MERGE's first batch, a snapshot's
# seeded files, a rebuild): deletion vectors on, otherwise its first MERGE turns them on with a
# commit of its own (an ALTER TABLE, 1-3 s of a first catch-up).
NEW_TABLE_PROPERTIES = {DELETION_VECTORS: "true", bronze.CHECKPOINT_INTERVAL: str(SILVER_CHECKPOINT_INTERVAL)}
# An open cost this large gives every input file a read partition of its own: rows copied from
# bronze keep its files' key ranges (snapshot chunks), which the MERGE's key bounds then skip.
ONE_PARTITION_PER_FILE = {"spark.sql.files.openCostInBytes": str(1 << 40)}


def merge_condition(key: Sequence[str], bounds: Sequence[tuple[str, Any, Any]],
                    types: dict[str, T.DataType]) -> Column:
    """Key equality, plus each bounded key column between the batch's min and max: a
    target-only predicate, which Delta uses to skip files by their statistics."""
    terms = [F.col(f"t.{quote_ident(k)}") == F.col(f"s.{quote_ident(k)}") for k in key]
    for k, low, high in bounds:
        column = F.col(f"t.{quote_ident(k)}")
        terms.append(column.between(F.lit(low).cast(types[k]), F.lit(high).cast(types[k])))
    return reduce(lambda a, b: a & b, terms)


def set_table_properties(spark: SparkSession, path: str, table: str) -> None:
    """Give a silver table made before this engine version the :data:`NEW_TABLE_PROPERTIES` it
    has unset, in one metadata commit, once; a property someone set, to anything, is left as it is.

    Looked at once per process and table: reading the properties lists the table's Delta log,
    which a follow would do every cycle. Someone turning deletion vectors off meanwhile is still
    seen where it matters: :mod:`dvmerge` reads the property from the table's state and leaves
    such a merge to Delta's MERGE, which then rewrites files instead."""
    if path in _with_properties:
        return
    unset = {name: value for name, value in NEW_TABLE_PROPERTIES.items()
             if deltalog.table_property(spark, path, name) is None}
    if unset:
        assignments = ", ".join(f"'{name}' = '{value}'" for name, value in unset.items())
        try:
            spark.sql(f"ALTER TABLE delta.{quote_ident(path)} SET TBLPROPERTIES ({assignments})")
        except spark_errors() as exc:
            if not bronze.is_commit_conflict(exc):
                raise
            raise concurrent_silver_write(table) from None
    _with_properties.add(path)


def _writer(rows: DataFrame, commit: Commit) -> DataFrameWriter:
    """A Delta write of ``rows`` carrying ``commit``'s marker, as an idempotent transaction."""
    return (rows.write.format("delta").option("userMetadata", commit.marker)
            .option("txnAppId", commit.app_id).option("txnVersion", commit.batch))


def create(spark: SparkSession, path: str, rows: DataFrame, commit: Commit, *, keep_files: bool) -> None:
    """Create silver with ``rows``; ``keep_files``: one file per input file (no shuffle)."""
    try:
        with session_conf(spark, ONE_PARTITION_PER_FILE if keep_files else {}):
            (_writer(rows, commit).options(**NEW_TABLE_PROPERTIES)
             .options(**columnmap.creation_properties(rows.columns)).mode("error").save(path))
    except spark_errors() as exc:
        # Another run created silver since we looked: a creation conflict, or "path exists".
        created_meanwhile = isinstance(exc, AnalysisException) and bronze.exists(spark, path)
        if not (created_meanwhile or bronze.is_commit_conflict(exc)):
            raise
        raise concurrent_silver_write(commit.table) from None


def append(spark: SparkSession, path: str, rows: DataFrame, commit: Commit) -> None:
    """Append new keys. Like the MERGE, Delta skips it when this app id has already committed
    this batch or a later one, and fails it when another run commits to silver meanwhile."""
    try:
        with session_conf(spark, ONE_PARTITION_PER_FILE):
            _writer(rows, commit).mode("append").save(path)
    except spark_errors() as exc:
        if not bronze.is_commit_conflict(exc):
            raise
        raise concurrent_silver_write(commit.table) from None


def record_applied(spark: SparkSession, path: str, commit: Commit) -> None:
    """Mark batches without rows as applied: a commit of no file, only the marker and the
    idempotent transaction (an empty append through Spark costs seconds of jobs for the same)."""
    try:
        transaction.record_version(spark, path, app_id=commit.app_id, version=commit.batch,
                                   user_metadata=commit.marker)
    except transaction.AlreadyCommitted:
        return  # as Delta skips an append of a version its app id has committed
    except spark_errors() as exc:
        if not bronze.is_commit_conflict(exc):
            raise
        raise concurrent_silver_write(commit.table) from None


def merge(spark: SparkSession, path: str, latest: DataFrame, key: Sequence[str],
          bounds: Sequence[tuple[str, Any, Any]], commit: Commit, *, source_in_memory: bool) -> None:
    """Delta's MERGE of ``latest`` (the newest change per key) under the sequence guard."""
    from delta.tables import DeltaTable

    types = {f.name: f.dataType for f in latest.schema.fields}
    values: dict[str, str | Column] = {quote_ident(c): f"s.{quote_ident(c)}" for c in latest.columns}
    conf = {USER_METADATA_CONF: commit.marker, TXN_APP_ID_CONF: commit.app_id,
            TXN_VERSION_CONF: str(commit.batch)}
    if source_in_memory:  # Delta would copy it once more, to read the same rows in each pass
        conf[MATERIALIZE_SOURCE_CONF] = "none"
    try:
        with session_conf(spark, conf):
            if portable.active(spark):
                sqlmerge.merge(spark, path, latest, sqlmerge.key_condition(key, bounds, types), [
                    f"WHEN MATCHED AND s._op = '{Op.DELETE}' AND s._seq > t._seq THEN DELETE",
                    f"WHEN MATCHED AND s._op != '{Op.DELETE}' AND s._seq > t._seq THEN UPDATE SET "
                    + sqlmerge.assignments(latest.columns),
                    f"WHEN NOT MATCHED AND s._op != '{Op.DELETE}' THEN INSERT " + sqlmerge.insertion(latest.columns),
                ])
                return
            (
                DeltaTable.forPath(spark, path)
                .alias("t")
                .merge(latest.alias("s"), merge_condition(key, bounds, types))
                .whenMatchedDelete(condition=f"s._op = '{Op.DELETE}' AND s._seq > t._seq")
                .whenMatchedUpdate(condition=f"s._op != '{Op.DELETE}' AND s._seq > t._seq", set=values)
                .whenNotMatchedInsert(condition=f"s._op != '{Op.DELETE}'", values=values)
                .execute()
            )
    except spark_errors() as exc:
        if not bronze.is_commit_conflict(exc):
            raise
        raise concurrent_silver_write(commit.table) from None


def merge_in_arrow(spark: SparkSession, path: str, rows: pa.Table, key: Sequence[str], facts: BatchFacts,
                   commit: Commit) -> bool:
    """The MERGE of a batch in memory by :mod:`dvmerge` (no Spark job); False when Delta's MERGE
    must do it instead (nothing was written; the reason is logged once per table, except portable
    mode's: there it is always so)."""
    if portable.active(spark):  # dvmerge commits through Delta's transaction in the JVM
        return False
    columns = [c for c in rows.column_names if c not in bronze.META_COLUMNS] + list(history.CHANGE_META)
    try:
        with session_conf(spark, {USER_METADATA_CONF: commit.marker}):
            dvmerge.merge(spark, path, rows, key, facts.key_bounds, columns, app_id=commit.app_id,
                          batch=commit.batch)
    except dvmerge.Unsupported as exc:
        if (commit.table, str(exc)) not in _FALLBACKS_LOGGED:
            _FALLBACKS_LOGGED.add((commit.table, str(exc)))
            log.info("table %s: silver is merged by Delta's MERGE (%s)", commit.table, exc)
        return False
    except spark_errors() as exc:
        if not bronze.is_commit_conflict(exc):
            raise
        raise concurrent_silver_write(commit.table) from None
    return True


_FALLBACKS_LOGGED: set[tuple[str, str]] = set()


def apply_history(spark: SparkSession, path: str, changes: DataFrame, key: Sequence[str],
                  transform: Callable[[DataFrame], DataFrame] | None, commit: Commit) -> None:
    """SCD type 2: the batch's versions, in one commit (see ``history``)."""
    changes = history.shaped(changes, transform)
    if deltalog.newest_version(spark, path) < 0:
        create(spark, path, history.versions(changes, key), commit, keep_files=False)
        return
    rows = history.merge_rows(changes, spark.read.format("delta").load(path), key)
    set_table_properties(spark, path, commit.table)
    conf = {USER_METADATA_CONF: commit.marker, TXN_APP_ID_CONF: commit.app_id, TXN_VERSION_CONF: str(commit.batch)}
    try:
        with session_conf(spark, conf):
            history.merge(spark, path, rows, key)
    except spark_errors() as exc:
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
def session_conf(spark: SparkSession, conf: dict[str, str]) -> Iterator[None]:
    """Set session confs for one command; Delta reads MERGE's commit options only from them."""
    for name, value in conf.items():
        spark.conf.set(name, value)
    try:
        yield
    finally:
        for name in conf:
            spark.conf.unset(name)
