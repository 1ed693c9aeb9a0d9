"""A Delta transaction opened on a table for one app id's next version, and its commit.

The engine's own commits (files written outside Spark, silver's MERGE in Arrow, schema
changes) go through Delta's optimistic transaction, so they carry the same guarantees as a
DataFrame write:

- ``SetTransaction(app_id, version)`` records the version, as the ``txnAppId`` /
  ``txnVersion`` write options do. When the app id already committed this version (another
  run took the same batch number), nothing is committed and :class:`AlreadyCommitted` is raised
  (a DataFrame append would skip silently). The app id's last version is found by reading the
  newest commit files back to the one that carries it, usually the very last one
  (:func:`.localfiles.last_txn_version`): Delta's own lookup (``txnVersion``) rebuilds the
  table state with a Spark job, 1-5 s per commit.
- The transaction declares it read the whole table, so any commit that lands between its start
  and its end is a conflict: Delta fails this commit instead of appending beside it.
- The commit info records a ``WRITE`` with ``user_metadata`` (the checkpoint or silver's
  marker), like the append.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from .. import portable
from ..spark import jvm_view
from . import deltalog, localfiles


class AlreadyCommitted(Exception):
    """Another writer committed ``version`` of this app id first: nothing was committed."""


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
        if localfiles.is_local(table_path):
            folder = localfiles.log_dir(str(log.dataPath().toUri().getPath()))
            last = localfiles.last_txn_version(folder, int(txn.snapshot().version()), app_id)
        if last is None:
            last = int(txn.txnVersion(app_id))  # not local, or the commit files were cleaned up
        else:
            txn.readTxn().addOne(app_id)  # what txnVersion records, without its rebuild of the state
        if last >= version:
            raise AlreadyCommitted(f"{app_id} already committed version {version}")
    return Transaction(jvm, log, txn, app_id, version)


def record_version(spark: SparkSession, table_path: str, *, app_id: str, version: int, user_metadata: str) -> int:
    """Commit no file, only ``app_id``'s ``version`` and ``user_metadata`` (a ``WRITE``); returns
    the new table version. Raises as :func:`open_transaction` does, and Delta's exceptions on a
    conflicting concurrent commit.

    In portable mode this is an append of no rows with Delta's ``txnAppId``/``txnVersion``
    options: Delta skips it silently when the version is taken, which the commit read back tells."""
    if portable.active(spark):
        (spark.read.format("delta").load(table_path).limit(0).write.format("delta").mode("append")
         .option("userMetadata", user_metadata).option("txnAppId", app_id).option("txnVersion", version)
         .save(table_path))
        if not deltalog.landed(spark, table_path, app_id, version, user_metadata):
            raise AlreadyCommitted(f"{app_id} already committed version {version}")
        return deltalog.newest_version(spark, table_path)
    opened = open_transaction(spark, table_path, app_id, version)
    return opened.commit(opened.jvm.java.util.ArrayList(), user_metadata)
