"""Foreign keys whose cascades the binlog does not carry.

InnoDB applies ``ON DELETE``/``ON UPDATE`` ``CASCADE``, ``SET NULL`` (and ``SET DEFAULT``)
inside the storage engine, below the binary log: the parent's row event is logged, the child
rows the cascade deletes or changes are not. Checked on MariaDB 10.11.19 with ``binlog_format=
ROW``: a ``DELETE`` of a parent row whose child has ``ON DELETE CASCADE`` writes a transaction
with a ``Table_map`` for the child but one ``Delete_rows`` event, the parent's; an ``UPDATE`` of
a key referenced ``ON UPDATE CASCADE`` likewise logs only the parent's ``Update_rows``. A
replica replays the parent's change and lets its own InnoDB cascade; a lake has no InnoDB.

A followed child of such a key would therefore keep, in silver, the rows the cascade deleted
and the key values it changed, silently. Every run checks each followed table before writing
it; the table module's ``on_cascade`` says what to do (see ``tables.CascadePolicy``): refuse,
ignore, or apply the cascades itself (``cdc.cascading``) where that can be exact.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pymysql

from ..errors import ConfigError
from ..tables import CascadePolicy, TableSpec
from .connection import qualified, query
from .introspect import ColumnInfo, TableSchema

log = logging.getLogger(__name__)

# Referential actions InnoDB carries out on the child itself (RESTRICT and NO ACTION only refuse).
ACTIONS = ("CASCADE", "SET NULL", "SET DEFAULT")
RULES = (*ACTIONS, "RESTRICT", "NO ACTION")

# One row per column of each foreign key of the table. KEY_COLUMN_USAGE shows them to a user with
# SELECT on the table; REFERENTIAL_CONSTRAINTS (their ON DELETE/UPDATE rules) only to one with a
# privilege beyond SELECT on it (MariaDB 10.11), which the ingest user need not have: rules it
# hides are read from SHOW CREATE TABLE. Both are asked with constants for schema and table, so
# the server opens this one table, not every table it has.
KEYS_SQL = (
    "SELECT CONSTRAINT_NAME, REFERENCED_TABLE_SCHEMA, REFERENCED_TABLE_NAME, COLUMN_NAME, REFERENCED_COLUMN_NAME"
    " FROM information_schema.KEY_COLUMN_USAGE"
    " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND REFERENCED_TABLE_NAME IS NOT NULL"
    " ORDER BY CONSTRAINT_NAME, ORDINAL_POSITION"
)
RULES_SQL = (
    "SELECT CONSTRAINT_NAME, DELETE_RULE, UPDATE_RULE FROM information_schema.REFERENTIAL_CONSTRAINTS"
    " WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s"
)

# A quoted identifier, or a string (a comment, a default) whose quotes and backquotes are its own.
_TOKEN = re.compile(r"`((?:[^`]|``)*)`|'(?:[^'\\]|\\.|'')*'")
# A foreign key's line of SHOW CREATE TABLE once every identifier is replaced by its number.
_FOREIGN_KEY_LINE = re.compile(r"^\s*CONSTRAINT `(\d+)` FOREIGN KEY \([^)]*\) REFERENCES [^(]*\([^)]*\)(.*?),?$")
_RULE = re.compile(r"\bON (DELETE|UPDATE) (" + "|".join(RULES) + r")\b")


@dataclass(frozen=True)
class Cascade:
    """A foreign key of ``table`` (the child) whose parent's changes InnoDB carries into it."""

    schema: str  # the child's database
    table: str  # the child, a source table
    constraint: str
    parent_schema: str
    parent_table: str
    columns: tuple[str, ...]  # the child's columns, in the key's order
    parent_columns: tuple[str, ...]  # the parent's columns they reference
    on_delete: str  # DELETE_RULE: CASCADE, SET NULL, SET DEFAULT, RESTRICT or NO ACTION
    on_update: str  # UPDATE_RULE, the same values

    @property
    def rules(self) -> str:
        """The actions that change the child, as written in DDL: ``ON DELETE CASCADE``."""
        return " ".join(f"ON {event} {rule}" for event, rule in (("DELETE", self.on_delete),
                                                                 ("UPDATE", self.on_update)) if rule in ACTIONS)

    @property
    def parent(self) -> str:
        """The parent table, qualified only when it lives in another database."""
        return self.parent_table if self.parent_schema == self.schema else f"{self.parent_schema}.{self.parent_table}"

    @property
    def consequence(self) -> str:
        """What silver would get wrong."""
        if self.on_delete == "CASCADE":
            return "silver would keep deleted rows"
        if self.on_delete in ACTIONS:
            return "silver would keep references to deleted rows"
        return "silver would keep old key values"

    def describe(self) -> str:
        return f"foreign key {self.constraint} {self.rules} from {self.parent}"


