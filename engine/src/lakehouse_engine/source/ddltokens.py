"""The tokens of a DDL statement's text, as MariaDB/MySQL's lexer sees them.

Identifiers (backquoted or bare), numbers, string literals and punctuation; comments and
whitespace are skipped. :mod:`ddl` reads statements from these tokens, :mod:`columndef` column
definitions.
"""

from __future__ import annotations

import re

_IDENT = r"`(?:[^`]|``)+`|[A-Za-z0-9_$\u0080-\uffff]+"
# Whitespace and comments ("-- " needs a space or the line's end: "--1" is minus minus one).
_SKIP = re.compile(r"(?:\s+|/\*.*?\*/|--(?=\s|$)[^\n]*|#[^\n]*)*", re.DOTALL)
_TOKEN = re.compile(
    rf"\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![A-Za-z_$])|{_IDENT}|'(?:[^'\\]|\\.|'')*'"
    r"|\"(?:[^\"\\]|\\.|\"\")*\"|[(),=.]|\S)",
    re.DOTALL,
)


def tokenize(text: str) -> list[str]:
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


def split_items(tokens: list[str]) -> list[list[str]]:
    """The comma separated items of an ALTER TABLE (or of ``ADD (...)``), commas inside
    parentheses kept."""
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


def unquote(name: str) -> str:
    """An identifier as named: backquotes removed, doubled ones undone."""
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def string_literal(token: str) -> str:
    """The value of a quoted literal token: the quotes removed, escapes undone."""
    quote = token[0]
    body = token[1:-1]
    body = body.replace(quote * 2, quote)
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "Z": "\x1a"}.get(
        m.group(1), m.group(1)), body)


def closing(tokens: list[str], open_at: int) -> int | None:
    """The index of the parenthesis closing the one at ``open_at``; None when it is unbalanced."""
    depth = 0
    for j in range(open_at, len(tokens)):
        if tokens[j] == "(":
            depth += 1
        elif tokens[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return None
