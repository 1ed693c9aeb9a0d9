"""What a source table looks like: its columns, their types and the key to chunk on."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pymysql

from .errors import ConfigError
from .source import query

STRING_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    data_type: str  # lower case, e.g. "bigint", "varchar"
    column_type: str  # full definition, e.g. "bigint(20) unsigned", "set('a','b')"
    nullable: bool
    precision: int | None = None
    scale: int | None = None
    collation: str | None = None
    charset: str | None = None

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type

    @property
    def is_collated_string(self) -> bool:
        """Strings compare by collation in the server, never by Python's ``<``."""
        return self.data_type in STRING_TYPES or self.data_type in {"enum", "set"}

    @property
    def display_width(self) -> int | None:
        match = re.search(r"\((\d+)\)", self.column_type)
        return int(match.group(1)) if match else None

    @property
    def members(self) -> tuple[str, ...]:
        """ENUM/SET members in definition order (the order SELECT uses for SET values)."""
        inner = self.column_type[self.column_type.index("(") + 1 : self.column_type.rindex(")")]
        return tuple(m.replace("''", "'") for m in re.findall(r"'((?:[^']|'')*)'", inner))


@dataclass(frozen=True)
class TableSchema:
    schema: str
    table: str
    columns: tuple[ColumnInfo, ...]
    key: tuple[str, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def key_columns(self) -> tuple[ColumnInfo, ...]:
        by_name = {c.name: c for c in self.columns}
        return tuple(by_name[k] for k in self.key)

    def column(self, name: str) -> ColumnInfo:
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(name)


def describe_table(
    conn: pymysql.connections.Connection,
    schema: str,
    table: str,
    key: Sequence[str] | None = None,
) -> TableSchema:
    """Read columns and choose the chunk key: the configured one, else the primary key,
    else the first unique index whose columns are all NOT NULL."""
    rows = query(
        conn,
        "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, NUMERIC_PRECISION,"
        " NUMERIC_SCALE, COLLATION_NAME, CHARACTER_SET_NAME"
        " FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
        " ORDER BY ORDINAL_POSITION",
        (schema, table),
    )
    if not rows:
        raise ConfigError(
            f"table {schema}.{table} does not exist on the source (or the user cannot see it): "
            "check the table module's source_table and GRANT SELECT"
        )
    columns = tuple(
        ColumnInfo(
            name=str(r[0]),
            data_type=str(r[1]).lower(),
            column_type=str(r[2]).lower(),
            nullable=r[3] == "YES",
            precision=int(r[4]) if r[4] is not None else None,
            scale=int(r[5]) if r[5] is not None else None,
            collation=r[6],
            charset=r[7],
        )
        for r in rows
    )
    chosen = tuple(key) if key else _natural_key(conn, schema, table, columns)
    by_name = {c.name: c for c in columns}
    for name in chosen:
        if name not in by_name:
            raise ConfigError(f"table {schema}.{table}: key column {name!r} does not exist")
        if by_name[name].nullable:
            raise ConfigError(
                f"table {schema}.{table}: key column {name!r} is nullable; a chunk key must be "
                "NOT NULL and unique"
            )
    return TableSchema(schema=schema, table=table, columns=columns, key=chosen)


def _natural_key(
    conn: pymysql.connections.Connection,
    schema: str,
    table: str,
    columns: tuple[ColumnInfo, ...],
) -> tuple[str, ...]:
    rows = query(
        conn,
        "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS"
        " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0"
        " ORDER BY INDEX_NAME = 'PRIMARY' DESC, INDEX_NAME, SEQ_IN_INDEX",
        (schema, table),
    )
    indexes: dict[str, list[str]] = {}
    for index_name, column_name in rows:
        indexes.setdefault(str(index_name), []).append(str(column_name))
    nullable = {c.name for c in columns if c.nullable}
    for cols in indexes.values():
        if not nullable.intersection(cols):
            return tuple(cols)
    raise ConfigError(
        f"table {schema}.{table} has no primary key or NOT NULL unique key: add one, or set "
        "key=(...) to unique NOT NULL columns in its table module"
    )
