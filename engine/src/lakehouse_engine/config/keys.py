"""The settings ``lakehouse_project.yml`` and ``profiles.yml`` may hold, and nothing else: a
misspelt key (``chunk_sise``) would otherwise be ignored and its default used, silently.

An unknown key is one line naming the file, its line, the key and the nearest known one."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError

# Each section's keys: a nested mapping is a section of its own, None a free-form mapping
# (Spark's own settings under spark.conf), an empty set a plain value.
PROJECT_KEYS: Mapping[str, Any] = {
    "name": frozenset(), "profile": frozenset(), "package": frozenset(), "lake_root": frozenset(),
    "target_dir": frozenset(),
    "spark": {"master": frozenset(), "conf": None, "jars_dir": frozenset()},
    "defaults": {k: frozenset() for k in ("chunk_size", "delivery", "flush_rows", "even_distribution",
                                          "commit_rows", "snapshot_mode", "table_features")},
    "binlog": {"server_id_range": frozenset()},
    "quality": {"gx_root": frozenset(), "max_lag_seconds": frozenset()},
}
PROFILE_KEYS = frozenset({"target", "outputs"})
OUTPUT_KEYS = frozenset({"host", "port", "user", "password", "database", "connect_timeout", "lake_root"})


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


def check(tree: Mapping[str, Any], allowed: Mapping[str, Any] | frozenset[str], file: Path,
          path: tuple[str, ...] = ()) -> None:
    """Raise for the first key of ``tree`` (a loaded YAML mapping) that ``allowed`` lacks."""
    for key, value in tree.items():
        name = str(key)
        if name not in allowed:
            where = path + (name,)
            near = difflib.get_close_matches(name, [str(k) for k in allowed], n=1, cutoff=0.6)
            hint = f"did you mean {near[0]!r}?" if near else f"known: {', '.join(sorted(map(str, allowed)))}"
            line = line_of(file.read_text(), where) if file.exists() else None
            raise ConfigError(f"{file}{f':{line}' if line else ''}: unknown setting {'.'.join(where)!r}; {hint}",
                              setting=".".join(where))
        inner = allowed[name] if isinstance(allowed, Mapping) else None
        if isinstance(inner, Mapping) and isinstance(value, Mapping):
            check(value, inner, file, path + (name,))


def check_profile(profile: Mapping[str, Any], name: str, file: Path) -> None:
    """A profile's own keys, and every output's (not only the target's: a typo in prod must not
    wait for the first run against prod)."""
    check(profile, PROFILE_KEYS, file, (name,))
    outputs = profile.get("outputs")
    if isinstance(outputs, Mapping):
        for output, settings in outputs.items():
            if isinstance(settings, Mapping):
                check(settings, OUTPUT_KEYS, file, (name, "outputs", str(output)))
