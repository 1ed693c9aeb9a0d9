"""Finish the generated repository: one ingestion module per table, the saved answers, and the
next steps printed for whoever ran cookiecutter.

The table modules are written by the generated package's own scaffolding code (the same code
behind its ``add-table`` command), so a module made today and one made later look alike.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

# The answers (JSON in a raw string: no answer can break this file), saved so the project can be
# regenerated or updated from the template later.
ANSWERS: dict[str, str] = json.loads(r"""{{ cookiecutter | jsonify }}""")
# Where this run happened to read and write: not answers, and different on every render.
MACHINE_PATHS = {"_output_dir", "_repo_dir"}
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
# Tables of the embedded demo source (demo/schema.sql).
DEMO_TABLES = {"customers", "products", "orders", "order_items"}


def main() -> int:
    project = Path.cwd()
    sys.path.insert(0, str(project))
    from importlib import import_module

    package = ANSWERS["package_name"]
    scaffold = import_module(f"{package}.engine.run.scaffold")
    tables_dir = project / package / "tables"
    tables = [t.strip() for t in re.split(r"[,\s]+", ANSWERS["tables"]) if t.strip()]
    for table in tables:
        scaffold.write_table_module(tables_dir, scaffold.TableModuleSpec(source_table=table))
    saved = {k: v for k, v in ANSWERS.items() if not k.startswith("__") and k not in MACHINE_PATHS}
    (project / ".cookiecutter.json").write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
    say(next_steps(folder_to_cd(project), ANSWERS, tables))
    return 0


def folder_to_cd(project: Path) -> str:
    """The project folder as seen from where cookiecutter was run (the shell's PWD: a hook runs
    inside the new folder), or its full path when it is not below there."""
    here = os.environ.get("PWD")
    relative = os.path.relpath(project, here) if here else ".."
    return str(project) if relative.startswith("..") else relative


def say(text: str) -> None:
    """Print, best effort: a closed stdout (``cruft diff | head``) must not fail the generation."""
    try:
        print(text, flush=True)
    except OSError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second failure at exit


def next_steps(folder: str, answers: dict[str, str], tables: list[str]) -> str:
    """What to type next; every ``make`` target named here exists in the generated Makefile."""
    lines = [f"\nCreated {folder}. Next steps:", f"  cd {shlex.quote(folder)}"]
    demo = answers["source_host"] in LOCAL_HOSTS and {t.lower() for t in tables} <= DEMO_TABLES
    if demo:
        lines += [
            f"  make demo           # embedded MariaDB (127.0.0.1:{answers['source_port']}) with sample rows: ingest,",
            "                      # change rows, ingest again, check quality, show status",
            "  make source-down    # stop the demo MariaDB",
        ]
    lines += [
        "  make test           # the project's tests (they start their own MariaDB and Spark)",
        "",
        "Your own source: its host, port, user and database are in profiles.yml (MYSQL_HOST, MYSQL_PORT,",
        "MYSQL_USER, MYSQL_DATABASE override them). export MYSQL_PASSWORD=..., check the source and its",
        "binlog settings with make debug, then make ingest-all.",
        "`make` lists every target; README.md has the rest.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
