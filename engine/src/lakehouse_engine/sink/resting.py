"""A long-running process's Spark session, stopped while the process idles.

An idle ``follow`` waits on the binlog stream and costs next to nothing itself; its SparkContext
does not: the ContextCleaner polls its reference queue every 100 ms (not configurable), the
executor heartbeats, netty's event loops and the block manager's threads wake dozens of times
a second, 2.5-3% of a core on a small VM. Stopping the context ends those threads; the JVM
stays, with its classes loaded and its code compiled, so the next start takes about a second
(a cold JVM takes 7-10 s). :class:`RestingSpark` stops the context on :meth:`~RestingSpark.rest`
and starts a new one at the next use of :attr:`~RestingSpark.session`.

Only a local driver outside spark-submit rests (``can_rest``): a cluster's context holds
executors that a new one must acquire again, spark-submit's cluster deploy mode ends the
application with its context, and a Spark Connect session idles on the server.

Whatever holds the old session (a DataFrame, a ``DeltaTable``) is dead after a rest: code
takes the session from the handle each time it starts work, never keeps it across a rest.
Delta's table log cache is cleared with the context, so a restarted one reads each table's
log afresh (another process may have committed meanwhile; the cache's entries also hold the
stopped context).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config.project import ProjectConfig
from . import shipping

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def can_rest(config: ProjectConfig) -> bool:
    """Whether this process may stop its Spark context while idle and start a new one later."""
    from .spark import under_spark_submit

    return shipping.is_local_master(config.spark.master) and not under_spark_submit()  # sc:// is not local


class RestingSpark:
    """The session, started again at its first use after :meth:`rest` stopped it."""

    def __init__(self, spark: SparkSession, restart: Callable[[], SparkSession] | None = None):
        """``restart``: starts the session again (``sink.spark.get_spark``); without it the
        session never rests."""
        self._spark: SparkSession | None = spark
        self._restart = restart
        self._rested_at = 0.0
        self._used_at = time.monotonic()

    @property
    def session(self) -> SparkSession:
        """The session (started again when resting); taking it counts as a use."""
        if self._spark is None:
            self._spark = self._start()
        self._used_at = time.monotonic()
        return self._spark

    @property
    def resting(self) -> bool:
        return self._spark is None

    def used(self) -> None:
        """Note a use that ends now (work that took the session when it began)."""
        self._used_at = time.monotonic()

    def unused_for(self, seconds: float) -> bool:
        """Whether the session runs, could rest, and was not used for ``seconds``."""
        return self._spark is not None and self._restart is not None and \
            time.monotonic() - self._used_at >= seconds

    def rest(self) -> bool:
        """Stop the context (the JVM stays) when it can be started again; whether it stopped."""
        if self._spark is None or self._restart is None:
            return self._spark is None
        spark, self._spark = self._spark, None
        from .spark import jvm_view

        jvm_view(spark).org.apache.spark.sql.delta.DeltaLog.clearCache()
        spark.stop()
        self._rested_at = time.monotonic()
        return True

    def _start(self) -> SparkSession:
        assert self._restart is not None  # only a handle with a restart rests
        began = time.monotonic()
        main = threading.current_thread() is threading.main_thread()
        # A new context installs its own SIGINT handler (pyspark's, then ours): the process's
        # own (e.g. follow's "stop after this cycle") stays the first Ctrl-C's.
        handler = signal.getsignal(signal.SIGINT) if main else None
        try:
            spark = self._restart()
        finally:
            if handler is not None:
                signal.signal(signal.SIGINT, handler)
        log.info("Spark started again in %.1f s after resting %.0f s", time.monotonic() - began,
                 began - self._rested_at)
        return spark
