"""Finish the generated repository: one ingestion module per table, and the saved answers.

The table modules are written by the generated package's own scaffolding code (the same code
behind its ``add-table`` command), so a module made today and one made later look alike.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

PACKAGE = "{{ cookiecutter.package_name }}"
TABLES = """{{ cookiecutter.tables }}"""
# The answers, saved so the project can be regenerated or updated from the template later.
ANSWERS = json.loads(r"""{{ cookiecutter | jsonify }}""")


def main() -> int:
    project = Path.cwd()
    sys.path.insert(0, str(project))
    from importlib import import_module

    scaffold = import_module(f"{PACKAGE}.engine.scaffold")
    tables_dir = project / PACKAGE / "tables"
    for table in (t.strip() for t in re.split(r"[,\s]+", TABLES) if t.strip()):
        scaffold.write_table_module(tables_dir, scaffold.TableModuleSpec(source_table=table))
    saved = {k: v for k, v in ANSWERS.items() if not k.startswith("__")}
    (project / ".cookiecutter.json").write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
