"""``lakehouse list``: the selected tables with their source table and tags."""

from __future__ import annotations

from ..context import CommandContext
from ..options import Selection


def run(ctx: CommandContext, selection: Selection) -> int:
    specs = ctx.specs(selection)
    print(f"{'table':<24} {'source table':<24} tags")
    for spec in specs:
        print(f"{spec.name:<24} {spec.source_table:<24} {', '.join(spec.tags) or '-'}")
    return 0
