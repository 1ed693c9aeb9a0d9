"""Validate the template answers before anything is generated.

Cookiecutter renders this file with the answers, then runs it. Any problem prints one
``ERROR:`` line naming the answer and the fix, and exits non-zero; cookiecutter then removes
the half-made output folder, so a bad answer leaves nothing behind.

The answers arrive as JSON in a raw string (``jsonify`` escapes quotes, backslashes and line
breaks), so no answer can break this file before it is checked. Free-text answers are rendered
with ``tojson`` where they land in YAML or TOML; the answers that become names, numbers or
``profiles.yml`` defaults are held to the characters those places take unquoted.
"""

from __future__ import annotations

import json
import keyword
import re
import sys
import unicodedata

ANSWERS: dict[str, str] = json.loads(r"""{{ cookiecutter | jsonify }}""")
# The rest is plain Python, not rendered: {% raw %}

SLUG = re.compile(r"[a-z][a-z0-9-]*[a-z0-9]")
PACKAGE = re.compile(r"[a-z_][a-z0-9_]*")
TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# profiles.yml defaults sit inside "{{ env_var('NAME', '...') }}": quote-free, markup-free.
PROFILE_DEFAULTS = {
    "source_host": (re.compile(r"[A-Za-z0-9._:-]{1,253}"), "letters, digits and . _ : -", "MYSQL_HOST"),
    "source_user": (re.compile(r"[A-Za-z0-9._@-]{1,80}"), "letters, digits and . _ @ -", "MYSQL_USER"),
    "source_database": (re.compile(r"[A-Za-z0-9_$-]{1,64}"), "letters, digits and _ $ -", "MYSQL_DATABASE"),
}
# Free text, rendered with tojson: anything but line breaks, control characters and markup.
FREE_TEXT = {
    "project_name": "give the project a name, e.g. 'Acme Lakehouse'",
    "lake_root": "give a folder or a Hadoop path such as s3a://bucket/lake",
    "spark_master": "give a Spark master URL such as local[*]",
}
# Module names that would shadow the package's own modules or the standard library.
RESERVED_TABLE_MODULES = {"__init__", "engine", "tables", "test", "tests"}
# Plain YAML scalars that load as booleans or null, not as the name (profile: yes -> True).
YAML_WORDS = {"yes", "no", "on", "off", "true", "false", "null"}
# An answer given on the command line is rendered by cookiecutter (and by cruft on every update).
JINJA_MARKUP = ("{{", "{%", "{#")


def split_tables(raw: str) -> list[str]:
    return [t.strip() for t in re.split(r"[,\s]+", raw) if t.strip()]


def problems(answers: dict[str, str]) -> list[str]:
    found: list[str] = []
    for name in FREE_TEXT:
        found += text_problems(name, answers[name])
    slug = answers["project_slug"]
    if not SLUG.fullmatch(slug):
        found.append(
            f"project_slug {slug!r} is not a valid folder name: use lowercase letters, digits "
            "and dashes, starting with a letter (e.g. 'acme-lakehouse')"
        )
    elif slug in YAML_WORDS:
        found.append(f"project_slug {slug!r} reads as a boolean or null in YAML: pick another name")
    package = answers["package_name"]
    if not PACKAGE.fullmatch(package) or keyword.iskeyword(package):
        found.append(
            f"package_name {package!r} is not a valid Python package name: use lowercase "
            "letters, digits and underscores (e.g. 'acme_lakehouse')"
        )
    elif package in sys.stdlib_module_names or package in {"pyspark", "delta", "pymysql"}:
        found.append(
            f"package_name {package!r} would shadow an installed module: pick another name"
        )
    elif package in YAML_WORDS and package != slug:
        found.append(f"package_name {package!r} reads as a boolean or null in YAML: pick another name")
    found += table_problems(answers["tables"])
    found += integer_problems("source_port", answers["source_port"], 1, 65535)
    found += integer_problems("chunk_size", answers["chunk_size"], 1, 10_000_000)
    found += integer_problems("server_id_start", answers["server_id_start"], 1, 2**32 - 101)
    for name, (pattern, allowed, variable) in PROFILE_DEFAULTS.items():
        if not pattern.fullmatch(answers[name]):
            found.append(
                f"{name} {answers[name]!r} cannot be the profiles.yml default: use {allowed} "
                f"(other values: set {variable} when running, or edit profiles.yml)"
            )
    return found


def text_problems(name: str, value: str) -> list[str]:
    if not value.strip():
        return [f"{name} is empty: {FREE_TEXT[name]}"]
    for char in value:
        if unicodedata.category(char) in {"Cc", "Cs", "Zl", "Zp"}:
            return [f"{name} holds a line break or control character ({ascii(char)}): keep it on one line"]
        if ord(char) > 0xFFFF:  # TOML and Python escapes cannot hold it (tojson would split it)
            return [f"{name} holds {ascii(char)}, outside the Basic Multilingual Plane (emoji): leave it out"]
    markup = next((m for m in JINJA_MARKUP if m in value), None)
    if markup:
        return [
            f"{name} holds template markup {markup!r}: leave out " + ", ".join(JINJA_MARKUP)
            + " (cookiecutter and cruft render answers again on every update)"
        ]
    return []


def table_problems(raw: str) -> list[str]:
    tables = split_tables(raw)
    if not tables:
        return ["tables is empty: name at least one source table (comma separated)"]
    found: list[str] = []
    seen: set[str] = set()
    for table in tables:
        if not TABLE.fullmatch(table):
            found.append(
                f"table name {table!r} is not supported: use letters, digits and underscores, "
                "at most 64 characters, not starting with a digit"
            )
        elif table.lower() in RESERVED_TABLE_MODULES or keyword.iskeyword(table.lower()):
            found.append(f"table name {table!r} clashes with a reserved module name")
        elif table.lower() in seen:
            found.append(f"table {table!r} is listed twice (table module names are lowercase)")
        seen.add(table.lower())
    return found


def integer_problems(name: str, raw: str, low: int, high: int) -> list[str]:
    # Digits only: int() would take ' 7', '1_000' and '٣', and YAML reads '010' as octal.
    if not re.fullmatch(r"[1-9][0-9]*", raw):
        return [f"{name} {raw!r} is not a whole number: give a number from {low} to {high} (digits only)"]
    value = int(raw)
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
# {% endraw %}
