"""An ingest with nothing to do, told without starting Spark (which takes seconds, tens of
seconds on a loaded host): on a local lake, every selected table's bronze checkpoint is in the
binlog phase exactly at the source's binlog head, and silver has merged its newest batch. Then
there is no change to read and nothing to merge, so the run reports each table as it stands.
Anything else (a snapshot to read, silver behind bronze, a refresh, a lake only Spark reads, a
head that moved, for any table at all) takes the ordinary path: the shortcut never guesses."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pymysql

from ..config.project import Layer, ProjectConfig
from ..sink.log import localfiles
from ..source.connection import current_position
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
    states = [local_state(config, s) for s in specs]
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


def local_state(config: ProjectConfig, spec: TableSpec) -> TableState:
    """``spec``'s state on a local lake, from its commit files alone."""
    return read_local(spec.name, config.table_path(Layer.BRONZE, spec.name), config.table_path(Layer.SILVER, spec.name))


def in_binlog_phase(state: TableState) -> bool:
    """Whether the table reads nothing but binlog from its checkpoint's position: past its
    snapshot, and not in the middle of a refresh."""
    cp = state.checkpoint
    return (cp is not None and cp.phase == Phase.BINLOG and cp.snapshot is None and cp.position is not None
            and not state.refreshing)


def _idle(spec: TableSpec, state: TableState, head: BinlogPosition) -> bool:
    cp = state.checkpoint
    if cp is None or not in_binlog_phase(state) or state.silver_batch != cp.batch:
        return False
    # Exactly at the head: a position past it means the source's binlog was reset or replaced,
    # which the ordinary path reports; a snapshot-only table, once copied, stays so.
    return not spec.followed or cp.position == head
