"""What one DDL does to a captured table: its columns afterwards and the lake changes that match.

Pure logic. The binlog gives the DDL's text at its exact position; the server's
``information_schema`` gives each column's full description, but as of *now*, which a later DDL
may already have changed. So a column the DDL adds or redefines is taken from the server only
when the server's description still matches what the DDL declared; otherwise the table stops.

A change is applied only when every value the source holds afterwards is known:

- ADD COLUMN: existing rows hold the DDL's literal DEFAULT (NULL when there is none and the
  column is nullable, MySQL's implicit default of a NOT NULL column otherwise). A computed
  default (CURRENT_TIMESTAMP, an expression), a generated or AUTO_INCREMENT column gives each
  existing row a value the binlog does not carry: stop.
- MODIFY/CHANGE: only changes that keep every stored value (integer and DECIMAL widening, longer
  strings, ENUM/SET members appended, nullability, comments). A NOT NULL column's former NULLs
  take its implicit default, as the server converts them. Anything that may convert, truncate
  or pad stored values (shorter strings, FLOAT to DOUBLE, BINARY length, temporal types) stops.
- RENAME and DROP COLUMN: any column but the key.
- Key columns never change: silver is merged on them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..source.columndef import ColumnDefinition, Default
from ..source.ddl import AddColumn, DropColumn, ModifyColumn, RenameColumn, TableDdl
from ..source.introspect import ColumnInfo, TableSchema
from ..source.typemap import spark_type
from ..state.lakechange import Kind, LakeChange

INTEGER_RANK = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "bigint": 5}
TEXT_CAPACITY = {"tinytext": 255, "text": 65_535, "mediumtext": 16_777_215, "longtext": 4_294_967_295}
BLOB_CAPACITY = {"tinyblob": 255, "blob": 65_535, "mediumblob": 16_777_215, "longblob": 4_294_967_295}
MAX_BYTES_PER_CHAR = 4
SPARK_MAX_PRECISION = 38
NUMERIC = {"tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "float", "double", "year"}
STRINGS = {"char", "varchar", *TEXT_CAPACITY}
# Types whose parenthesised arguments change what is stored.
SIZED = {"char", "varchar", "binary", "varbinary", "bit", "decimal", "datetime", "timestamp", "time",
         "float", "double"}
# Types whose declaration alone says how the engine reads and stores them.
DECLARABLE = {*INTEGER_RANK, "decimal", "float", "double", "year", "date", "datetime", "timestamp", "time",
              "char", "varchar", *TEXT_CAPACITY, "binary", "varbinary", *BLOB_CAPACITY, "enum", "set", "bit"}
# The server describes some declared types under another name.
SAME_TYPE = {("longtext", "json")}


@dataclass(frozen=True)
class Evolution:
    """The table's columns after the DDL (in the lake's order: added columns last) and the lake
    changes that take bronze and silver there."""

    schema: TableSchema
    changes: tuple[LakeChange, ...]


def plan(before: TableSchema, ddl: TableDdl, now: TableSchema,
         reserved: frozenset[str] = frozenset()) -> Evolution | str:
    """The evolution ``ddl`` makes of ``before``, or why it cannot be applied exactly.
    ``now``: the table as the server describes it at present; ``reserved``: the lake's own
    column names, which no source column may take. Column names match without case, as in MySQL."""
    if ddl.unsupported is not None:
        return ddl.unsupported
    columns = list(before.columns)
    changes: list[LakeChange] = []
    key = {k.lower() for k in before.key}
    taken = {r.lower() for r in reserved}
    for change in ddl.changes:
        if isinstance(change, AddColumn):
            if _find(columns, change.name) is not None:
                return f"column {change.name} exists already"
            if change.name.lower() in taken:
                return f"column {change.name} has the name of a lake column"
            info = _described(now, change.name, change.definition)
            if isinstance(info, str):
                return info
            value = _existing_value(change.definition, info)
            if isinstance(value, str):
                return value
            columns.append(info)
            changes.append(LakeChange(Kind.ADD, info.name, type=spark_type(info).simpleString(), value=value.value))
        elif isinstance(change, DropColumn):
            at = _find(columns, change.name)
            if at is None:
                return f"column {change.name} is not in the table"
            if columns[at].name.lower() in key:
                return f"key column {columns[at].name} is dropped"
            changes.append(LakeChange(Kind.DROP, columns.pop(at).name))
        elif isinstance(change, RenameColumn):
            found = _renamable(change.old, change.new, columns, key, taken)
            if isinstance(found, str):
                return found
            changes.append(LakeChange(Kind.RENAME, columns[found].name, to=change.new))
            columns[found] = replace(columns[found], name=change.new)
        else:
            outcome = _modify(change, columns, key, taken, now)
            if isinstance(outcome, str):
                return outcome
            changes.extend(outcome)
    return Evolution(replace(before, columns=tuple(columns)), tuple(changes))


def _find(columns: list[ColumnInfo], name: str) -> int | None:
    wanted = name.lower()
    return next((i for i, c in enumerate(columns) if c.name.lower() == wanted), None)


def _renamable(old: str, new: str, columns: list[ColumnInfo], key: set[str], taken: set[str]) -> int | str:
    """Where column ``old`` is, if it may be called ``new``; else why not."""
    at = _find(columns, old)
    if at is None:
        return f"column {old} is not in the table"
    other = _find(columns, new)
    if other is not None and other != at:
        return f"column {new} exists already"
    if new.lower() in taken:
        return f"column {new} has the name of a lake column"
    if columns[at].name.lower() in key and new != columns[at].name:
        return f"key column {columns[at].name} is renamed"
    return at


def _modify(change: ModifyColumn, columns: list[ColumnInfo], key: set[str], taken: set[str],
            now: TableSchema) -> list[LakeChange] | str:
    """Apply MODIFY/CHANGE to ``columns`` in place; the lake changes that match."""
    at = _renamable(change.old, change.new, columns, key, taken)
    if isinstance(at, str):
        return at
    old = columns[at]
    declared = change.definition
    info = _described(now, change.new, declared)
    if isinstance(info, str):
        return info
    if declared.auto_increment and old.column_type != info.column_type:
        return f"column {old.name} becomes AUTO_INCREMENT"
    if old.name.lower() in key and old.column_type != info.column_type:
        return f"key column {old.name} changes type"
    if not keeps_values(old, info):
        return (f"column {old.name} changes from {old.column_type} to {info.column_type}, which may "
                "convert, truncate or pad the values it holds")
    changes: list[LakeChange] = []
    if change.new != old.name:
        changes.append(LakeChange(Kind.RENAME, old.name, to=change.new))
    new_type = spark_type(info)
    if new_type != spark_type(old):
        changes.append(LakeChange(Kind.CAST, change.new, type=new_type.simpleString()))
    # The declaration says whether the column is NOT NULL from now on (the server's description
    # may already show a later DDL). Its NULLs then hold what the server converted them to.
    if old.nullable and not declared.nullable:
        if info.data_type == "timestamp" and not declared.nullable_declared:
            return f"column {old.name} becomes a TIMESTAMP whose nullability depends on explicit_defaults_for_timestamp"
        implicit = implicit_default(info)
        if isinstance(implicit, str):
            return f"column {old.name} becomes NOT NULL and its NULLs become {implicit}"
        if implicit.value is not None:
            changes.append(LakeChange(Kind.FILL, change.new, value=implicit.value))
    info = replace(info, nullable=declared.nullable)
    if not changes and info != replace(old, name=change.new):
        # Nothing the lake holds changes, but how the binlog's values are read may (SET/ENUM
        # members, character set): bronze records the new description.
        changes.append(LakeChange(Kind.DESCRIBE, change.new))
    columns[at] = info
    return changes


def _described(now: TableSchema, name: str, declared: ColumnDefinition) -> ColumnInfo | str:
    """Column ``name`` as the DDL made it: the server's description while it still matches what
    the DDL declared (it has the collation too), else the declaration itself, for the types whose
    declaration says all the engine needs."""
    if declared.generated:
        return f"column {name} is generated: the server computes its values, the binlog does not say them"
    if declared.primary_key:
        return "the primary key changes"
    at = _find(list(now.columns), name)
    info = now.columns[at] if at is not None else None
    if info is not None and matches(declared, info):
        return replace(info, name=name) if info.name.lower() == name.lower() else info
    return declared_column(name, declared)


def declared_column(name: str, declared: ColumnDefinition) -> ColumnInfo | str:
    """The description of a column as a DDL declares it (the source shows it changed since)."""
    kind = declared.type_name
    if kind not in DECLARABLE or declared.charset == "binary":
        return (f"column {name} is {kind}{_arguments(declared)} in this DDL and the source describes it "
                "otherwise now (another DDL changed it since)")
    size = _declared_size(declared)
    arguments = declared.arguments if kind in {"enum", "set"} else tuple(str(n) for n in size)
    if kind in {"datetime", "timestamp", "time"} and size == (0,):
        arguments = ()
    column_type = f"{kind}({','.join(arguments)})" if arguments else kind
    if declared.unsigned and kind in NUMERIC:
        column_type += " unsigned"
    precision, scale = (size[0], size[1]) if kind == "decimal" else (None, None)
    return ColumnInfo(name, kind, column_type, declared.nullable, precision, scale, None, declared.charset)


def matches(declared: ColumnDefinition, info: ColumnInfo) -> bool:
    """Whether the server's description of a column is the type a DDL declared."""
    name = declared.type_name
    if name != info.data_type and (name, info.data_type) not in SAME_TYPE:
        return False
    if name in NUMERIC and name not in {"year"} and declared.unsigned != info.unsigned:
        return False
    if name in {"enum", "set"}:
        return tuple(_unquoted(a) for a in declared.arguments) == info.members
    if name not in SIZED:
        return True
    return _declared_size(declared) == _described_size(info)


