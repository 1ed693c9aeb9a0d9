"""Quoting of identifiers in SQL text: MySQL/MariaDB and Spark SQL both quote with backticks
and double an embedded one, so the source's statements and the lake's share this function."""


def quote_ident(name: str) -> str:
    """Quote an identifier: backticks, with embedded backticks doubled."""
    return "`" + name.replace("`", "``") + "`"
