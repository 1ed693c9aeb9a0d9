"""Validate the template answers before anything is generated.

Cookiecutter renders this file with the answers, then runs it. Any problem prints one
``ERROR:`` line naming the answer and the fix, and exits non-zero; cookiecutter then removes
the half-made output folder, so a bad answer leaves nothing behind.
"""

from __future__ import annotations

import keyword
import re
import sys

ANSWERS = {
    "project_name": """{{ cookiecutter.project_name }}""",
    "project_slug": """{{ cookiecutter.project_slug }}""",
    "package_name": """{{ cookiecutter.package_name }}""",
    "tables": """{{ cookiecutter.tables }}""",
    "source_port": """{{ cookiecutter.source_port }}""",
    "source_database": """{{ cookiecutter.source_database }}""",
    "lake_root": """{{ cookiecutter.lake_root }}""",
    "chunk_size": """{{ cookiecutter.chunk_size }}""",
    "server_id_start": """{{ cookiecutter.server_id_start }}""",
}

SLUG = re.compile(r"^[a-z][a-z0-9-]*[a-z0-9]$")
PACKAGE = re.compile(r"^[a-z_][a-z0-9_]*$")
TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# Module names that would shadow the package's own modules or the standard library.
RESERVED_TABLE_MODULES = {"__init__", "engine", "tables", "test", "tests"}


def split_tables(raw: str) -> list[str]:
    return [t.strip() for t in re.split(r"[,\s]+", raw) if t.strip()]


def problems(answers: dict[str, str]) -> list[str]:
    found: list[str] = []
    if not answers["project_name"].strip():
        found.append("project_name is empty: give the project a name, e.g. 'Acme Lakehouse'")
    slug = answers["project_slug"]
    if not SLUG.match(slug):
        found.append(
            f"project_slug {slug!r} is not a valid folder name: use lowercase letters, digits "
            "and dashes, starting with a letter (e.g. 'acme-lakehouse')"
        )
    package = answers["package_name"]
    if not PACKAGE.match(package) or keyword.iskeyword(package):
        found.append(
            f"package_name {package!r} is not a valid Python package name: use lowercase "
            "letters, digits and underscores (e.g. 'acme_lakehouse')"
        )
    elif package in sys.stdlib_module_names or package in {"pyspark", "delta", "pymysql"}:
        found.append(
            f"package_name {package!r} would shadow an installed module: pick another name"
        )
    tables = split_tables(answers["tables"])
    if not tables:
        found.append("tables is empty: name at least one source table (comma separated)")
    seen: set[str] = set()
    for table in tables:
        if not TABLE.match(table):
            found.append(
                f"table name {table!r} is not supported: use letters, digits and underscores, "
                "at most 64 characters, not starting with a digit"
            )
        elif table.lower() in RESERVED_TABLE_MODULES or keyword.iskeyword(table.lower()):
            found.append(f"table name {table!r} clashes with a reserved module name")
        elif table.lower() in seen:
            found.append(f"table {table!r} is listed twice (table module names are lowercase)")
        seen.add(table.lower())
    found += integer_problems("source_port", answers["source_port"], 1, 65535)
    found += integer_problems("chunk_size", answers["chunk_size"], 1, 10_000_000)
    found += integer_problems("server_id_start", answers["server_id_start"], 1, 2**32 - 101)
    if not answers["source_database"].strip():
        found.append("source_database is empty: name the source schema, e.g. 'demo'")
    if not answers["lake_root"].strip():
        found.append("lake_root is empty: give a folder or a Hadoop path such as s3a://bucket/lake")
    return found


def integer_problems(name: str, raw: str, low: int, high: int) -> list[str]:
    try:
        value = int(raw)
    except ValueError:
        return [f"{name} {raw!r} is not a whole number: give a number from {low} to {high}"]
    if not low <= value <= high:
        return [f"{name} {value} is out of range: give a number from {low} to {high}"]
    return []


def main() -> int:
    found = problems(ANSWERS)
    for problem in found:
        print(f"ERROR: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
