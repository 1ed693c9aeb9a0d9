"""An ingest with nothing to do, told without starting Spark (which takes seconds, tens of
seconds on a loaded host): on a local lake, every selected table's bronze checkpoint is in the
binlog phase exactly at the source's binlog head, and silver has merged its newest batch. Then
there is no change to read and nothing to merge, so the run reports each table as it stands.
Anything else (a snapshot to read, silver behind bronze, a refresh, a lake only Spark reads, a
head that moved, for any table at all) takes the ordinary path: the shortcut never guesses.

The same look tells when a run has only binlog to read: its reader then starts before Spark
(:func:`head_start`, ``cdc.headstart``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import pymysql

from ..cdc.capture import RetryPolicy, binlog_source
from ..cdc.headstart import HeadStart
from ..config.project import Layer, ProjectConfig
from ..sink.log import localfiles
from ..source.cascades import find_cascades
from ..source.connection import current_position
from ..source.introspect import describe_table
from ..state.checkpoint import Phase
from ..state.positions import BinlogPosition
from ..tables import TableSpec
from .results import TableResult
from .status import TableState, read_local

log = logging.getLogger(__name__)


def idle_results(config: ProjectConfig, specs: Sequence[TableSpec],
                 conn: pymysql.connections.Connection) -> list[TableResult] | None:
    """Each table's result when none has anything to do; None when any may have."""
    if not localfiles.is_local(config.lake_root):
        return None
    head = current_position(conn)
    states = [read_local(s.name, config.table_path(Layer.BRONZE, s.name), config.table_path(Layer.SILVER, s.name))
              for s in specs]
    if not all(_idle(spec, state, head) for spec, state in zip(specs, states, strict=True)):
        return None
    log.info("nothing new for %s: the source's binlog head %s is where they stand; Spark not started",
             ", ".join(s.name for s in specs), head)
    results = []
    for spec, state in zip(specs, states, strict=True):
        cp = state.checkpoint
        assert cp is not None  # _idle
        results.append(TableResult(spec.name, batch=cp.batch, position=str(cp.position), gtid=cp.gtid,
                                   copied=not spec.followed))
    return results


def _idle(spec: TableSpec, state: TableState, head: BinlogPosition) -> bool:
    cp = state.checkpoint
    if cp is None or cp.phase != Phase.BINLOG or cp.snapshot is not None or cp.position is None:
        return False
    if state.silver_batch != cp.batch or state.refreshing:
        return False
    # Exactly at the head: a position past it means the source's binlog was reset or replaced,
    # which the ordinary path reports; a snapshot-only table, once copied, stays so.
    return not spec.followed or cp.position == head


def head_start(config: ProjectConfig, specs: Sequence[TableSpec], conn: pymysql.connections.Connection,
               retry: RetryPolicy) -> HeadStart | None:
    """The catch-up's reader, started now, when every table stands in the binlog phase with
    nothing but binlog to read (no snapshot, no refresh, no cascade to derive) on a local lake;
    None otherwise, or when anything about it is uncertain: the catch-up then reads as before."""
    if not localfiles.is_local(config.lake_root):
        return None
    seen_at = time.time()  # just before the head is read: never later than it
    head = current_position(conn)
    database = config.source.database
    starts, keys = [], {}
    try:
        for spec in specs:
            state = read_local(spec.name, config.table_path(Layer.BRONZE, spec.name),
                               config.table_path(Layer.SILVER, spec.name))
            cp = state.checkpoint
            if (cp is None or cp.phase != Phase.BINLOG or cp.snapshot is not None or cp.position is None
                    or state.refreshing):
                return None
            if not spec.followed:
                continue
            if find_cascades(conn, database, spec.source_table):
                return None
            starts.append(cp.position)
            keys[spec.source_table] = describe_table(conn, database, spec.source_table, spec.key).key
    except Exception as exc:  # the ordinary path meets it again, and reports it
        log.debug("no head start for the catch-up: %s", exc)
        return None
    if not starts or min(starts) >= head:
        return None
    return HeadStart(binlog_source(config, keys, (), retry), min(starts), head, seen_at)
