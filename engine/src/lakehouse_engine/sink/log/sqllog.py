"""A Delta table's log read through public APIs only, for portable mode (:mod:`..portable`).

What :mod:`.deltalog` asks Delta's ``DeltaLog`` in the driver's JVM, here from SQL and Spark
reads that a Spark Connect client may issue: the newest version from ``DESCRIBE HISTORY ...
LIMIT 1``, properties from ``SHOW TBLPROPERTIES``, and a commit's own facts from its commit file
read as text by Spark (the history does not carry the ``SetTransaction`` ids, which the
idempotency checks need). Each is a small Spark job: the price of not reaching the JVM.
"""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from ...identifiers import quote_ident
from ..portable import error_condition
from .commitfile import Commit, parse_commit

# What Spark says when there is no Delta table at a path (nothing there, or files but no log).
_NO_TABLE = ("DELTA_MISSING_DELTA_TABLE", "DELTA_TABLE_NOT_FOUND", "PATH_NOT_FOUND", "DELTA_PATH_DOES_NOT_EXIST")


def _table(path: str) -> str:
    return f"delta.{quote_ident(path)}"


def _no_table(exc: AnalysisException) -> bool:
    condition = error_condition(exc)
    return condition.startswith(_NO_TABLE) or "is not a Delta table" in str(exc)


def newest_version(spark: SparkSession, path: str) -> int:
    """The table's newest commit version, -1 when there is no table."""
    try:
        row = spark.sql(f"DESCRIBE HISTORY {_table(path)} LIMIT 1").select("version").first()
    except AnalysisException as exc:
        if _no_table(exc):
            return -1
        raise
    return -1 if row is None else int(row[0])


def table_property(spark: SparkSession, path: str, name: str) -> str | None:
    """A table property of the newest version (``None`` when unset or there is no table)."""
    try:
        rows = spark.sql(f"SHOW TBLPROPERTIES {_table(path)}").collect()
    except AnalysisException as exc:
        if _no_table(exc):
            return None
        raise
    return next((str(r["value"]) for r in rows if r["key"] == name), None)


def commits_back(spark: SparkSession, path: str, newest: int | None = None) -> Iterator[Commit]:
    """Commits ``newest``, ``newest - 1``, ... 0 (default: from the newest one), each read from its
    commit file; stops where a file is gone (the log was cleaned up after a checkpoint)."""
    if newest is None:
        newest = newest_version(spark, path)
    log = path.rstrip("/") + "/_delta_log"
    for version in range(newest, -1, -1):
        try:
            rows = spark.read.text(f"{log}/{version:020d}.json").collect()
        except AnalysisException as exc:
            if error_condition(exc).startswith("PATH_NOT_FOUND"):
                return
            raise
        yield parse_commit(version, [str(r[0]) for r in rows])
