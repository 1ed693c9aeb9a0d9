"""``profiles.yml``: ``{{ env_var() }}`` rendering, the selected target's output and its lake.

A profile names its outputs (targets) and a default one; ``--target`` or ``LAKEHOUSE_TARGET``
selects another. Secrets come only from the environment, through ``env_var``; every value of
the files may use it. Each target keeps a lake of its own: two targets on one lake would resume
from each other's checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from ..errors import ConfigError
from .defaults import DEFAULTS


def render_env_vars(value: Any, env: Mapping[str, str], where: str, missing: set[str] | None = None,
                    setting: str = "") -> Any:
    """Render ``{{ env_var(...) }}`` in every string of a parsed YAML tree. An unset variable
    without a default is an error, or, when ``missing`` is given, "" with its name added there.

    A value that is not a valid template is an error naming its setting (``setting``, the
    path of keys down to it), never the value: it may be a literal password."""
    if isinstance(value, dict):
        return {k: render_env_vars(v, env, where, missing, f"{setting}.{k}" if setting else str(k))
                for k, v in value.items()}
    if isinstance(value, list):
        return [render_env_vars(v, env, where, missing, f"{setting}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str) or "{{" not in value:
        return value

    def env_var(name: str, default: str | None = None) -> str:
        if name in env:
            return env[name]
        if default is not None:
            return default
        if missing is not None:
            missing.add(name)
            return ""
        raise ConfigError(
            f"{where}: environment variable {name} is not set; export {name}=... "
            "(secrets live only in the environment)", setting=name,
        )

    jinja = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    try:
        return jinja.from_string(value).render(env_var=env_var)
    except jinja2.TemplateError:
        # Jinja's own message quotes the template's text (``got 'word'``): it is left out.
        name = setting or "a value"
        raise ConfigError(
            f"{where}: {name} is not a valid template (only {{{{ env_var('NAME') }}}} and "
            f"{{{{ env_var('NAME', 'default') }}}} are rendered): write a literal '{{{{' as "
            f"{{{{ '{{{{' }}}}, or move the value into an environment variable and use env_var",
            setting=setting or None,
        ) from None


def select_output(
    profiles: dict[str, Any],
    name: str,
    target: str | None,
    env: Mapping[str, str],
    where: Path,
) -> tuple[str, dict[str, Any]]:
    """The selected target's name and every output of the profile."""
    profile = profiles.get(name)
    if not isinstance(profile, dict):
        raise ConfigError(f"{where}: no profile named {name!r} (the project file's 'profile')")
    target = str(target or env.get("LAKEHOUSE_TARGET") or profile.get("target", DEFAULTS.target))
    outputs = profile.get("outputs") or {}
    if target not in outputs:
        raise ConfigError(
            f"{where}: profile {name!r} has no output {target!r}; known: {sorted(outputs)}"
        )
    if not isinstance(outputs[target], dict):
        raise ConfigError(f"{where}: output {target!r} must be a mapping")
    return target, outputs


def target_lake(
    root: Path,
    project_lake: str,
    outputs: Mapping[str, Any],
    target: str,
    env: Mapping[str, str],
    where: Path,
) -> tuple[str, bool]:
    """The target's lake root, and whether it is its own (the output sets ``lake_root``).

    The lake holds the checkpoints: two targets on one lake would resume from each other's
    binlog positions (of another server). So at most one output may use the project's
    ``lake_root``; every other one names a lake of its own."""

    def lake_of(output: Any, missing: set[str] | None) -> str:
        raw = output.get("lake_root") if isinstance(output, dict) else None
        text = project_lake if raw is None else str(render_env_vars(raw, env, str(where), missing))
        return text if "://" in text or text.startswith("/") else str((root / text).resolve())

    lake = lake_of(outputs[target], None)
    for other in sorted(outputs):
        missing: set[str] = set()
        # Another output's variables need not be set: such a lake cannot be compared.
        if other != target and lake_of(outputs[other], missing) == lake and not missing:
            raise ConfigError(
                f"{where}: outputs {target!r} and {other!r} would share the lake {lake} and with "
                "it their checkpoints: set lake_root in one of the two outputs (each target keeps "
                "a lake of its own)"
            )
    return lake, outputs[target].get("lake_root") is not None
