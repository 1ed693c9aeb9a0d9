"""A column definition in DDL text: its type, nullability and the value existing rows receive.

Column definitions are parsed for what schema evolution needs: the declared type (checked
against the server's own description of the column), nullability, and the value existing rows
receive (``DEFAULT`` literal, or MySQL's implicit default of a NOT NULL column). An attribute
this parser does not know makes the definition unreadable: it might change the column's values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .ddltokens import closing, string_literal, unquote

# The type names MariaDB and MySQL accept for one stored type.
TYPE_SYNONYMS = {
    "integer": "int", "int4": "int", "int1": "tinyint", "int2": "smallint", "int3": "mediumint",
    "middleint": "mediumint", "int8": "bigint", "bool": "tinyint", "boolean": "tinyint",
    "dec": "decimal", "numeric": "decimal", "fixed": "decimal", "number": "decimal",
    "real": "double", "float8": "double", "float4": "float", "character": "char", "nchar": "char",
    "nvarchar": "varchar", "json": "longtext",
}


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
    """One column as an ADD, CHANGE or MODIFY declares it."""

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


def parse_definition(tokens: list[str]) -> ColumnDefinition | str:
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
        close = closing(tokens, i)
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
                close = closing(tokens, i)
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
        value, end = string_literal(token), i + 1
        while end < len(tokens) and tokens[end][:1] in {"'", '"'}:  # 'a' 'b' is 'ab'
            value += string_literal(tokens[end])
            end += 1
        return Default(True, value, True, " ".join(tokens[i:end])), end
    if re.fullmatch(r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?", token):
        return Default(True, token.lstrip("+"), False, token), i + 1
    if token in {"-", "+"} and i + 1 < len(tokens) and re.fullmatch(r"\d+(?:\.\d*)?", tokens[i + 1]):
        value = ("-" if token == "-" else "") + tokens[i + 1]
        return Default(True, value, False, value), i + 2
    if token == "(":
        close = closing(tokens, i)
        end = len(tokens) if close is None else close + 1
        return Default(False, text=" ".join(tokens[i:end])), end
    # CURRENT_TIMESTAMP, NOW(), a function, b'1', x'ff', _utf8mb4'..': computed or not read here
    end = i + 1
    if end < len(tokens) and tokens[end] == "(":
        close = closing(tokens, end)
        end = len(tokens) if close is None else close + 1
    return Default(False, text=" ".join(tokens[i:end])), end