def keeps_values(old: ColumnInfo, new: ColumnInfo) -> bool:
    """Whether the server keeps every stored value exactly when ``old`` becomes ``new``."""
    if old.column_type == new.column_type and not _charsets_differ(old, new):
        return True
    a, b = old.data_type, new.data_type
    if a in INTEGER_RANK and b in INTEGER_RANK:
        grows = INTEGER_RANK[b] > INTEGER_RANK[a]
        if old.unsigned == new.unsigned:
            return INTEGER_RANK[b] >= INTEGER_RANK[a]
        return old.unsigned and not new.unsigned and grows
    if a == b == "decimal":
        p, s = old.precision or 10, old.scale or 0
        q, t = new.precision or 10, new.scale or 0
        if p > SPARK_MAX_PRECISION or q > SPARK_MAX_PRECISION:
            return (p, s) == (q, t) and old.unsigned == new.unsigned  # held as text: the scale is in it
        return old.unsigned == new.unsigned and t >= s and q - t >= p - s
    if a in STRINGS and b in STRINGS:
        if _charsets_differ(old, new) or (b == "char" and a != "char"):
            return False  # re-encoded, or trailing spaces stripped
        return _least_characters(new) >= _most_characters(old)
    if a in {"varbinary", *BLOB_CAPACITY} and b in {"varbinary", *BLOB_CAPACITY}:
        return _capacity(new) >= _capacity(old)
    if a == b and a in {"enum", "set"}:
        return new.members[: len(old.members)] == old.members
    if a == b and a in {"datetime", "timestamp"}:
        return (new.display_width or 0) >= (old.display_width or 0)
    return False


