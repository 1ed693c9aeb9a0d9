"""``lakehouse add-table``: a table module scaffolded from the source table's columns and key."""

from __future__ import annotations

from ..context import CommandContext
from ..options import AddTableOptions


def run(ctx: CommandContext, options: AddTableOptions) -> int:
    from ...source.cascades import find_cascades
    from ...source.connection import connection
    from ...source.introspect import describe_table
    from ..scaffold import TableModuleSpec, write_table_module

    config = ctx.config
    with connection(config.source) as conn:
        schema = describe_table(conn, config.source.database, options.table, options.key)
        cascades = find_cascades(conn, config.source.database, options.table)
    spec = TableModuleSpec(source_table=options.table, key=schema.key,
                           columns=tuple((c.name, c.column_type) for c in schema.columns),
                           cascades=tuple(c.describe() for c in cascades))
    path = write_table_module(config.root / ctx.package / "tables", spec)
    print(f"wrote {path.relative_to(config.root)} (key: {', '.join(schema.key)})")
    if cascades:  # ingest refuses the table (on_cascade='refuse'): say so now, not at its first run
        print(f"note: {cascades[0].describe()}: the binlog does not carry cascaded changes; see on_cascade in it")
    return 0
