"""Portable mode: the lake written through public Spark and Delta APIs only.

The engine's fast paths reach into the driver's JVM (Delta's ``DeltaLog`` and optimistic
transactions, files committed from their metadata, silver merged in Arrow with deletion vectors)
and read a local lake's ``_delta_log`` as files. Spark Connect (``sc://`` masters) and shared or
serverless Databricks compute have no driver JVM to reach, and the client may not see the lake's
disk. In portable mode the same steps go through what every Spark offers instead:

- rows reach Delta by DataFrame writes, with Delta's ``txnAppId``/``txnVersion`` idempotency and
  the checkpoint as ``userMetadata``; silver changes by SQL ``MERGE INTO`` with the same session
  confs; properties by ``ALTER TABLE``/``SHOW TBLPROPERTIES``;
- the log is read by ``DESCRIBE HISTORY`` and by reading commit files as text through Spark;
- snapshot tasks run as ``mapInArrow`` over a DataFrame of task numbers, not as an RDD.

It is on for a Spark Connect session, and for any session when ``spark.portable: true`` is set
(to run the portable paths on a classic session, e.g. to compare the two). Both paths apply the
same rules and give the same silver; the portable one costs more Spark jobs per commit.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_forced = False


def force(on: bool) -> None:
    """Portable mode for every session of this process (``spark.portable``), or only for Spark
    Connect ones."""
    global _forced
    _forced = on


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (a client of a remote Spark, no JVM here)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def active(spark: SparkSession) -> bool:
    """Whether the engine must use public APIs only on this session."""
    return _forced or is_connect(spark)


@functools.cache  # evaluated by every `except` that names it: the imports are looked up once
def spark_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a failed Spark or Delta operation raises: pyspark's re-raised ones and
    py4j's on a classic session, the gRPC client's on Spark Connect (when its packages are
    installed: they are needed only for a Connect session)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import CapturedException

    try:
        from pyspark.errors.exceptions.connect import SparkConnectException
    except ImportError:  # no grpc: no Spark Connect session can exist
        return (CapturedException, Py4JJavaError)
    return (CapturedException, Py4JJavaError, SparkConnectException)


def error_condition(exc: BaseException) -> str:
    """Spark's error condition of ``exc`` (``DELTA_CONCURRENT_APPEND``...), "" when it has none."""
    getter = getattr(exc, "getCondition", None)
    try:
        return str(getter() or "") if callable(getter) else ""
    except Exception:  # a py4j error whose JVM is gone
        return ""


def master_and_conf(spark: SparkSession) -> tuple[str, dict[str, str]]:
    """The session's master and settings. A Spark Connect client does not know the server's
    master: it is reported as ``sc://``, which no code takes for a local one."""
    if is_connect(spark):
        return "sc://", {str(k): str(v) for k, v in spark.conf.getAll.items()}
    context = spark.sparkContext
    return context.master or "", dict(context.getConf().getAll())


def ship(spark: SparkSession, archive: str) -> None:
    """Add a Python archive to the session: every executor's worker imports from it."""
    if is_connect(spark):
        spark.addArtifacts(archive, pyfile=True)
    else:
        spark.sparkContext.addPyFile(archive)
