"""``lakehouse validate``: the configuration and every table module load (no source, no Spark)."""

from __future__ import annotations

from ...config.project import PROJECT_FILE
from ..context import CommandContext


def run(ctx: CommandContext) -> int:
    config = ctx.config
    specs = ctx.all_specs()
    print(f"{config.root / PROJECT_FILE}: ok (target {config.target}, lake {config.lake_root})")
    print(f"{len(specs)} table module(s): {', '.join(sorted(specs)) or 'none'}")
    if config.source.unset:
        print(f"note: {', '.join(config.source.unset)} is not set; ingest, follow, dq and debug need it")
    return 0
