"""``lakehouse ingest``: snapshot new tables, catch up on the binlog and merge silver, once."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...errors import ConfigError
from ..context import CommandContext
from ..options import IngestOptions
from ..printer import print_results
from ..results import RunStatus, TableResult
from .common import start_pipeline

if TYPE_CHECKING:
    from ...cdc.headstart import HeadStart
    from ...tables import TableSpec
    from ..locks import TableBusy


def run(ctx: CommandContext, options: IngestOptions) -> int:
    from ...sink import paths as lake
    from ..locks import free_table_locks, locks_folder

    specs = ctx.specs(options.selection)
    with free_table_locks(locks_folder(ctx.config), [s.name for s in specs]) as busy:
        skipped = {b.table for b in busy}
        free = [s for s in specs if s.name not in skipped]
        lake.check_writable(ctx.config.lake_root)  # a configuration error before any source one
        results = _ingest(ctx, free, options) if free else []
    results = _in_order(specs, [*results, *(_skipped(b) for b in busy)])
    failed = print_results(results, ctx.log_format)
    ctx.record(_status(failed), results, message=_summary(results, failed))
    return 1 if failed else 0


def _status(failed: Sequence[TableResult]) -> RunStatus:
    """The run's status: skipped-busy when the only tables not ingested were held by another
    run (retriable, no alert), else error when any failed."""
    if not failed:
        return RunStatus.SUCCESS
    return RunStatus.SKIPPED_BUSY if all(r.status == RunStatus.SKIPPED_BUSY for r in failed) else RunStatus.ERROR


def _ingest(ctx: CommandContext, specs: Sequence[TableSpec], options: IngestOptions) -> list[TableResult]:
    from ..pipeline import TablesFailed

    if options.full_refresh:
        confirm_full_refresh(specs, options.yes)
    results, head_start = (None, None) if options.full_refresh else _before_spark(ctx, specs)
    if results is not None:
        return results
    try:
        _, pipeline = start_pipeline(ctx, preflighted=not options.full_refresh, head_start=head_start)
        try:
            return pipeline.ingest(specs, full_refresh=options.full_refresh)
        except TablesFailed as some_failed:
            return some_failed.results
    finally:
        if head_start is not None:
            head_start.close()


def _skipped(busy: TableBusy) -> TableResult:
    """A table another run holds: not tried this time (retriable), the others went on."""
    return TableResult(busy.table or "?", RunStatus.SKIPPED_BUSY, message=str(busy), category=busy.category)


def _in_order(specs: Sequence[TableSpec], results: Sequence[TableResult]) -> list[TableResult]:
    order = {s.name: i for i, s in enumerate(specs)}
    return sorted(results, key=lambda r: order.get(r.table, len(order)))


def _summary(results: Sequence[TableResult], failed: Sequence[TableResult]) -> str:
    if not failed:
        return ""
    busy = sum(r.status == RunStatus.SKIPPED_BUSY for r in failed)
    held = f" ({busy} skipped: another run holds them; try again later)" if busy else ""
    return f"{len(failed)} of {len(results)} table(s) failed{held}"


def confirm_full_refresh(specs: Sequence[TableSpec], yes: bool) -> None:
    """A full refresh replaces bronze's rows (the old ones stay readable by time travel only
    until ``maintain`` VACUUMs them): asked on a terminal, else ``--yes`` must say so."""
    names = ", ".join(s.name for s in specs)
    if yes:
        return
    if not sys.stdin.isatty():
        raise ConfigError(f"--full-refresh re-snapshots {names} and replaces bronze's history; add --yes to "
                          "confirm (make ingest ... FULL_REFRESH=1 YES=1)", setting="--yes")
    answer = input(f"--full-refresh re-snapshots {names} and replaces bronze's history; type yes to go on: ")
    if answer.strip() != "yes":
        raise ConfigError(f"not refreshed: {names} left as they are (answer yes, or pass --yes)", setting="--yes")


def _before_spark(ctx: CommandContext, specs: Sequence[TableSpec]) -> tuple[list[TableResult] | None, HeadStart | None]:
    """What the lake's commit files and the source tell before Spark starts (``run.idle``): the
    results of a run with nothing to do, or else the catch-up's reader started ahead where the
    run has only binlog to read; the source's setup is checked first, as every ingest checks it."""
    from ...source.connection import connection
    from ...source.preflight import run_preflight
    from ..idle import idle_results

    with connection(ctx.config.source) as conn:
        run_preflight(conn)
        results = idle_results(ctx.config, specs, conn)
        if results is not None:
            return results, None
        from ...cdc.capture import RetryPolicy
        from ..readahead import head_start

        return None, head_start(ctx.config, specs, conn, RetryPolicy())
