"""Commit Parquet files written outside Spark to a Delta table, as one idempotent append.

The snapshot's tasks already hold each chunk as Arrow columns; writing them with pyarrow straight
into the table's folder and committing those files (Delta ``AddFile`` actions) skips the JVM's
second pass over every row (read staged data, encode it again, collect statistics), which cost as
much CPU as reading the source. The commit goes through Delta's own optimistic transaction, so it
carries the same guarantees as a DataFrame append:

- ``SetTransaction(app_id, version)`` records the version, as the ``txnAppId`` /
  ``txnVersion`` write options do. When the app id already committed this version (another
  run took the same batch number), nothing is committed and :class:`AlreadyCommitted` is raised
  (a DataFrame append would skip silently). The app id's last version is found by reading the
  newest commit files back to the one that carries it, usually the very last one: Delta's own
  lookup (``txnVersion``) rebuilds the table state with a Spark job, 1-5 s per commit.
- The transaction declares it read the whole table, so any commit that lands between its start
  and its end is a conflict: Delta fails this commit instead of appending beside it.
- The commit info records a ``WRITE`` with ``user_metadata`` (the checkpoint), like the append.
- The files hold the columns under the names the table reads them by (:mod:`columnmap`): the
  writer says which it used, and the commit is refused (:class:`StaleColumns`) unless they are
  exactly the transaction's. Statistics are named the same way.
- Each file's statistics are exact: its row count and the min/max of the columns given (Delta
  answers ``COUNT(*)`` and skips files from them, so they must never be wrong).

Files of a commit that fails are left unreferenced in the folder; ``VACUUM`` removes them, as it
does for any failed Delta write. Only local lake roots are written this way (pyarrow writes local
files); other roots use a Spark append.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from . import columnmap
from .columnmap import StaleColumns
from .spark import jvm_view


@dataclass(frozen=True)
class DataFile:
    """A Parquet file inside the table's folder, with what its statistics need."""

    path: str  # absolute local path, inside the table's folder
    rows: int
    min_values: Mapping[str, Any] = field(default_factory=dict)
    max_values: Mapping[str, Any] = field(default_factory=dict)
    null_counts: Mapping[str, int] = field(default_factory=dict)

    def stats(self, physical: Mapping[str, str]) -> str:
        """Delta's statistics JSON; it names columns by ``physical`` name, as the files do."""
        def named(values: Mapping[str, Any]) -> dict[str, Any]:
            return {physical[k]: v for k, v in values.items()}

        return json.dumps({"numRecords": self.rows, "minValues": named(self.min_values),
                           "maxValues": named(self.max_values), "nullCount": named(self.null_counts)})


class AlreadyCommitted(Exception):
    """Another writer committed ``version`` of this app id first: nothing was committed."""


def is_local(path: str) -> bool:
    return path.startswith("/") or path.startswith("file:/")


def local_path(path: str) -> str:
    """The file system path of a local lake path (``file:///abs``, ``/abs/../x``: ``/abs``, ``/x``)."""
    plain = os.path.normpath(path[len("file:"):] if path.startswith("file:") else path)
    return "/" + plain.lstrip("/") if plain.startswith("/") else plain


def newest_version(log_dir: Path) -> int | None:
    """The newest commit version in a ``_delta_log`` folder; None when it holds no commit."""
    versions = [int(p.name[:20]) for p in log_dir.glob("*.json") if p.name[:20].isdigit()]
    return max(versions) if versions else None


def last_txn_version(log_dir: Path, newest: int, app_id: str) -> int | None:
    """The last ``SetTransaction`` version of ``app_id`` in commits ``newest``, ``newest - 1``,
    ...; -1 when no commit back to version 0 has one; None when a needed commit file is gone
    (log cleanup after a checkpoint), so the caller must ask Delta."""
    for version in range(newest, -1, -1):
        try:
            lines = (log_dir / f"{version:020d}.json").read_text().splitlines()
        except FileNotFoundError:
            return None
        for line in lines:
            txn = json.loads(line).get("txn") if '"txn"' in line else None
            if txn is not None and txn.get("appId") == app_id:
                return int(txn["version"])
    return -1


