"""What a source table looks like: its columns, their types and the key to chunk on."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pymysql

from ..errors import ConfigError
from .connection import query

STRING_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    data_type: str  # lower case, e.g. "bigint", "varchar"
    column_type: str  # full definition, e.g. "bigint(20) unsigned", "set('a','B')" (members as declared)
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


def lower_outside_quotes(column_type: str) -> str:
    """A COLUMN_TYPE in lower case, except its quoted ENUM/SET members: a member's case (and
    its characters: Python lower-cases 'Ã' to 'ã') is what the binlog and SELECT give."""
    parts = re.split(r"('(?:[^']|'')*')", column_type)
    return "".join(part if part.startswith("'") else part.lower() for part in parts)


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
    else the first unique index whose columns are all NOT NULL.

    A configured key is checked against the source's unique indexes: silver keeps one row per
    key, so a key the source does not enforce as unique would silently collapse rows."""
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
            column_type=lower_outside_quotes(str(r[2])),
            nullable=r[3] == "YES",
            precision=int(r[4]) if r[4] is not None else None,
            scale=int(r[5]) if r[5] is not None else None,
            collation=r[6],
            charset=r[7],
        )
        for r in rows
    )
    indexes = unique_indexes(
        query(
            conn,
            "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS"
            " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0"
            " ORDER BY INDEX_NAME = 'PRIMARY' DESC, INDEX_NAME, SEQ_IN_INDEX",
            (schema, table),
        )
    )
    if key:
        chosen = tuple(key)
        check_key(f"{schema}.{table}", chosen, columns, indexes)
    else:
        chosen = natural_key(f"{schema}.{table}", columns, indexes)
    return TableSchema(schema=schema, table=table, columns=columns, key=chosen)


@dataclass(frozen=True)
class UniqueIndex:
    """A PRIMARY or UNIQUE index of the source table, its columns in index order."""

    name: str
    columns: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.name} ({', '.join(self.columns)})"


def unique_indexes(rows: Iterable[Sequence[object]]) -> tuple[UniqueIndex, ...]:
    """Group ``(INDEX_NAME, COLUMN_NAME)`` rows (ordered by index, then position) into indexes.

    An index with an expression part (MySQL functional key parts have no COLUMN_NAME) is left
    out: it makes the expression unique, not the columns it reads."""
    parts: dict[str, list[str | None]] = {}
    for index_name, column_name in rows:
        parts.setdefault(str(index_name), []).append(None if column_name is None else str(column_name))
    return tuple(
        UniqueIndex(name, tuple(c for c in cols if c is not None))
        for name, cols in parts.items()
        if None not in cols
    )


def natural_key(
    table: str, columns: Sequence[ColumnInfo], indexes: Sequence[UniqueIndex]
) -> tuple[str, ...]:
    """The first unique index (PRIMARY first) whose columns are all NOT NULL."""
    nullable = {c.name for c in columns if c.nullable}
    for index in indexes:
        if not nullable.intersection(index.columns):
            return index.columns
    raise ConfigError(
        f"table {table} has no primary key or NOT NULL unique key: add one, or name unique NOT NULL "
        f"columns as its key: key=(...) in its table module, or `add-table {table.rsplit('.', 1)[-1]} "
        "--key col1,col2`"
    )


def covering_index(key: Sequence[str], indexes: Sequence[UniqueIndex]) -> UniqueIndex | None:
    """A unique index whose columns all lie within ``key``: it makes ``key`` unique too.

    Column names compare case-insensitively, as the server compares them."""
    wanted = {k.casefold() for k in key}
    for index in indexes:
        if {c.casefold() for c in index.columns} <= wanted:
            return index
    return None


def check_key(
    table: str,
    key: Sequence[str],
    columns: Sequence[ColumnInfo],
    indexes: Sequence[UniqueIndex],
) -> None:
    """Refuse a configured key that is missing, nullable, or not enforced unique by the source."""
    by_name = {c.name.casefold(): c for c in columns}
    listed = ", ".join(key)
    for name in key:
        column = by_name.get(name.casefold())
        if column is None or column.name != name:
            hint = f" (the column is spelled {column.name!r})" if column is not None else ""
            raise ConfigError(
                f"table {table}: key column {name!r} does not exist{hint}: fix key=(...) in its "
                "table module (or add-table --key)"
            )
        if column.nullable:
            raise ConfigError(
                f"table {table}: key column {name!r} is nullable; a chunk key must be NOT NULL and "
                "unique: declare it NOT NULL on the source or choose other key columns"
            )
    if covering_index(key, indexes) is None:
        known = "; ".join(i.describe() for i in indexes) or "none"
        raise ConfigError(
            f"table {table}: key ({listed}) is not unique on the source: no PRIMARY or UNIQUE "
            "index lies within these columns, so silver would merge rows sharing a key "
            f"(unique indexes: {known}); set key=(...) in its table module (or add-table --key) "
            f"to the columns of one of them, or add a UNIQUE index on ({listed}) to the source table"
        )
