"""What an ``ALTER TABLE`` or ``TRUNCATE`` does to a table's columns, read from its text.

The binlog carries DDL as SQL text only. This parser reads the parts of MariaDB/MySQL's grammar
that change the columns a lake table holds (ADD/DROP/RENAME/CHANGE/MODIFY COLUMN) and knows the
parts that change nothing a row image carries (indexes, table options, column defaults, which
only affect later inserts, and those arrive with their values). Everything else is reported as
*unsupported* with the reason, and the engine stops the table rather than guess: a DDL it cannot
place exactly is never applied approximately.

Column definitions are read by :mod:`columndef`, the text's tokens by :mod:`ddltokens`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .columndef import ColumnDefinition, parse_definition
from .ddltokens import split_items, tokenize, unquote
from .statements import _EXECUTABLE_COMMENT, _LEADING_COMMENTS

# ALTER TABLE items that change nothing a row image carries.
_TABLE_OPTIONS = {
    "ENGINE", "COMMENT", "AUTO_INCREMENT", "ROW_FORMAT", "ALGORITHM", "LOCK", "FORCE",
    "KEY_BLOCK_SIZE", "STATS_PERSISTENT", "STATS_AUTO_RECALC", "STATS_SAMPLE_PAGES", "CHECKSUM",
    "PAGE_CHECKSUM", "TRANSACTIONAL", "PACK_KEYS", "DELAY_KEY_WRITE", "MIN_ROWS", "MAX_ROWS",
    "AVG_ROW_LENGTH", "ORDER", "ENABLE", "DISABLE", "PAGE_COMPRESSED", "PAGE_COMPRESSION_LEVEL",
    "IETF_QUOTES", "ENCRYPTED", "ENCRYPTION_KEY_ID", "SEQUENCE", "DATA", "INDEX", "INSERT_METHOD",
    "TABLESPACE", "UNION", "VALIDATION", "WITHOUT", "WITH", "STATS_SAMPLE", "COMPRESSION",
}
_INDEX_WORDS = {"INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL", "CONSTRAINT", "FOREIGN", "CHECK",
                "VECTOR"}


@dataclass(frozen=True)
class AddColumn:
    name: str
    definition: ColumnDefinition


@dataclass(frozen=True)
class DropColumn:
    name: str


@dataclass(frozen=True)
class RenameColumn:
    old: str
    new: str


@dataclass(frozen=True)
class ModifyColumn:
    """CHANGE (``old`` != ``new``) or MODIFY: a new definition, maybe a new name."""

    old: str
    new: str
    definition: ColumnDefinition


ColumnChange = AddColumn | DropColumn | RenameColumn | ModifyColumn


@dataclass(frozen=True)
class TableDdl:
    """The column changes of one statement, in order; ``unsupported`` says why the statement
    cannot be applied (then ``changes`` is meaningless); ``truncate`` empties the table."""

    changes: tuple[ColumnChange, ...] = ()
    unsupported: str | None = None
    truncate: bool = False
    ignored: tuple[str, ...] = field(default=())  # items that change no row image, as written


def parse(sql: str) -> TableDdl:
    """Parse one DDL statement that the binlog reports as changing a watched table."""
    text = _LEADING_COMMENTS.sub("", _EXECUTABLE_COMMENT.sub(r" \1 ", sql), count=1).strip().rstrip(";")
    tokens = tokenize(text)
    upper = [t.upper() for t in tokens]
    if upper[:1] == ["TRUNCATE"]:
        return TableDdl(truncate=True)
    if upper[:1] != ["ALTER"]:
        return TableDdl(unsupported=f"{' '.join(upper[:2]) or '?'} replaces or removes the table")
    i = 1
    while i < len(upper) and upper[i] in {"ONLINE", "IGNORE"}:
        i += 1
    if upper[i : i + 1] != ["TABLE"]:
        return TableDdl(unsupported="not an ALTER TABLE")
    i += 1
    if upper[i : i + 2] == ["IF", "EXISTS"]:
        i += 2
    i += 1  # the table name
    if upper[i : i + 1] == ["."]:
        i += 2
    if upper[i : i + 1] == ["WAIT"]:
        i += 2
    elif upper[i : i + 1] == ["NOWAIT"]:
        i += 1
    changes: list[ColumnChange] = []
    ignored: list[str] = []
    for item in split_items(tokens[i:]):
        outcome = _item(item)
        if isinstance(outcome, str):
            return TableDdl(unsupported=outcome)
        if outcome is None:
            ignored.append(" ".join(item)[:60])
        else:
            changes.extend(outcome)
    return TableDdl(tuple(changes), ignored=tuple(ignored))


def _item(item: list[str]) -> list[ColumnChange] | str | None:
    """One ALTER item: its column changes, ``None`` when it changes no row image, or the
    reason it is unsupported."""
    words = [t.upper() for t in item]
    head = words[0]
    if "PARTITION" in words or "PARTITIONING" in words:
        return "partition maintenance can remove or move rows without row events"
    if "VERSIONING" in words or "PERIOD" in words:
        return "system versioning changes which rows the table holds"
    if head == "ADD":
        return _add(item, words)
    if head == "DROP":
        rest = words[1:]
        if rest[:2] == ["PRIMARY", "KEY"]:
            return "the primary key changes"
        if rest[:1] and rest[0] in {"INDEX", "KEY", "FOREIGN", "CONSTRAINT", "CHECK"}:
            return None
        j = 2 if rest[:1] == ["COLUMN"] else 1
        if words[j : j + 2] == ["IF", "EXISTS"]:
            return "DROP COLUMN IF EXISTS may or may not have dropped the column"
        if j >= len(item):
            return f"cannot read {' '.join(item)[:60]!r}"
        return [DropColumn(unquote(item[j]))]
    if head == "RENAME":
        if words[1:2] in (["INDEX"], ["KEY"]):
            return None
        if words[1:2] == ["COLUMN"] and len(item) >= 5 and words[3] == "TO":
            return [RenameColumn(unquote(item[2]), unquote(item[4]))]
        return "the table is renamed"
    if head == "CHANGE":
        j = 2 if words[1:2] == ["COLUMN"] else 1
        if words[j : j + 2] == ["IF", "EXISTS"]:
            return "CHANGE COLUMN IF EXISTS may or may not have changed the column"
        if j + 2 > len(item):
            return f"cannot read {' '.join(item)[:60]!r}"
        definition = parse_definition(item[j + 2 :])
        return definition if isinstance(definition, str) else [
            ModifyColumn(unquote(item[j]), unquote(item[j + 1]), definition)]
    if head == "MODIFY":
        j = 2 if words[1:2] == ["COLUMN"] else 1
        if words[j : j + 2] == ["IF", "EXISTS"]:
            return "MODIFY COLUMN IF EXISTS may or may not have changed the column"
        if j + 1 > len(item):
            return f"cannot read {' '.join(item)[:60]!r}"
        definition = parse_definition(item[j + 1 :])
        name = unquote(item[j])
        return definition if isinstance(definition, str) else [ModifyColumn(name, name, definition)]
    if head == "ALTER":
        # ALTER [COLUMN] c SET DEFAULT / DROP DEFAULT / SET [IN]VISIBLE, ALTER INDEX: only later
        # inserts see a default, and they arrive with their values.
        return None
    if head == "CONVERT":
        return "CONVERT TO CHARACTER SET re-encodes every text column"
    if head in {"DEFAULT", "CHARACTER", "CHARSET", "COLLATE"}:
        return None  # the table's default for columns added later, which name their own
    if head in {"DISCARD", "IMPORT"}:
        return "the tablespace is replaced"
    if head in _TABLE_OPTIONS:
        return None
    return f"cannot read {' '.join(item)[:60]!r}"


def _add(item: list[str], words: list[str]) -> list[ColumnChange] | str | None:
    rest = words[1:]
    if rest[:2] == ["PRIMARY", "KEY"] or (rest[:1] == ["CONSTRAINT"] and "PRIMARY" in rest[:4]):
        return "the primary key changes"
    if rest[:1] and rest[0] in _INDEX_WORDS:
        return None
    j = 2 if rest[:1] == ["COLUMN"] else 1
    if words[j : j + 3] == ["IF", "NOT", "EXISTS"]:
        return "ADD COLUMN IF NOT EXISTS may or may not have added the column"
    if j < len(item) and item[j] == "(":  # ADD [COLUMN] (a INT, b INT)
        inner = item[j + 1 : -1] if item[-1] == ")" else item[j + 1 :]
        changes: list[ColumnChange] = []
        for column in split_items(inner):
            if column[0].upper() in _INDEX_WORDS or column[0].upper() == "PRIMARY":
                return "ADD (...) with keys is not read"
            definition = parse_definition(column[1:])
            if isinstance(definition, str):
                return definition
            changes.append(AddColumn(unquote(column[0]), definition))
        return changes
    if j + 1 > len(item):
        return f"cannot read {' '.join(item)[:60]!r}"
    definition = parse_definition(item[j + 1 :])
    return definition if isinstance(definition, str) else [AddColumn(unquote(item[j]), definition)]
