"""The values read from ``lakehouse_project.yml`` and ``profiles.yml``, checked one by one.

Reading a YAML file (a parse error as one line), and the checks of single settings: whole and
positive numbers, ordered pairs, sections, the server-id range, table features. Each error is a
:class:`ConfigError` naming the file (``where``) and the setting, never a value that may be a
secret. Which keys a file may hold at all is :mod:`keys`' concern.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from .defaults import TABLE_FEATURES

MAX_SERVER_ID = 2**32 - 1  # a replica's server_id is an unsigned 32-bit number; 0 is refused


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML file holding a mapping; a missing, unreadable or unparsable file is one line."""
    try:
        loaded = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(
            f"{path} not found: run from the project folder or pass --project-dir"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {yaml_problem(exc)}") from exc
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path} must hold a mapping at the top level")
    return loaded


def yaml_problem(exc: yaml.YAMLError) -> str:
    """One line: what the parser expected and where (1-based line and column)."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return " ".join(str(exc).split())
    words = " ".join(" ".join(filter(None, (exc.context, exc.problem))).split()) or "cannot parse"
    mark = exc.problem_mark or exc.context_mark
    return f"{words} (line {mark.line + 1}, column {mark.column + 1})" if mark else words


def required(mapping: dict[str, Any], key: str, where: str) -> Any:
    """``mapping[key]``, which the file must set."""
    if key not in mapping:
        raise ConfigError(f"{where}: '{key}' is required", setting=key)
    return mapping[key]


def positive_number(value: Any, name: str, where: str) -> float:
    """A number above 0 (not true/false)."""
    try:
        if isinstance(value, bool):  # float(True) is 1.0
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {name} must be a number", setting=name) from None
    if not number > 0:  # also refuses NaN
        raise ConfigError(f"{where}: {name} must be positive", setting=name)
    return number


def positive_int(value: Any, name: str, where: str) -> int:
    # int() would take true as 1 and 1.5 as 1: a setting of the wrong kind is refused instead.
    whole = isinstance(value, int) and not isinstance(value, bool)
    if not whole and not (isinstance(value, str) and value.strip().isdigit()):
        raise ConfigError(f"{where}: {name} is {value!r}; it must be a whole number", setting=name)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {name} must be a whole number", setting=name) from None
    if number <= 0:
        raise ConfigError(f"{where}: {name} must be positive", setting=name)
    return number


def one_of(value: Any, choices: Sequence[int], name: str, where: str) -> int:
    """A whole number among ``choices``."""
    number = positive_int(value, name, where)
    if number not in choices:
        raise ConfigError(f"{where}: {name} is {number}; use {' or '.join(map(str, choices))}",
                          setting=name)
    return number


def section(project: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any]:
    """A top-level section of the project file: a mapping, or empty when left out."""
    value = project.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: '{name}' must be a mapping of settings, not {kind(value)}",
                          setting=name)
    return value


def server_id_range(value: object, where: str) -> tuple[int, int]:
    """The replica server ids binlog readers take: two ordered whole numbers. (YAML reads
    ``5400`` as one number and ``"5400"`` as a string, which indexing would split into digits.)"""
    if (isinstance(value, list | tuple) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            and 1 <= value[0] <= value[1] <= MAX_SERVER_ID):
        return int(value[0]), int(value[1])
    raise ConfigError(f"{where}: binlog.server_id_range is {value!r}; use two ordered whole numbers "
                      f"from 1 to {MAX_SERVER_ID}, lowest first, e.g. [5400, 5499]",
                      setting="binlog.server_id_range")


def number_pair(value: object, name: str, example: str, where: str) -> tuple[float, float]:
    """Two ordered numbers, e.g. ``defaults.even_distribution``."""
    try:
        if not isinstance(value, list | tuple) or len(value) != 2 or isinstance(value[0], str | bool) \
                or isinstance(value[1], str | bool):
            raise TypeError
        low, high = float(value[0]), float(value[1])
    except (TypeError, ValueError):
        low = high = float("nan")
    if not low <= high:  # also refuses NaN
        raise ConfigError(f"{where}: {name} is {value!r}; use two ordered numbers, lowest first, "
                          f"e.g. {example}", setting=name)
    return low, high



def kind(value: object) -> str:
    """What a YAML value is, for a message that must not show the value itself."""
    kinds = {bool: "true/false", int: "a number", float: "a number", str: "text", list: "a list",
             dict: "a mapping", type(None): "empty"}
    return kinds.get(type(value), type(value).__name__)


def table_features(value: object, where: str) -> frozenset[str]:
    """``defaults.table_features``: a list of the Delta features a schema change may switch on."""
    known = TABLE_FEATURES
    if not isinstance(value, list) or any(v not in known for v in value):
        raise ConfigError(f"{where}: defaults.table_features is {value!r}; use a list of "
                          f"{', '.join(known)} (or [] for none)", setting="defaults.table_features")
    return frozenset(value)