def rules_from_ddl(ddl: str) -> dict[str, tuple[str, str]]:
    """``{constraint: (DELETE rule, UPDATE rule)}`` of every foreign key in a SHOW CREATE TABLE
    text (an omitted rule is RESTRICT, as the server prints it)."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:  # identifiers may hold anything, even `) ON DELETE`
        if match.group(1) is None:
            return "''"
        names.append(match.group(1).replace("``", "`"))
        return f"`{len(names) - 1}`"

    found = {}
    for line in _TOKEN.sub(number, ddl).splitlines():
        key = _FOREIGN_KEY_LINE.match(line)
        if key is not None:
            rules = dict(_RULE.findall(key.group(2)))
            found[names[int(key.group(1))]] = (rules.get("DELETE", "RESTRICT"), rules.get("UPDATE", "RESTRICT"))
    return found


def cascades_from_rows(schema: str, table: str, keys: Iterable[Sequence[object]],
                       rules: Mapping[str, tuple[str, str]]) -> tuple[Cascade, ...]:
    """The rows of ``KEYS_SQL`` (one per column, ordered by constraint and position) grouped into
    one ``Cascade`` per foreign key whose ``rules`` (DELETE, UPDATE) change the child."""
    columns: dict[str, list[tuple[str, str]]] = {}
    parents: dict[str, tuple[str, str]] = {}
    for name, parent_schema, parent_table, column, parent_column in keys:
        columns.setdefault(str(name), []).append((str(column), str(parent_column)))
        parents[str(name)] = (str(parent_schema), str(parent_table))
    found = []
    for name, pairs in columns.items():
        on_delete, on_update = (rule.upper() for rule in rules[name])
        if on_delete in ACTIONS or on_update in ACTIONS:
            found.append(Cascade(schema, table, name, *parents[name], tuple(c for c, _ in pairs),
                                 tuple(p for _, p in pairs), on_delete, on_update))
    return tuple(found)


def find_cascades(conn: pymysql.connections.Connection, schema: str, table: str) -> tuple[Cascade, ...]:
    """The foreign keys of ``schema.table`` whose parent's deletes or updates change its rows."""
    keys = query(conn, KEYS_SQL, (schema, table))
    if not keys:
        return ()
    names = {str(row[0]) for row in keys}
    rules = {str(name): (str(on_delete), str(on_update))
             for name, on_delete, on_update in query(conn, RULES_SQL, (schema, table))}
    if not names <= rules.keys():  # hidden from this user: the table's DDL has them
        ddl = str(query(conn, f"SHOW CREATE TABLE {qualified(schema, table)}")[0][1])
        rules = {**rules_from_ddl(ddl), **rules}
    unread = sorted(names - rules.keys())
    if unread:  # never guess: a cascade taken for RESTRICT would leave silver stale
        raise ConfigError(
            f"table {table}: cannot read the ON DELETE/ON UPDATE rules of foreign key {unread[0]}: "
            f"GRANT REFERENCES ON {qualified(schema, table)} to the source user, so that "
            "information_schema.REFERENTIAL_CONSTRAINTS shows them", table=table, setting="on_cascade")
    return cascades_from_rows(schema, table, keys, rules)


