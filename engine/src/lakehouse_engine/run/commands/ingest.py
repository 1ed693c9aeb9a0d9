"""``lakehouse ingest``: snapshot new tables, catch up on the binlog and merge silver, once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..context import CommandContext
from ..options import IngestOptions
from ..printer import print_results
from ..results import RunStatus, TableResult
from .common import start_pipeline

if TYPE_CHECKING:
    from ...tables import TableSpec


def run(ctx: CommandContext, options: IngestOptions) -> int:
    from ...sink import paths as lake
    from ..locks import locks_folder, table_locks
    from ..pipeline import TablesFailed

    specs = ctx.specs(options.selection)
    with table_locks(locks_folder(ctx.config), [s.name for s in specs]):
        lake.check_writable(ctx.config.lake_root)  # a configuration error before any source one
        results = None if options.full_refresh else _when_idle(ctx, specs)
        if results is None:
            _, pipeline = start_pipeline(ctx, preflighted=not options.full_refresh)
            try:
                results = pipeline.ingest(specs, full_refresh=options.full_refresh)
            except TablesFailed as some_failed:
                results = some_failed.results
    failed = print_results(results, ctx.log_format)
    ctx.record(RunStatus.ERROR if failed else RunStatus.SUCCESS, results,
               message=f"{len(failed)} of {len(results)} table(s) failed" if failed else "")
    return 1 if failed else 0


def _when_idle(ctx: CommandContext, specs: Sequence[TableSpec]) -> list[TableResult] | None:
    """The results of a run with nothing to do, found without Spark (``run.idle``); the source's
    setup is checked first, as every ingest checks it."""
    from ...source.connection import connection
    from ...source.preflight import run_preflight
    from ..idle import idle_results

    with connection(ctx.config.source) as conn:
        run_preflight(conn)
        return idle_results(ctx.config, specs, conn)