def implicit_default(info: ColumnInfo) -> Default | str:
    """The value the server gives a NOT NULL column's rows when nothing else says (MySQL's
    implicit default), in the lake's canonical form; or a description of it when unknown here."""
    kind = info.data_type
    if kind in NUMERIC:
        return Default(True, "0")
    if kind in STRINGS:
        return Default(True, "", True)
    if kind == "enum":
        return Default(True, info.members[0] if info.members else "", True)
    if kind in {"date", "datetime"}:
        return Default(True)  # the zero date, which the lake holds as NULL
    return f"the implicit default of a NOT NULL {info.column_type} column"


def _existing_value(declared: ColumnDefinition, info: ColumnInfo) -> Default | str:
    """What rows that existed before ADD COLUMN hold in it, in the lake's form, or why that is not
    known exactly. Only literals are taken, and only where MySQL stores them as written."""
    if declared.auto_increment:
        return f"column {info.name} is AUTO_INCREMENT: existing rows are numbered by the server"
    if info.data_type == "timestamp" and not declared.nullable_declared:
        return f"TIMESTAMP column {info.name}'s nullability and default depend on explicit_defaults_for_timestamp"
    if info.nullable != declared.nullable:
        return (f"column {info.name} is {'NULL' if info.nullable else 'NOT NULL'} on the source, not as this DDL "
                "declared it (another DDL changed it since)")
    value: Default | str = declared.existing_value
    if declared.default is None and not declared.nullable:
        value = implicit_default(info)
    if isinstance(value, str):
        return f"existing rows get {value} in column {info.name}, which the binlog does not carry"
    if not value.known:
        return f"existing rows get {value.text or 'a value'} in column {info.name}, which the binlog does not carry"
    if value.value is None:
        return value
    if info.data_type in {"date", "datetime"} and value.value.strip("0-:. ") == "":
        return Default(True)  # the zero date: NULL in the lake
    literal = _stored_literal(info, value)
    if literal is None:
        return f"DEFAULT {value.text} of a {info.column_type} column is not taken as written here"
    return Default(True, literal, value.is_string)


