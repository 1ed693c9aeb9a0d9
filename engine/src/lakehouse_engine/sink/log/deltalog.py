"""A Delta table's newest commits, read as files instead of through ``DeltaTable.history()``.

``history()`` is a Spark job, and without a limit it reads every commit file of the table: per
follow-mode batch that is a fixed cost of a few hundred milliseconds, and it grows with the table.
What the pipeline asks of the log (did our commit land, the newest checkpoint, the last bronze
batch merged into silver) is nearly always answered by the newest commit, so these helpers read
commit files from the newest one back, one small read each, through Delta's own ``DeltaLog`` and
log store (so any Hadoop file system works), and the caller stops at the first that answers.
In portable mode (no JVM to reach) :mod:`.sqllog` answers the same questions through SQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from .. import portable
from ..spark import jvm_view
from . import sqllog
from .commitfile import Commit, parse_commit


def delta_log(spark: SparkSession, path: str) -> Any:  # py4j JavaObject: org.apache.spark.sql.delta.DeltaLog
    """Delta's cached log object of the table at ``path`` (no I/O until it is asked something)."""
    return jvm_view(spark).org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)


def snapshot(spark: SparkSession, path: str) -> Any:  # py4j JavaObject: Delta's Snapshot
    """The table's newest snapshot (one listing of the log); version -1 when there is no table."""
    none = jvm_view(spark).scala.Option.empty()
    return delta_log(spark, path).update(False, none, none)


def newest_version(spark: SparkSession, path: str) -> int:
    """The table's newest commit version, -1 when there is no table (one listing of the log)."""
    if portable.active(spark):
        return sqllog.newest_version(spark, path)
    return int(snapshot(spark, path).version())


def table_property(spark: SparkSession, path: str, name: str) -> str | None:
    """A table property of the newest snapshot (``None`` when unset or there is no table)."""
    if portable.active(spark):
        return sqllog.table_property(spark, path, name)
    value = snapshot(spark, path).metadata().configuration().get(name)
    return str(value.get()) if value.isDefined() else None


def commits_back(spark: SparkSession, path: str, newest: int | None = None) -> Iterator[Commit]:
    """Commits ``newest``, ``newest - 1``, ... 0 (default: from the newest one).

    Stops early where a commit file is gone (the log was cleaned up after a checkpoint): such
    commits are not in ``history()`` either."""
    if portable.active(spark):
        yield from sqllog.commits_back(spark, path, newest)
        return
    log = delta_log(spark, path)
    if newest is None:
        newest = newest_version(spark, path)
    jvm = jvm_view(spark)
    store, conf, log_path = log.store(), log.newDeltaHadoopConf(), log.logPath()
    for version in range(newest, -1, -1):
        try:
            lines = store.read(jvm.org.apache.hadoop.fs.Path(log_path, f"{version:020d}.json"), conf)
        except Py4JJavaError as exc:
            if exc.java_exception.getClass().getName() == "java.io.FileNotFoundException":
                return
            raise
        yield parse_commit(version, str(lines.mkString("\n")).splitlines())


def landed(spark: SparkSession, path: str, app_id: str, version: int, marker: str) -> bool:
    """Whether the commit of ``app_id``'s ``version`` carrying ``marker`` (its whole
    ``userMetadata``) is in the table.

    Once a commit of ``app_id`` at ``version`` is in, Delta lets no commit of ``app_id`` at
    ``version`` or below follow it (it skips them, or fails them as conflicts). So, reading back
    from the newest commit, the first one of ``app_id`` at ``version`` or below decides: ours, or
    the commit of another run that made Delta skip ours. Usually that is the newest commit."""
    for commit in commits_back(spark, path):
        found = commit.txns.get(app_id)
        if found is not None and found <= version:
            return commit.user_metadata == marker
    return False
