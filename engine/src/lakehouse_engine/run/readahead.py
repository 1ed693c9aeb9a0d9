"""Which ingests start their binlog reader before Spark (``cdc.headstart``).

The same look as an ingest with nothing to do (``run.idle``: the lake's commit files and the
source's head, without Spark), taken when there is something to do: a run whose tables all
stand in the binlog phase has only binlog to read, from the lowest checkpoint to the head.
Imported only then, since it brings the catch-up's modules (and pyspark's Python side) with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import pymysql

from ..cdc.capture import RetryPolicy, binlog_source
from ..cdc.headstart import HeadStart
from ..config.project import ProjectConfig
from ..sink.log import localfiles
from ..source.cascades import find_cascades
from ..source.connection import current_position
from ..source.introspect import describe_table
from ..tables import TableSpec
from .idle import in_binlog_phase, local_state

log = logging.getLogger(__name__)


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
            state = local_state(config, spec)
            cp = state.checkpoint
            if cp is None or cp.position is None or not in_binlog_phase(state):
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
