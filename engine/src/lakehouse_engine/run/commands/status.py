"""``lakehouse status``: each table's phase, position and lag, who runs it now, and the last
run; ``--json`` gives the same as one versioned document (``run.statusdoc``). Reads a local
lake's Delta logs directly, without Spark (a Hadoop path only through it)."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...config.project import Layer, ProjectConfig
from ...errors import IngestError
from ...sink.log import localfiles
from ..context import CommandContext
from ..options import ReportOptions

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ...tables import TableSpec
    from ..status import TableState
    from ..statusdoc import SourceHead, TableFacts


def run(ctx: CommandContext, options: ReportOptions) -> int:
    from .. import status, statusdoc

    config = ctx.config
    specs = ctx.specs(options.selection)
    facts = _facts(config, specs)
    states = [_with_read_ahead(config, s, facts[s.table]) for s in _states(config, specs)]
    head, note = _source_head(config, states)
    last = status.last_run(config.target_dir)
    now = dt.datetime.now(dt.UTC)
    doc = statusdoc.document(config.target, config.lake_root, states, facts, head, note, last, now)
    _update_metrics(config, doc)
    if options.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"target {config.target}, lake {config.lake_root}")
    for line in status.table_lines(states, _lag_texts(states, facts, head, now), last, now):
        print(line)
    for table, fact in facts.items():
        if fact.running is not None:
            print(f"running: {table} ({fact.running[1]}, pid {fact.running[0]})")
    if note:
        print(note)
    print(status.run_line(last, now))
    return 0


def _with_read_ahead(config: ProjectConfig, state: TableState, fact: TableFacts) -> TableState:
    """``state`` with how far the follow running it has read (its lag is measured from there)."""
    from dataclasses import replace

    from ...state import followstate

    pid = fact.running[0] if fact.running is not None and fact.running[1] == "follow" else None
    return replace(state, read_ahead=followstate.read(config.target_dir, state.table, pid))


def _update_metrics(config: ProjectConfig, doc: Mapping[str, Any]) -> None:
    """The lags measured here go to the metrics textfile too (a scheduled ``status`` keeps a
    dashboard's lag current between dq runs); a file that cannot be written only warns."""
    if not config.telemetry.metrics_textfile or doc["source_head"] is None:
        return
    from ...telemetry import metrics

    path = config.root / config.telemetry.metrics_textfile
    try:
        metrics.update_textfile(path, metrics.lag_samples(doc["tables"]))
    except OSError as exc:
        log.warning("the metrics textfile %s could not be written: %s", path, exc)


def _states(config: ProjectConfig, specs: Sequence[TableSpec]) -> list[TableState]:
    from .. import status

    if localfiles.is_local(config.lake_root):
        return [status.read_local(s.name, config.table_path(Layer.BRONZE, s.name),
                                  config.table_path(Layer.SILVER, s.name)) for s in specs]
    return _states_through_spark(config, [s.name for s in specs])  # a Hadoop path (s3a://)


def _facts(config: ProjectConfig, specs: Sequence[TableSpec]) -> dict[str, TableFacts]:
    from ...state.holders import holder
    from ..locks import locks_folder
    from ..statusdoc import TableFacts

    return {s.name: TableFacts(s.followed, holder(locks_folder(config), s.name)) for s in specs}


def _lag_texts(states: Sequence[TableState], facts: Mapping[str, TableFacts], head: SourceHead | None,
               now: dt.datetime) -> dict[str, str] | None:
    """The lag column: a snapshot-only table is copied once on purpose, never "behind"."""
    from .. import status

    if head is None:
        return None
    return {s.table: status.lag(s, head.position, head.sizes, now) if facts[s.table].followed else "snapshot-only"
            for s in states}


def _states_through_spark(config: ProjectConfig, tables: Sequence[str]) -> list[TableState]:
    from ...sink import bronze, silver
    from ...sink.spark import get_spark
    from .. import status

    spark = get_spark(config)
    states = []
    for table in tables:
        bronze_path, silver_path = config.table_path(Layer.BRONZE, table), config.table_path(Layer.SILVER, table)
        if not bronze.exists(spark, bronze_path):
            states.append(status.TableState(table))
            continue
        marker = silver.marker(spark, silver_path) if bronze.exists(spark, silver_path) else {}
        applied = int(marker.get("bronze_batch", -1))
        states.append(status.TableState(table, bronze.latest_checkpoint(spark, bronze_path),
                                        silver_batch=applied if applied >= 0 else None,
                                        silver_generation=int(marker.get("generation", 0))))
    return states


def _source_head(config: ProjectConfig, states: Sequence[TableState]) -> tuple[SourceHead | None, str]:
    """The source's binlog head for the lags, and a line saying how it was (not) read. Needs
    the password: without it, says how to get the lag instead."""
    import pymysql

    from ...source.connection import binlog_sizes, connection, current_position
    from ..statusdoc import SourceHead

    if not any(s.position for s in states):
        return None, ""
    if config.source.unset:
        return None, (f"behind source: not measured, {', '.join(config.source.unset)} is not set "
                      "(export it to compare with the source's binlog position)")
    try:
        with connection(config.source, read_timeout=30) as conn:
            head = SourceHead(current_position(conn), binlog_sizes(conn))
    except (IngestError, pymysql.err.MySQLError) as exc:
        return None, f"behind source: not measured, {' '.join(str(exc).split())}"
    return head, f"source binlog head: {head.position}"
