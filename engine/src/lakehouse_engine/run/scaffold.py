"""Writes per-table ingestion modules; used by the template's post-generation hook and by the
``add-table`` command. Deliberately free of heavy imports (no Spark, no database driver)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

MODULE_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")

TEMPLATE = '''"""Ingestion of source table `{source_table}`: bronze changelog and silver current state."""

from __future__ import annotations

from lakehouse_engine.tables import TableSpec

{columns_comment}

def expectations() -> list:
    """Extra Great Expectations checks on silver, beyond key uniqueness and the row count.

    Example:
        import great_expectations.expectations as gxe
        return [gxe.ExpectColumnValuesToNotBeNull(column="created_at")]
    """
    return []


TABLE = TableSpec(
    name="{name}",
    source_table="{source_table}",
    key={key},  # None: the primary key; or a tuple of unique NOT NULL columns
    chunk_size=None,  # None: defaults.chunk_size in lakehouse_project.yml
    startup="initial",  # snapshot, then the binlog; or "snapshot", "latest", "position", "gtid", "timestamp"
    on_schema_change="evolve",  # a DDL is applied to bronze and silver at its position; or "stop", "ignore"
    on_cascade="refuse",  # stop if a foreign key cascades into it (the binlog lacks such rows); "apply" or "ignore"
    tags=(),
    transform=None,  # or a function DataFrame -> DataFrame run before the silver MERGE
    scd_type=1,  # 1: silver holds each key's newest row; 2: every version (_seq/_end_seq, _is_current)
    change_data_feed=False,  # True: Delta's change data feed on silver
    cluster_by=(),  # liquid clustering columns for silver, e.g. ("country",)
    expectations=expectations,
)
'''


@dataclass(frozen=True)
class TableModuleSpec:
    source_table: str
    key: tuple[str, ...] | None = None
    columns: tuple[tuple[str, str], ...] = ()  # (name, column type), for the module's comment
    cascades: tuple[str, ...] = ()  # cascading foreign keys into it, described, for the module's comment

    @property
    def module_name(self) -> str:
        return self.source_table.lower()


def render_table_module(spec: TableModuleSpec) -> str:
    if not MODULE_NAME.match(spec.module_name):
        raise ConfigError(
            f"table {spec.source_table!r} cannot become a module name: use letters, digits, underscores"
        )
    if spec.columns:
        lines = ["# Source columns (at scaffolding time):"]
        lines += [f"#   {name}: {kind}" for name, kind in spec.columns]
        columns_comment = "\n".join(lines) + "\n"
    else:
        columns_comment = ""
    if spec.cascades:
        lines = ["# Cascading foreign keys (the binlog does not carry the rows they change: see on_cascade):"]
        lines += [f"#   {cascade}" for cascade in spec.cascades]
        columns_comment += "\n".join(lines) + "\n"
    return TEMPLATE.format(
        name=spec.module_name,
        source_table=spec.source_table,
        key=repr(spec.key) if spec.key else "None",
        columns_comment=columns_comment,
    ).replace("\n\n\n\ndef", "\n\n\ndef")


def write_table_module(tables_dir: Path, spec: TableModuleSpec) -> Path:
    target = tables_dir / f"{spec.module_name}.py"
    if target.exists():
        raise ConfigError(f"{target} already exists: edit it instead")
    target.write_text(render_table_module(spec))
    return target
