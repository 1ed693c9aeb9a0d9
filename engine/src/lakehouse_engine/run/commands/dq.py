"""``lakehouse dq``: the Great Expectations checks of silver against the source at one binlog
position, as a report on stdout."""

from __future__ import annotations

from ..context import CommandContext
from ..options import Selection
from ..printer import error_line, print_checks
from ..results import RunStatus
from .common import start_pipeline


def run(ctx: CommandContext, selection: Selection) -> int:
    from ...quality.dq import run_checks

    specs = ctx.specs(selection)
    # No table locks: dq only reads the lake, so it runs beside an ingest or follow of the tables.
    spark, _ = start_pipeline(ctx)
    results = run_checks(ctx.config, spark, specs)
    print_checks(results)
    failed = [r.table for r in results if not r.success]
    ctx.record(RunStatus.FAIL if failed else RunStatus.SUCCESS, results)
    if failed:
        error_line(f"ERROR [data quality]: checks failed for {', '.join(failed)}; see the report above",
                   ctx.log_format, "data quality")
        return 1
    return 0
