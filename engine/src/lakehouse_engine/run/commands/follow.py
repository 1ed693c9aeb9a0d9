"""``lakehouse follow``: ingest cycles back to back until stopped, serving the repairs asked of
the tables it holds and taking up tables added to the project meanwhile."""

from __future__ import annotations

from contextlib import ExitStack, closing
from typing import TYPE_CHECKING

from ..context import CommandContext
from ..options import FollowOptions
from ..printer import print_results
from ..results import RunStatus
from ..runlog import file_only
from .common import start_pipeline

if TYPE_CHECKING:
    from ..follow import FollowOutcome
    from ..idlewait import IdleWait
    from ..livemetrics import LiveMetrics


def run(ctx: CommandContext, options: FollowOptions) -> int:
    outcome = _follow(ctx, options)
    failed = print_results(outcome.results, ctx.log_format)
    summary = (f"{outcome.cycles} cycle(s), {outcome.cycles - outcome.idle_cycles} ingested, "
               f"{outcome.rows} row(s)")
    ctx.record(RunStatus.ERROR if failed else RunStatus.SUCCESS, outcome.results,
               message=f"{len(failed)} of {len(outcome.results)} table(s) failed; {summary}" if failed else summary,
               extra={"cycles": outcome.cycles, "idle_cycles": outcome.idle_cycles})
    return 1 if failed else 0


def _follow(ctx: CommandContext, options: FollowOptions) -> FollowOutcome:
    from ...cdc import capture
    from .. import follow as following
    from ..locks import locks_folder, table_locks
    from ..newtables import NewTables
    from ..repairs import RepairServer, repair_here, requests_of
    from ..stopping import stop_requests

    specs = ctx.specs(options.selection)
    cycles = following.FollowOptions(interval_s=options.interval_s, max_cycles=options.max_cycles,
                                      max_seconds=options.max_seconds, spark_rest_s=options.rest_spark_after_s)
    locks = locks_folder(ctx.config)
    with table_locks(locks, [s.name for s in specs], "follow"), ExitStack() as added_later:
        _, pipeline = start_pipeline(ctx, long_running=True)
        serve = RepairServer(requests_of(ctx.config), repair_here(ctx.config, lambda: pipeline))
        # Tables added to the project while following (add-table), selected as this run selects.
        discover = NewTables(lambda: ctx.specs(options.selection),
                                       lambda spec: added_later.enter_context(table_locks(locks, [spec.name],
                                                                                          "follow")))
        # After Spark's start, whose SIGINT handler becomes the second Ctrl-C's.
        with stop_requests() as stop, file_only(capture.log, capture.READING), closing(pipeline):
            return following.Follower(pipeline, specs, following.SourceLink(ctx.config.source), stop, cycles, serve,
                                      discover, publish_to=ctx.config.target_dir, metrics=_live_metrics(ctx),
                                      idle_wait=_idle_wait(ctx)).run()


def _idle_wait(ctx: CommandContext) -> IdleWait:
    """Idle, the loop waits on the binlog stream for the source's next write (polls, in a
    server id range of fewer than 3 ids: none is left for the wait)."""
    from ...cdc.headwatch import HeadWatch
    from ...source.serverids import ServerIds
    from ..idlewait import HEARTBEAT_S, IdleWait

    server_id = ServerIds.of(ctx.config.server_ids).watch()
    return IdleWait(None if server_id is None else HeadWatch(ctx.config.source, server_id, HEARTBEAT_S, hold=True))


def _live_metrics(ctx: CommandContext) -> LiveMetrics | None:
    """The samples a running follow refreshes, when the project keeps a metrics textfile."""
    from ..livemetrics import LiveMetrics

    textfile = ctx.config.telemetry.metrics_textfile
    return LiveMetrics(ctx.config.root / textfile) if textfile else None  # an absolute path stays as it is