def refusal(name: str, cascades: Sequence[Cascade]) -> ConfigError:
    """The one-line error that stops table ``name`` (its lake name) for its first cascade."""
    first = cascades[0]
    more = f" (and {len(cascades) - 1} more such foreign key(s))" if len(cascades) > 1 else ""
    return ConfigError(
        f"table {name}: {first.describe()}{more}: the binlog does not carry cascaded changes, so "
        f"{first.consequence}; set on_cascade='apply' in its table module to derive them from the parent's "
        f"changes, or drop the cascade on the source (then re-snapshot with `make ingest TABLE={name} "
        "FULL_REFRESH=1` if it may have fired since the table was first ingested), or set on_cascade='ignore' "
        "to accept stale rows",
        table=name, setting="on_cascade",
    )


# Column types whose values the engine compares as InnoDB compares a foreign key's: exactly.
EXACT_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "date", "year",
                         "binary", "varbinary"})


def compared_exactly(column: ColumnInfo) -> bool:
    """Whether two values of ``column`` are equal to InnoDB exactly when they are equal in Python:
    numbers, dates, binary strings, and CHAR with a binary collation (CHAR drops trailing spaces,
    which PAD SPACE collations would otherwise ignore)."""
    if column.data_type in EXACT_TYPES:
        return True
    collation = (column.collation or "").lower()
    binary = collation == "binary" or collation.endswith("_bin")
    return binary and (column.data_type == "char" or (column.data_type == "varchar" and "_nopad_" in collation))


def unappliable(conn: pymysql.connections.Connection, table: TableSchema, cascade: Cascade) -> str | None:
    """Why ``on_cascade='apply'`` cannot derive ``cascade``'s changes exactly (None: it can)."""
    if "SET DEFAULT" in (cascade.on_delete, cascade.on_update):
        return "SET DEFAULT is not an action InnoDB carries out"
    if cascade.parent_schema != cascade.schema:
        return f"its parent is in another database ({cascade.parent_schema}), whose binlog events are not read"
    if cascade.parent_table == cascade.table:
        return "it references its own table, so a cascade goes on through any number of its rows"
    for column in (*cascade.columns, *table.key):
        info = table.column(column)
        if not compared_exactly(info):
            return (f"column {column} ({info.column_type}{' ' + info.collation if info.collation else ''}) "
                    "compares by a collation, which the engine does not reproduce")
    above = find_cascades(conn, cascade.parent_schema, cascade.parent_table)
    if above:
        return (f"its parent {cascade.parent} is itself the child of {above[0].describe()}, and the binlog "
                "has neither level's cascaded rows")
    return None


@dataclass
class CascadeCheck:
    """Checks each followed table, every run, before it is written: ``on_cascade='refuse'``
    raises ``refusal``; ``'ignore'`` logs one warning per table and pipeline (a ``follow``
    process warns once, not every cycle); ``'apply'`` returns the cascades to apply, or raises
    when one of them cannot be applied exactly."""

    warned: set[str] = field(default_factory=set)

    def check(self, conn: pymysql.connections.Connection, table: TableSchema, spec: TableSpec) -> tuple[Cascade, ...]:
        if not spec.followed:  # copied at one position, never fed from the binlog
            return ()
        cascades = find_cascades(conn, table.schema, spec.source_table)
        if not cascades:
            self.warned.discard(spec.name)
            return ()
        if spec.on_cascade is CascadePolicy.REFUSE:
            raise refusal(spec.name, cascades)
        if spec.on_cascade is CascadePolicy.APPLY:
            for cascade in cascades:
                reason = unappliable(conn, table, cascade)
                if reason is not None:
                    raise ConfigError(
                        f"table {spec.name}: on_cascade='apply' cannot derive the changes of {cascade.describe()}: "
                        f"{reason}; drop the cascade on the source, or set on_cascade='refuse' (or 'ignore' to "
                        "accept stale rows) in its table module", table=spec.name, setting="on_cascade")
            if spec.name not in self.warned:
                self.warned.add(spec.name)
                log.info("table %s: applies %s (on_cascade='apply')", spec.name,
                         "; ".join(c.describe() for c in cascades))
            return cascades
        if spec.name not in self.warned:
            self.warned.add(spec.name)
            log.warning("table %s: %s: the binlog does not carry cascaded changes, so silver keeps the rows "
                        "and values the cascade changes (on_cascade='ignore')", spec.name,
                        "; ".join(c.describe() for c in cascades))
        return ()
