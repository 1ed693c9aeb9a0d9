"""``lakehouse debug``: the setup's checks (configuration, Java, Delta jars, the source, its
binlog settings and grants), a line each."""

from __future__ import annotations

from ..context import CommandContext


def run(ctx: CommandContext) -> int:
    from ..debug import Outcome, run_checks

    failed = 0
    for check in run_checks(ctx.config, lambda: len(ctx.all_specs())):
        print(check.line())
        failed += check.outcome == Outcome.FAIL
    print(f"{failed} check(s) failed" if failed else "All checks passed.")
    return 1 if failed else 0
