"""What the commands that write the lake share: Spark with the lake checked first, the
pipeline, and the per-table loop and ending of ``repair``, ``rebuild`` and ``maintain``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ...config.project import ProjectConfig
from ...sink import paths as lake
from ..context import CommandContext
from ..printer import TableOutcome, print_failed, table_line
from ..results import MaintenanceResult, RunStatus

if TYPE_CHECKING:  # Spark and the pipeline are imported only by the commands that use them
    from pyspark.sql import SparkSession

    from ...cdc.headstart import HeadStart
    from ...tables import TableSpec
    from ..pipeline import Pipeline


def lake_spark(config: ProjectConfig, *, long_running: bool = False,
               before_spark: Callable[[], None] | None = None, writes: bool = True) -> SparkSession:
    """Spark for a command on the lake: the lake checked writable first when the command
    ``writes`` (and ``before_spark()`` run, e.g. the source's preflight, to fail fast before
    Spark takes seconds to start), then its file system checked through Spark."""
    from ...sink import connect, portable
    from ...sink.spark import get_spark

    if writes and not connect.is_connect_url(config.spark.master):  # else the lake is the server's to check
        lake.check_writable(config.lake_root)
    if before_spark is not None:
        before_spark()
    spark = get_spark(config, long_running=long_running)
    if not portable.active(spark):
        lake.check_filesystem(spark, config.lake_root)
    return spark


def start_pipeline(ctx: CommandContext, *, long_running: bool = False, preflighted: bool = False,
                   writes: bool = True, head_start: HeadStart | None = None) -> tuple[SparkSession, Pipeline]:
    """Spark and the pipeline; a ``long_running`` one (follow) keeps one binlog reader, and its
    session may rest while idle (``sink.resting``). ``preflighted``: the source's setup was
    checked already by this invocation; ``writes``: False for a command that only reads the
    lake (``dq``), which then runs on a read-only one. ``head_start``: the catch-up's reader,
    started before Spark (``cdc.headstart``); the caller closes it."""
    from ...cdc.feed import BinlogFeed
    from ...sink.resting import RestingSpark, can_rest
    from ...sink.spark import get_spark
    from ...source.connection import connection
    from ...source.preflight import run_preflight
    from ..pipeline import Pipeline

    def preflight() -> None:
        with connection(ctx.config.source) as conn:
            run_preflight(conn)

    config = ctx.config
    spark = lake_spark(config, long_running=long_running, before_spark=None if preflighted else preflight,
                       writes=writes)
    restart = (lambda: get_spark(config, long_running=True)) if long_running and can_rest(config) else None
    return spark, Pipeline(config, RestingSpark(spark, restart), ctx.invocation.id,
                           feed=BinlogFeed() if long_running else head_start)


def each_table(config: ProjectConfig, specs: Sequence[TableSpec],
               work: Callable[[TableSpec, MaintenanceResult], None]) -> list[MaintenanceResult]:
    """``work`` on each table, which prints its lines and fills in its result; a table's error
    is recorded against it and the others go on."""
    from ...cdc.tablecapture import as_table_error

    results = []
    for spec in specs:
        result = MaintenanceResult(spec.name)
        try:
            work(spec, result)
        except Exception as exc:  # recorded against this table; the others go on
            error = as_table_error(exc, spec.name, config.lake_root)
            result.status, result.message, result.category = RunStatus.ERROR, str(error), error.category
            table_line(spec.name, "ERROR  see below")
        results.append(result)
    return results


def finish_tables(ctx: CommandContext, results: Sequence[TableOutcome]) -> int:
    """The end of a per-table command: each failed table's line on stderr, ``run_results.json``
    (status error when a table erred, fail when only checks failed), and the exit code."""
    failed = print_failed(results, ctx.log_format)
    status = RunStatus.SUCCESS
    if failed:
        status = RunStatus.ERROR if any(r.status == RunStatus.ERROR for r in failed) else RunStatus.FAIL
    ctx.record(status, results, message=f"{len(failed)} of {len(results)} table(s) failed" if failed else "")
    return 1 if failed else 0
