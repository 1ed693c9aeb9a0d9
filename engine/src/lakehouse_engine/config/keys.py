"""The settings ``lakehouse_project.yml`` and ``profiles.yml`` may hold, and nothing else, as
JSON Schemas: a misspelt key (``chunk_sise``) would otherwise be ignored and its default used,
silently. Every command checks the files' keys against them (an unknown key is one line naming
the file, its line, the key and the nearest known one); ``lakehouse schema`` prints them for an
editor. The values themselves are checked, with messages of their own, as ``config.project``
reads them (:mod:`values`)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from .defaults import TABLE_FEATURES
from .values import MAX_SERVER_ID

DRAFT = "https://json-schema.org/draft/2020-12/schema"
POSITIVE_INT = {"type": ["integer", "string"], "minimum": 1, "description": "a whole number above 0"}
TEXT = {"type": "string"}
OPTIONAL_TEXT = {"type": ["string", "null"]}  # null: the feature is off
# env_var('...') templates render to text, so a number may be written as one.
NUMBER_OR_TEMPLATE = {"type": ["number", "string"]}


def section(properties: Mapping[str, Any], description: str, required: Sequence[str] = ()) -> dict[str, Any]:
    """A mapping of known keys only."""
    shape: dict[str, Any] = {"type": "object", "description": description, "properties": dict(properties),
                             "additionalProperties": False}
    if required:
        shape["required"] = list(required)
    return shape


@cache
def project_schema() -> dict[str, Any]:
    """The JSON Schema of ``lakehouse_project.yml``."""
    from .project import Delivery, SnapshotMode  # project reads the files with this module

    schema = section({
        "name": {**TEXT, "description": "the project's name"},
        "profile": {**TEXT, "description": "the profiles.yml profile holding the source's connection"},
        "package": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
                    "description": "the Python package whose tables/ holds the table modules"},
        "lake_root": {**TEXT, "description": "a folder (relative to this file) or a Hadoop path (s3a://...)"},
        "target_dir": {**TEXT, "description": "run results, the log and locks (default target)"},
        "spark": section({
            "master": {**TEXT, "description": "Spark master URL; SPARK_MASTER overrides it"},
            "conf": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]},
                     "description": "Spark settings, e.g. spark.driver.memory: 4g"},
            "jars_dir": {**TEXT, "description": "local Delta jars instead of Maven Central"},
            "portable": {"type": "boolean",
                         "description": "public Spark and Delta APIs only (always on for an sc:// master)"},
        }, "Spark settings"),
        "defaults": section({
            "chunk_size": {**POSITIVE_INT, "description": "rows per snapshot chunk"},
            "delivery": {"enum": [m.value for m in Delivery]},
            "flush_rows": {**POSITIVE_INT, "description": "binlog rows buffered before a bronze commit"},
            "even_distribution": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
            "commit_rows": {**POSITIVE_INT, "description": "snapshot rows committed to bronze together"},
            "snapshot_mode": {"enum": [m.value for m in SnapshotMode]},
            "table_features": {"type": "array", "items": {"enum": list(TABLE_FEATURES)}, "uniqueItems": True},
        }, "defaults of every table"),
        "binlog": section({
            "server_id_range": {"type": "array", "minItems": 2, "maxItems": 2,
                                "items": {"type": "integer", "minimum": 1, "maximum": MAX_SERVER_ID},
                                "description": "replica server ids the binlog readers take, lowest first"},
        }, "binlog readers"),
        "quality": section({
            "gx_root": TEXT,
            "max_lag_seconds": {"type": "number", "exclusiveMinimum": 0},
            "source_readers": {**POSITIVE_INT, "maximum": 2,
                               "description": "connections dq sums the source on at once (1 or 2)"},
        }, "quality checks"),
        "alerts": section({
            "on_failure": {**OPTIONAL_TEXT, "description": "a shell command run when a command fails (gets "
                                                  "$LAKEHOUSE_RUN_RESULTS and the results on stdin)"},
            "webhook_url_env": {**OPTIONAL_TEXT, "description": "the environment variable holding a URL the "
                                                       "run results are POSTed to on failure"},
        }, "telling someone when a run fails"),
        "metrics": section({
            "textfile": {**OPTIONAL_TEXT, "description": "a Prometheus textfile written after every run, e.g. "
                                                "/var/lib/node_exporter/textfile/lakehouse.prom"},
        }, "Prometheus metrics"),
        "lineage": section({
            "openlineage": {"enum": ["none", "file", "http"]},
            "file": {**TEXT, "description": "the file transport's file (one JSON event per line)"},
            "url_env": {**TEXT, "description": "the environment variable holding the HTTP endpoint's URL"},
        }, "OpenLineage run events"),
    }, "lakehouse_project.yml: the project's settings", required=("profile", "lake_root"))
    return {"$schema": DRAFT, "title": "lakehouse_project.yml", **schema}


OUTPUT = section({
    "host": TEXT, "port": NUMBER_OR_TEMPLATE, "user": TEXT, "password": TEXT, "database": TEXT,
    "connect_timeout": NUMBER_OR_TEMPLATE,
    "lake_root": {**TEXT, "description": "this target's own lake (its checkpoints are its own)"},
}, "one target: the source's connection", required=("host", "port", "user", "password", "database"))
PROFILE = section({"target": TEXT, "outputs": {"type": "object", "additionalProperties": OUTPUT}},
                  "a profile: its default target and its outputs", required=("outputs",))


def profiles_schema() -> dict[str, Any]:
    """The JSON Schema of ``profiles.yml``."""
    return {"$schema": DRAFT, "title": "profiles.yml", "type": "object", "additionalProperties": PROFILE}


def line_of(text: str, path: Sequence[str]) -> int | None:
    """The 1-based line of the key at ``path`` in a YAML text (None when it cannot be told)."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for key in path:
        if not isinstance(node, yaml.MappingNode):
            return line
        for key_node, value_node in node.value:
            if getattr(key_node, "value", None) == key:
                line, node = key_node.start_mark.line + 1, value_node
                break
        else:
            return line
    return line


def check(tree: Mapping[str, Any], shape: Mapping[str, Any], file: Path, path: tuple[str, ...] = ()) -> None:
    """Raise for the first key of ``tree`` (a loaded YAML mapping) that the schema ``shape``
    does not know, looking into every section it describes."""
    known: Mapping[str, Any] = shape.get("properties", {})
    for key, value in tree.items():
        name = str(key)
        inner = known.get(name)
        if inner is None and shape.get("additionalProperties") is False:
            where = path + (name,)
            near = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
            hint = f"did you mean {near[0]!r}?" if near else f"known: {', '.join(sorted(known))}"
            line = line_of(file.read_text(), where) if file.exists() else None
            raise ConfigError(f"{file}{f':{line}' if line else ''}: unknown setting {'.'.join(where)!r}; {hint}",
                              setting=".".join(where))
        if inner is None:
            inner = shape.get("additionalProperties")
        if isinstance(inner, Mapping) and isinstance(value, Mapping) and inner.get("type") == "object":
            check(value, inner, file, path + (name,))


def check_project(project: Mapping[str, Any], file: Path) -> None:
    check(project, project_schema(), file)


def check_profile(profile: Mapping[str, Any], name: str, file: Path) -> None:
    """A profile's own keys, and every output's (not only the target's: a typo in prod must not
    wait for the first run against prod)."""
    check(profile, PROFILE, file, (name,))
