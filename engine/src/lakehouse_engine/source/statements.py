"""What a binlog QueryEvent means for the tables we capture: pure text logic, no I/O.

Row-based binlogs still carry statements: BEGIN/COMMIT, DDL, and, when a session switched to
``binlog_format=STATEMENT`` (or MIXED chose statement logging), DML written as SQL text instead
of row images. The engine must notice each of these on a watched table, and only those:

- names resolve against the event's *default* database (``USE other; TRUNCATE demo.t`` changes
  ``demo.t``; ``USE demo; TRUNCATE other.t`` does not);
- a statement is a transaction boundary only when it ends one (COMMIT, DDL): treating a statement
  inside a transaction as a boundary would let a resume start mid-transaction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

TableName = tuple[str, str]  # (schema, table), as the server spells them


class Kind(Enum):
    BEGIN = "begin"
    COMMIT = "commit"  # ends a transaction (COMMIT, or ROLLBACK logged for non-transactional writes)
    IN_TRANSACTION = "in-transaction"  # SAVEPOINT and friends: neither starts nor ends one
    DDL = "ddl"  # changes a table's definition or empties it; implicitly commits
    DML = "dml"  # a data change logged as SQL text (statement-based logging)
    OTHER = "other"


@dataclass(frozen=True)
class Statement:
    kind: Kind
    # Names the statement changes, each with its schema as written (None: the default database).
    targets: tuple[tuple[str | None, str], ...] = ()
    # The whole schema is dropped or replaced (DROP DATABASE): every table in it is affected.
    schema_targets: tuple[str, ...] = ()

    def affected(self, default_schema: str | None, watched: Iterable[TableName]) -> tuple[TableName, ...]:
        """The watched tables this statement changes, resolved against the default database."""
        by_lower = {(s.lower(), t.lower()): (s, t) for s, t in watched}
        hits: dict[TableName, None] = {}
        for schema, table in self.targets:
            schema = schema if schema is not None else default_schema
            if schema is None:
                continue
            found = by_lower.get((schema.lower(), table.lower()))
            if found:
                hits[found] = None
        dropped = {s.lower() for s in self.schema_targets}
        for name in by_lower.values():
            if name[0].lower() in dropped:
                hits[name] = None
        return tuple(hits)

    @property
    def ends_transaction(self) -> bool:
        return self.kind in {Kind.COMMIT, Kind.DDL}


_LEADING_COMMENTS = re.compile(r"^(?:\s+|/\*(?!!).*?\*/|--[^\n]*\n|#[^\n]*\n)*", re.DOTALL)
# MariaDB/MySQL executable comments (/*!50100 ... */, /*M!100100 ... */) are statement text.
_EXECUTABLE_COMMENT = re.compile(r"/\*M?!\d*\s?(.*?)\*/", re.DOTALL)
_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$\u0080-\uffff]+)"
_NAME = re.compile(rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?")
_WORD = re.compile(r"[A-Za-z_]+")
_STRINGS = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"", re.DOTALL)


def classify(sql: str) -> Statement:
    """Classify one statement of a QueryEvent."""
    text = _normalise(sql)
    words = [w.upper() for w in _WORD.findall(text[:200])]
    if not words:
        return Statement(Kind.OTHER)
    first = words[0]
    if first in {"BEGIN", "XA"} or words[:2] == ["START", "TRANSACTION"]:
        return Statement(Kind.BEGIN if first != "XA" else Kind.IN_TRANSACTION)
    if first == "COMMIT" or (first == "ROLLBACK" and "TO" not in words[1:3]):
        return Statement(Kind.COMMIT)
    if first in {"SAVEPOINT", "RELEASE"} or first == "ROLLBACK":
        return Statement(Kind.IN_TRANSACTION)
    if first in {"INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD"}:
        return Statement(Kind.DML, _dml_targets(first, text))
    return _ddl(first, words, text)


def _normalise(sql: str) -> str:
    text = _EXECUTABLE_COMMENT.sub(r" \1 ", sql)
    text = _LEADING_COMMENTS.sub("", text, count=1)
    return _STRINGS.sub("''", text)  # names never hide inside string literals


def _ddl(first: str, words: list[str], text: str) -> Statement:
    if first in {"ALTER", "DROP", "CREATE"} and "TEMPORARY" in words[:4]:
        return Statement(Kind.OTHER)  # temporary tables are never row-logged
    if first == "TRUNCATE":
        return Statement(Kind.DDL, _names_after(text, r"TRUNCATE(?:\s+TABLE)?", first_only=True))
    if first == "ALTER" and "TABLE" in words[:4]:
        targets = _names_after(text, r"ALTER\s+(?:ONLINE\s+)?(?:IGNORE\s+)?TABLE(?:\s+IF\s+EXISTS)?",
                               first_only=True)
        renamed = _names_after(text, r"\bRENAME(?:\s+(?:TO|AS))?(?!\s+(?:COLUMN|INDEX|KEY|CONSTRAINT)\b)",
                               first_only=True, anywhere=True)
        return Statement(Kind.DDL, targets + renamed)
    if first == "DROP" and "TABLE" in words[:3]:
        return Statement(Kind.DDL, _names_after(text, r"DROP\s+TABLES?(?:\s+IF\s+EXISTS)?"))
    if first == "RENAME" and words[1:2] in (["TABLE"], ["TABLES"]):
        return Statement(Kind.DDL, _names_after(text, r"RENAME\s+TABLES?", rename=True))
    if words[:3] == ["CREATE", "OR", "REPLACE"] and words[3:4] == ["TABLE"]:
        return Statement(Kind.DDL, _names_after(text, r"CREATE\s+OR\s+REPLACE\s+TABLE(?:\s+IF\s+NOT\s+EXISTS)?",
                                                first_only=True))
    dropped = _schema_dropped(words, text)
    if dropped is not None:
        return Statement(Kind.DDL, schema_targets=dropped)
    if first in {"CREATE", "ALTER", "DROP", "RENAME", "GRANT", "REVOKE"}:
        return Statement(Kind.DDL)  # implicit commit, but no watched table changes
    return Statement(Kind.OTHER)


def _schema_dropped(words: list[str], text: str) -> tuple[str, ...] | None:
    """The schema a DROP DATABASE / CREATE OR REPLACE DATABASE removes, or None."""
    if words[:1] == ["DROP"] and words[1:2] in (["DATABASE"], ["SCHEMA"]):
        keyword = r"DROP\s+(?:DATABASE|SCHEMA)(?:\s+IF\s+EXISTS)?"
    elif words[:3] == ["CREATE", "OR", "REPLACE"] and words[3:4] in (["DATABASE"], ["SCHEMA"]):
        keyword = r"CREATE\s+OR\s+REPLACE\s+(?:DATABASE|SCHEMA)(?:\s+IF\s+NOT\s+EXISTS)?"
    else:
        return None
    return tuple(table for _, table in _names_after(text, keyword, first_only=True))


def _names_after(text: str, keyword: str, *, first_only: bool = False, rename: bool = False,
                 anywhere: bool = False) -> tuple[tuple[str | None, str], ...]:
    """Table names in the comma separated list that follows ``keyword``."""
    pattern = re.compile(("" if anywhere else r"^\s*") + keyword + r"\s+", re.IGNORECASE)
    match = pattern.search(text)
    if not match:
        return ()
    rest = text[match.end():]
    names: list[tuple[str | None, str]] = []
    while True:
        name = _NAME.match(rest)
        if not name:
            break
        names.append(_split(name))
        rest = rest[name.end():]
        if rename:  # RENAME TABLE a TO b, c TO d: both sides are affected
            to = re.match(r"\s+TO\s+", rest, re.IGNORECASE)
            if not to:
                break
            rest = rest[to.end():]
            name = _NAME.match(rest)
            if not name:
                break
            names.append(_split(name))
            rest = rest[name.end():]
        if first_only:
            break
        comma = re.match(r"\s*,\s*", rest)
        if not comma:
            break
        rest = rest[comma.end():]
    return tuple(names)


def _dml_targets(first: str, text: str) -> tuple[tuple[str | None, str], ...]:
    """Tables a statement-logged DML may change. Conservative for multi-table forms: every
    table named between UPDATE and SET, or between DELETE and WHERE, counts."""
    if first in {"INSERT", "REPLACE"}:
        return _names_after(text, r"(?:INSERT|REPLACE)(?:\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE))*"
                                  r"(?:\s+INTO)?", first_only=True)
    if first == "LOAD":
        return _names_after(text, r"\bINTO\s+TABLE", first_only=True, anywhere=True)
    if first == "UPDATE":
        span = re.split(r"\bSET\b", text, maxsplit=1, flags=re.IGNORECASE)[0]
        return _all_names(span[len("UPDATE"):])
    span = re.split(r"\bWHERE\b|\bORDER\s+BY\b|\bLIMIT\b", text, maxsplit=1, flags=re.IGNORECASE)[0]
    return _all_names(span[len("DELETE"):])


_NOT_TABLES = frozenset({
    "LOW_PRIORITY", "QUICK", "IGNORE", "FROM", "USING", "JOIN", "INNER", "LEFT", "RIGHT", "OUTER",
    "CROSS", "STRAIGHT_JOIN", "NATURAL", "ON", "AS", "AND", "OR", "NOT", "IS", "NULL",
})


def _all_names(span: str) -> tuple[tuple[str | None, str], ...]:
    """Every identifier in a table-reference list, minus keywords. Aliases and join columns are
    included too: for a check that stops a table, a false alarm is safe, a miss is not."""
    span = re.sub(r"\bON\b.*?(?=\bJOIN\b|,|$)", " ", span, flags=re.IGNORECASE | re.DOTALL)
    names = []
    for match in _NAME.finditer(span):
        name = _split(match)
        if name[0] is None and name[1].upper() in _NOT_TABLES:
            continue
        names.append(name)
    return tuple(names)


def _split(match: re.Match[str]) -> tuple[str | None, str]:
    first, second = match.group(1), match.group(2)
    if second is None:
        return (None, _unquote(first))
    return (_unquote(first), _unquote(second))


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name
