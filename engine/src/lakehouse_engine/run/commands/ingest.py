"""``lakehouse ingest``: snapshot new tables, catch up on the binlog and merge silver, once."""

from __future__ import annotations

from ..context import CommandContext
from ..options import IngestOptions
from ..printer import print_results
from ..results import RunStatus
from .common import start_pipeline


def run(ctx: CommandContext, options: IngestOptions) -> int:
    from ..locks import locks_folder, table_locks
    from ..pipeline import TablesFailed

    specs = ctx.specs(options.selection)
    with table_locks(locks_folder(ctx.config), [s.name for s in specs]):
        _, pipeline = start_pipeline(ctx)
        try:
            results = pipeline.ingest(specs, full_refresh=options.full_refresh)
        except TablesFailed as some_failed:
            results = some_failed.results
    failed = print_results(results, ctx.log_format)
    ctx.record(RunStatus.ERROR if failed else RunStatus.SUCCESS, results,
               message=f"{len(failed)} of {len(results)} table(s) failed" if failed else "")
    return 1 if failed else 0
