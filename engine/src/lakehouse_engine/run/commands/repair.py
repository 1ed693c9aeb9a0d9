"""``lakehouse repair``: re-read from the source only the rows silver holds wrongly; a table a
follow holds is repaired by that follow, the others here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..context import CommandContext
from ..options import RepairOptions
from ..printer import print_repair
from .common import finish_tables, start_pipeline

if TYPE_CHECKING:
    from ..pipeline import Pipeline
    from ..repair import RepairResult


def run(ctx: CommandContext, options: RepairOptions) -> int:
    from ..repairs import Waiting, repair_here, repair_tables

    local: list[Pipeline] = []

    def pipeline() -> Pipeline:  # Spark starts only for a table repaired here, not by a follow
        if not local:
            local.append(start_pipeline(ctx)[1])
        return local[0]

    results: list[RepairResult] = []
    repairs = repair_tables(ctx.config, ctx.invocation.id, ctx.specs(options.selection),
                            repair_here(ctx.config, pipeline), Waiting(options.wait_s))
    for result in repairs:
        print_repair(result)
        results.append(result)
    return finish_tables(ctx, results)
