"""``lakehouse schema``: the JSON Schema of lakehouse_project.yml or profiles.yml (for an
editor), or of what the engine writes for machines: ``status --json`` and ``run_results.json``.
Needs no project: it serves to write the files, so it works while they are broken."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..options import SchemaOptions


def run(options: SchemaOptions) -> int:
    from ...config import keys
    from .. import statusdoc

    schemas: dict[str, Callable[[], dict[str, Any]]] = {
        "project": keys.project_schema, "profiles": keys.profiles_schema,
        "status": statusdoc.status_schema, "run-results": statusdoc.run_results_schema}
    print(json.dumps(schemas[options.file](), indent=2))
    return 0
