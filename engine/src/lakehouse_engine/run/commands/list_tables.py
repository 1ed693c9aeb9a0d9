"""``lakehouse list``: the selected tables with their source table, tags and how each is kept
(``--json``: an array a scheduler or orchestrator reads, e.g. the Dagster definitions)."""

from __future__ import annotations

import json

from ..context import CommandContext
from ..options import ReportOptions


def run(ctx: CommandContext, options: ReportOptions) -> int:
    specs = ctx.specs(options.selection)
    if options.json:
        print(json.dumps([{"name": s.name, "source_table": s.source_table, "tags": list(s.tags),
                           "snapshots": s.snapshots, "followed": s.followed} for s in specs], indent=2))
        return 0
    print(f"{'table':<24} {'source table':<24} tags")
    for spec in specs:
        print(f"{spec.name:<24} {spec.source_table:<24} {', '.join(spec.tags) or '-'}")
    return 0
