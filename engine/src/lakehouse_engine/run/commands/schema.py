"""``lakehouse schema``: the JSON Schema of lakehouse_project.yml or profiles.yml, for an editor.
Needs no project: it serves to write the files, so it works while they are broken."""

from __future__ import annotations

import json

from ..options import SchemaOptions


def run(options: SchemaOptions) -> int:
    from ...config import keys

    print(json.dumps(keys.project_schema() if options.file == "project" else keys.profiles_schema(), indent=2))
    return 0
