"""``lakehouse eject``: the engine's source copied into the project in place of its pin."""

from __future__ import annotations

from ..context import CommandContext


def run(ctx: CommandContext) -> int:
    from ..eject import eject

    for line in eject(ctx.project_dir):
        print(line)
    return 0