def _stored_literal(info: ColumnInfo, value: Default) -> str | None:
    """The literal as the column stores it, or None where MySQL would convert it (rounding,
    two-digit years, case, escapes that depend on sql_mode)."""
    kind, literal = info.data_type, value.value or ""
    if "\\" in value.text:
        return None  # backslash escapes depend on NO_BACKSLASH_ESCAPES
    if kind in INTEGER_RANK:
        return literal if re.fullmatch(r"-?\d+", literal) else None
    if kind == "year":
        return literal if re.fullmatch(r"\d{4}", literal) else None
    if kind in {"decimal", "float", "double"}:
        return literal if re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", literal) else None
    if kind == "char":
        return literal.rstrip(" ")  # CHAR values are read without trailing spaces
    if kind in STRINGS:
        return literal
    if kind == "enum":
        return literal if literal in info.members else None
    if kind in {"date", "datetime"}:
        fraction = re.search(r"\.(\d+)$", literal)
        if fraction and len(fraction.group(1)) > (info.display_width or 0):
            return None  # rounded to the column's precision
        return literal
    return None


def _declared_size(declared: ColumnDefinition) -> tuple[int, ...]:
    name = declared.type_name
    numbers = tuple(int(a) for a in declared.arguments if a.isdigit())
    if name == "decimal":
        return (numbers + (10, 0))[:2] if not numbers else (numbers + (0,))[:2]
    if name in {"char", "binary", "bit"}:
        return numbers or (1,)
    if name in {"datetime", "timestamp", "time"}:
        return numbers or (0,)
    return numbers


def _described_size(info: ColumnInfo) -> tuple[int, ...]:
    if info.data_type == "decimal":
        return (info.precision or 10, info.scale or 0)
    inner = info.column_type.partition("(")[2].partition(")")[0]
    numbers = tuple(int(a) for a in inner.split(",") if a.strip().isdigit())
    if info.data_type in {"datetime", "timestamp", "time"}:
        return numbers or (0,)
    return numbers


def _charsets_differ(old: ColumnInfo, new: ColumnInfo) -> bool:
    """Known to differ (a column taken from its declaration may not name its character set)."""
    return old.charset is not None and new.charset is not None and old.charset != new.charset


def _most_characters(info: ColumnInfo) -> int:
    """The most characters a string column may hold (a TEXT of n bytes: n one-byte characters)."""
    return TEXT_CAPACITY.get(info.data_type, info.display_width or 0)


def _least_characters(info: ColumnInfo) -> int:
    """The characters a string column holds whatever they are (a TEXT of n bytes: n/4 of them)."""
    if info.data_type in TEXT_CAPACITY:
        return TEXT_CAPACITY[info.data_type] // MAX_BYTES_PER_CHAR
    return info.display_width or 0


def _capacity(info: ColumnInfo) -> int:
    """The most bytes a string or binary column holds."""
    if info.data_type in TEXT_CAPACITY:
        return TEXT_CAPACITY[info.data_type]
    if info.data_type in BLOB_CAPACITY:
        return BLOB_CAPACITY[info.data_type]
    width = info.display_width or 0
    return width * (MAX_BYTES_PER_CHAR if info.data_type in {"char", "varchar"} else 1)


def _arguments(declared: ColumnDefinition) -> str:
    return f"({','.join(declared.arguments)})" if declared.arguments else ""


def _unquoted(argument: str) -> str:
    if argument[:1] in {"'", '"'}:
        return argument[1:-1].replace(argument[0] * 2, argument[0])
    return argument
