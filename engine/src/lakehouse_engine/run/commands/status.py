"""``lakehouse status``: each table's phase, position and lag, and the last run. Reads a local
lake's Delta logs directly, without Spark (a Hadoop path only through it)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...config.project import Layer, ProjectConfig
from ...errors import IngestError
from ..context import CommandContext
from ..options import Selection

if TYPE_CHECKING:
    from ..status import TableState


def run(ctx: CommandContext, selection: Selection) -> int:
    from .. import status

    config = ctx.config
    specs = ctx.specs(selection)
    if _is_local(config.lake_root):
        states = [status.read_local(s.name, config.table_path(Layer.BRONZE, s.name),
                                    config.table_path(Layer.SILVER, s.name)) for s in specs]
    else:  # a Hadoop path (s3a://) is only readable through Spark
        states = _states_through_spark(config, [s.name for s in specs])
    lags, note = _source_lags(config, states)
    last = status.last_run(config.target_dir)
    now = dt.datetime.now(dt.UTC)
    print(f"target {config.target}, lake {config.lake_root}")
    for line in status.table_lines(states, lags, last, now):
        print(line)
    if note:
        print(note)
    print(status.run_line(last, now))
    return 0


def _is_local(lake_root: str) -> bool:
    return lake_root.startswith("/") or lake_root.startswith("file:")


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


def _source_lags(config: ProjectConfig, states: Sequence[TableState]) -> tuple[dict[str, str] | None, str]:
    """Each table's lag behind the source's binlog head, and a line saying how it was (not)
    measured. Needs the password: without it, says how to get the lag instead."""
    import pymysql

    from ...source.connection import binlog_sizes, connection, current_position
    from .. import status

    if not any(s.position for s in states):
        return None, ""
    if config.source.unset:
        return None, (f"behind source: not measured, {', '.join(config.source.unset)} is not set "
                      "(export it to compare with the source's binlog position)")
    try:
        with connection(config.source, read_timeout=30) as conn:
            head, sizes = current_position(conn), binlog_sizes(conn)
    except (IngestError, pymysql.err.MySQLError) as exc:
        return None, f"behind source: not measured, {' '.join(str(exc).split())}"
    now = dt.datetime.now(dt.UTC)
    lags = {s.table: status.lag(s, head, sizes, now) for s in states}
    return lags, f"source binlog head: {head}"
