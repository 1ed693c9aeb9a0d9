"""What an ``ALTER TABLE`` or ``TRUNCATE`` does to a table's columns, read from its text.

The binlog carries DDL as SQL text only. This parser reads the parts of MariaDB/MySQL's grammar
that change the columns a lake table holds (ADD/DROP/RENAME/CHANGE/MODIFY COLUMN) and knows the
parts that change nothing a row image carries (indexes, table options, column defaults, which
only affect later inserts, and those arrive with their values). Everything else is reported as
*unsupported* with the reason, and the engine stops the table rather than guess: a DDL it cannot
place exactly is never applied approximately.

Column definitions are parsed for what evolution needs: the declared type (checked against the
server's own description of the column), nullability, and the value existing rows receive
(``DEFAULT`` literal, or MySQL's implicit default of a NOT NULL column).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .statements import _EXECUTABLE_COMMENT, _LEADING_COMMENTS

# The type names MariaDB and MySQL accept for one stored type.
TYPE_SYNONYMS = {
    "integer": "int", "int4": "int", "int1": "tinyint", "int2": "smallint", "int3": "mediumint",
    "middleint": "mediumint", "int8": "bigint", "bool": "tinyint", "boolean": "tinyint",
    "dec": "decimal", "numeric": "decimal", "fixed": "decimal", "number": "decimal",
    "real": "double", "float8": "double", "float4": "float", "character": "char", "nchar": "char",
    "nvarchar": "varchar", "json": "longtext",
}
INTEGER_RANK = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "bigint": 5}
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
_IDENT = r"`(?:[^`]|``)+`|[A-Za-z0-9_$\u0080-\uffff]+"
# Whitespace and comments ("-- " needs a space or the line's end: "--1" is minus minus one).
_SKIP = re.compile(r"(?:\s+|/\*.*?\*/|--(?=\s|$)[^\n]*|#[^\n]*)*", re.DOTALL)
_TOKEN = re.compile(
    rf"\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![A-Za-z_$])|{_IDENT}|'(?:[^'\\]|\\.|'')*'"
    r"|\"(?:[^\"\\]|\\.|\"\")*\"|[(),=.]|\S)",
    re.DOTALL,
)


@dataclass(frozen=True)
class Default:
    """What existing rows hold in a column the DDL adds (or makes NOT NULL).

    ``known`` False: an expression (``CURRENT_TIMESTAMP``, ``uuid()``) or a literal this parser
    will not interpret; its value per row cannot be known from the binlog."""

    known: bool
    value: str | None = None  # the literal as SQL text (unquoted string), None for NULL
    is_string: bool = False
    text: str = ""  # as written, for messages


NULL_DEFAULT = Default(True)


@dataclass(frozen=True)
class ColumnDefinition:
    type_name: str  # canonical lower-case name, synonyms resolved: "int", "varchar", "decimal"
    arguments: tuple[str, ...]  # inside the type's parentheses: ("10", "2"), ("'a'", "'b'")
    unsigned: bool
    nullable: bool
    default: Default | None  # None: no DEFAULT clause
    generated: bool = False  # AS (expr) / GENERATED ALWAYS: its value is computed
    auto_increment: bool = False
    primary_key: bool = False
    charset: str | None = None  # CHARACTER SET / CHARSET as declared (None: the table's default)
    nullable_declared: bool = False  # NULL or NOT NULL is written (TIMESTAMP's default depends on it)

    @property
    def existing_value(self) -> Default:
        """What rows that existed before the DDL hold in this column afterwards."""
        if self.default is not None:
            return self.default
        if self.nullable:
            return NULL_DEFAULT
        return Default(False, text="the implicit default of a NOT NULL column")


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
    tokens = _tokens(text)
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
    for item in _split_items(tokens[i:]):
        outcome = _item(item)
        if isinstance(outcome, str):
            return TableDdl(unsupported=outcome)
        if outcome is None:
            ignored.append(" ".join(item)[:60])
        else:
            changes.extend(outcome)
    return TableDdl(tuple(changes), ignored=tuple(ignored))


def unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def _tokens(text: str) -> list[str]:
    """Identifiers, literals and punctuation; comments are skipped (a comment may say anything,
    e.g. ``/* NOT NULL later */``, and must never be read as part of the statement)."""
    tokens = []
    position = 0
    while position < len(text):
        position = _SKIP.match(text, position).end()  # type: ignore[union-attr]
        if position >= len(text):
            break
        match = _TOKEN.match(text, position)
        if not match:
            break
        tokens.append(match.group(1))
        position = match.end()
    return tokens


def _split_items(tokens: list[str]) -> list[list[str]]:
    """The comma separated items of an ALTER TABLE, commas inside parentheses kept."""
    items: list[list[str]] = [[]]
    depth = 0
    for token in tokens:
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        if token == "," and depth == 0:
            items.append([])
        else:
            items[-1].append(token)
    return [item for item in items if item]


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
        definition = _definition(item[j + 2 :])
        return definition if isinstance(definition, str) else [
            ModifyColumn(unquote(item[j]), unquote(item[j + 1]), definition)]
    if head == "MODIFY":
        j = 2 if words[1:2] == ["COLUMN"] else 1
        if words[j : j + 2] == ["IF", "EXISTS"]:
            return "MODIFY COLUMN IF EXISTS may or may not have changed the column"
        if j + 1 > len(item):
            return f"cannot read {' '.join(item)[:60]!r}"
        definition = _definition(item[j + 1 :])
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
        for column in _split_items(inner):
            if column[0].upper() in _INDEX_WORDS or column[0].upper() == "PRIMARY":
                return "ADD (...) with keys is not read"
            definition = _definition(column[1:])
            if isinstance(definition, str):
                return definition
            changes.append(AddColumn(unquote(column[0]), definition))
        return changes
    if j + 1 > len(item):
        return f"cannot read {' '.join(item)[:60]!r}"
    definition = _definition(item[j + 1 :])
    return definition if isinstance(definition, str) else [AddColumn(unquote(item[j]), definition)]


def _definition(tokens: list[str]) -> ColumnDefinition | str:
    """A column definition: data type, then attributes in any order."""
    if not tokens:
        return "a column definition without a type"
    words = [t.upper() for t in tokens]
    name = words[0].lower()
    i = 1
    for two, one in ((("DOUBLE", "PRECISION"), "double"), (("CHARACTER", "VARYING"), "varchar"),
                     (("CHAR", "VARYING"), "varchar"), (("NATIONAL", "CHAR"), "char"),
                     (("NATIONAL", "CHARACTER"), "char"), (("NATIONAL", "VARCHAR"), "varchar"),
                     (("LONG", "VARBINARY"), "mediumblob"), (("LONG", "VARCHAR"), "mediumtext")):
        if tuple(words[:2]) == two:
            name, i = one, 2
            if one == "char" and words[2:3] == ["VARYING"]:
                name, i = "varchar", 3
    if name == "long":
        name = "mediumtext"
    if name == "serial":
        return "SERIAL adds an AUTO_INCREMENT column, numbering existing rows"
    arguments: tuple[str, ...] = ()
    if words[i : i + 1] == ["("]:
        close = _closing(tokens, i)
        if close is None:
            return "unbalanced parentheses in a column definition"
        arguments = tuple(t for t in tokens[i + 1 : close] if t != ",")
        i = close + 1
    if name in {"bool", "boolean"}:
        arguments = ("1",)
    if name == "float" and len(arguments) == 1:  # FLOAT(p): a double from 25 binary digits on
        name, arguments = ("float" if int(arguments[0]) <= 24 else "double"), ()
    name = TYPE_SYNONYMS.get(name, name)
    attributes = _attributes(tokens, i)
    if isinstance(attributes, str):
        return attributes
    primary = attributes.get("primary", False)
    nullable = attributes.get("nullable", True)
    return ColumnDefinition(name, arguments, bool(attributes.get("unsigned")), bool(nullable) and not primary,
                            attributes.get("default"), bool(attributes.get("generated")),  # type: ignore[arg-type]
                            bool(attributes.get("auto_increment")), bool(primary),
                            attributes.get("charset"), "nullable" in attributes)  # type: ignore[arg-type]


# Attributes that change nothing the lake holds: (words, how many tokens follow them as values).
_PLAIN_ATTRIBUTES = {
    ("SIGNED",): 0, ("BINARY",): 0, ("ASCII",): 0, ("UNICODE",): 0, ("BYTE",): 0, ("INVISIBLE",): 0,
    ("VISIBLE",): 0, ("COLLATE",): 1, ("COMMENT",): 1, ("COLUMN_FORMAT",): 1, ("STORAGE",): 1,
    ("SRID",): 1, ("UNIQUE", "KEY"): 0, ("UNIQUE",): 0,
}
_POSITION_WORDS = {"FIRST", "AFTER"}


def _attributes(tokens: list[str], i: int) -> dict[str, object] | str:
    """The attributes of a column definition after its type; an attribute this parser does not
    know makes the definition unreadable (it might change the column's values)."""
    words = [t.upper() for t in tokens]
    found: dict[str, object] = {}
    while i < len(words):
        word = words[i]
        if word in _POSITION_WORDS:
            break  # FIRST / AFTER col: where the column goes, the definition is over
        plain = next(((ws, n) for ws, n in _PLAIN_ATTRIBUTES.items() if tuple(words[i : i + len(ws)]) == ws), None)
        if plain is not None:
            i += len(plain[0])
            if words[i : i + 1] == ["="]:
                i += 1
            i += plain[1]
        elif word in {"CHARSET", "CHARACTER"}:
            i += 1 if word == "CHARSET" else 2
            if words[i : i + 1] == ["="]:
                i += 1
            found["charset"] = unquote(tokens[i]).lower() if i < len(tokens) else None
            i += 1
        elif word in {"UNSIGNED", "ZEROFILL"}:
            found["unsigned"] = True
            i += 1
        elif words[i : i + 2] == ["NOT", "NULL"]:
            found["nullable"] = False
            i += 2
        elif word == "NULL":
            found["nullable"] = True
            i += 1
        elif word == "DEFAULT":
            found["default"], i = _default(tokens, i + 1)
        elif words[i : i + 2] == ["ON", "UPDATE"]:  # ON UPDATE CURRENT_TIMESTAMP[(n)]: later updates only
            i += 3
            if words[i : i + 1] == ["("]:
                close = _closing(tokens, i)
                i = len(words) if close is None else close + 1
        elif word in {"AS", "GENERATED"}:
            found["generated"] = True
            break  # the rest is the expression
        elif word == "AUTO_INCREMENT":
            found["auto_increment"] = True
            i += 1
        elif word == "PRIMARY" or word == "KEY":
            found["primary"] = True
            i += 2 if words[i : i + 2] == ["PRIMARY", "KEY"] else 1
        elif word in {"CHECK", "CONSTRAINT", "REFERENCES"}:
            break  # a constraint: it refuses rows, it changes none
        elif word in {"COMPRESSED", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE", "REF_SYSTEM_ID"}:
            i += 1
            if words[i : i + 1] == ["="]:
                i += 2
        else:
            return f"cannot read {tokens[i]!r} in a column definition"
    return found


def _default(tokens: list[str], i: int) -> tuple[Default, int]:
    if i >= len(tokens):
        return Default(False, text=""), i
    token = tokens[i]
    upper = token.upper()
    if upper == "NULL":
        return NULL_DEFAULT, i + 1
    if token[:1] in {"'", '"'}:
        value, end = _string_literal(token), i + 1
        while end < len(tokens) and tokens[end][:1] in {"'", '"'}:  # 'a' 'b' is 'ab'
            value += _string_literal(tokens[end])
            end += 1
        return Default(True, value, True, " ".join(tokens[i:end])), end
    if re.fullmatch(r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?", token):
        return Default(True, token.lstrip("+"), False, token), i + 1
    if token in {"-", "+"} and i + 1 < len(tokens) and re.fullmatch(r"\d+(?:\.\d*)?", tokens[i + 1]):
        value = ("-" if token == "-" else "") + tokens[i + 1]
        return Default(True, value, False, value), i + 2
    if token == "(":
        close = _closing(tokens, i)
        end = len(tokens) if close is None else close + 1
        return Default(False, text=" ".join(tokens[i:end])), end
    # CURRENT_TIMESTAMP, NOW(), a function, b'1', x'ff', _utf8mb4'..': computed or not read here
    end = i + 1
    if end < len(tokens) and tokens[end] == "(":
        close = _closing(tokens, end)
        end = len(tokens) if close is None else close + 1
    return Default(False, text=" ".join(tokens[i:end])), end


def _string_literal(token: str) -> str:
    quote = token[0]
    body = token[1:-1]
    body = body.replace(quote * 2, quote)
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "Z": "\x1a"}.get(
        m.group(1), m.group(1)), body)


def _closing(tokens: list[str], open_at: int) -> int | None:
    depth = 0
    for j in range(open_at, len(tokens)):
        if tokens[j] == "(":
            depth += 1
        elif tokens[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return None