@dataclass(frozen=True)
class Transaction:
    """A Delta transaction opened on a table for one app id's next version (py4j objects)."""

    jvm: Any
    log: Any  # the table's DeltaLog
    txn: Any
    app_id: str | None
    version: int

    def commit(self, actions: Any, user_metadata: str) -> int:
        """Commit ``actions`` (a Java list) as a ``WRITE`` carrying ``user_metadata`` and, with an
        app id, its ``SetTransaction``; returns the new table version."""
        jvm = self.jvm
        none = jvm.scala.Option.empty()
        operation = jvm.org.apache.spark.sql.delta.DeltaOperations.Write(
            jvm.org.apache.spark.sql.SaveMode.Append, none, none, jvm.scala.Option.apply(user_metadata),
            none, none, none, none, none,
        )
        return self.commit_operation(actions, operation)

    def commit_operation(self, actions: Any, operation: Any) -> int:
        """Commit ``actions`` (a Java list) as ``operation`` (a ``DeltaOperations`` value) with,
        given an app id, its ``SetTransaction``; returns the new table version."""
        jvm = self.jvm
        if self.app_id is not None:
            now_ms = int(time.time() * 1000)
            actions.add(jvm.org.apache.spark.sql.delta.actions.SetTransaction(
                self.app_id, self.version, jvm.scala.Option.apply(now_ms)))
        seq = jvm.org.apache.spark.api.python.PythonUtils.toSeq(actions)
        return int(self.txn.commit(seq, operation))


def open_transaction(spark: SparkSession, table_path: str, app_id: str | None, version: int) -> Transaction:
    """Start a transaction on the existing table that reads the whole table (any commit landing
    before ours is a conflict). Raises :class:`AlreadyCommitted` when ``app_id`` already
    committed ``version`` or later.

    The transaction also counts ``app_id`` as read, as Delta's own ``txnVersion`` does: only
    then is a commit of the same app id landing meanwhile a conflict. ``readWholeTable`` alone
    does not make it one when that commit is a blind append (Delta's default isolation lets
    blind appends through), and two runs would both commit the same batch."""
    jvm = jvm_view(spark)
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table_path)
    txn = log.startTransaction()
    txn.readWholeTable()
    if app_id is not None:
        last = None
        if is_local(table_path):
            root = local_path(str(log.dataPath().toUri().getPath()))
            last = last_txn_version(Path(root) / "_delta_log", int(txn.snapshot().version()), app_id)
        if last is None:
            last = int(txn.txnVersion(app_id))  # not local, or the commit files were cleaned up
        else:
            txn.readTxn().addOne(app_id)  # what txnVersion records, without its rebuild of the state
        if last >= version:
            raise AlreadyCommitted(f"{app_id} already committed version {version}")
    return Transaction(jvm, log, txn, app_id, version)


def record_version(spark: SparkSession, table_path: str, *, app_id: str, version: int, user_metadata: str) -> int:
    """Commit no file, only ``app_id``'s ``version`` and ``user_metadata`` (a ``WRITE``); returns
    the new table version. Raises as :func:`append_files` does."""
    opened = open_transaction(spark, table_path, app_id, version)
    return opened.commit(opened.jvm.java.util.ArrayList(), user_metadata)


def append_files(spark: SparkSession, table_path: str, files: Sequence[DataFile], *, app_id: str,
                 version: int, user_metadata: str, physical: Mapping[str, str]) -> int:
    """Commit ``files`` to the existing Delta table at ``table_path``; returns the new version.
    ``physical``: the column names the files were written with (logical -> name in the file);
    statistics are given by logical name.

    Raises :class:`AlreadyCommitted` when ``app_id`` already committed ``version`` (or later),
    :class:`StaleColumns` when the table's columns are no longer ``physical``, and Delta's own
    exceptions on a conflicting concurrent commit."""
    opened = open_transaction(spark, table_path, app_id, version)
    jvm, metadata = opened.jvm, opened.txn.metadata()
    reads = columnmap.physical_names(str(metadata.schemaString()), columnmap.configuration(metadata))
    if reads != dict(physical):  # the table's columns changed since the files were written
        raise StaleColumns(f"{table_path} reads columns {reads}, the files hold {dict(physical)}")
    delta = jvm.org.apache.spark.sql.delta
    root = local_path(str(opened.log.dataPath().toUri().getPath())).rstrip("/") + "/"
    files = [replace(data, path=local_path(data.path)) for data in files]
    none = jvm.scala.Option.empty()
    empty_map = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(jvm.java.util.HashMap())
    now_ms = int(time.time() * 1000)
    actions = jvm.java.util.ArrayList()
    for data in files:
        if not data.path.startswith(root):
            raise ValueError(f"{data.path} is not inside the table folder {root}")
        relative = data.path[len(root):]
        size = os.path.getsize(data.path)
        actions.add(delta.actions.AddFile(
            jvm.java.net.URI(None, None, relative, None).toString(),  # percent-encoded, as Delta expects
            empty_map, size, now_ms, True, data.stats(reads), None, None, none, none, none, none, none,
        ))
    return opened.commit(actions, user_metadata)
