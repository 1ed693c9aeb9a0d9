"""Project file and profiles, dbt style.

``lakehouse_project.yml`` holds what the team shares (lake root, Spark, defaults, server-id
range); ``profiles.yml`` holds where the source is, with secrets only through
``{{ env_var('NAME') }}`` / ``{{ env_var('NAME', 'default') }}``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Self

import jinja2
import yaml

from ..errors import ConfigError
from . import keys
from .defaults import DEFAULTS, TABLE_FEATURES

PROJECT_FILE = "lakehouse_project.yml"
PROFILES_FILE = "profiles.yml"
MAX_SERVER_ID = 2**32 - 1  # a replica's server_id is an unsigned 32-bit number; 0 is refused

class Mode(StrEnum):
    """A setting with a fixed set of values, parsed from a file or a table module."""

    @classmethod
    def parse(cls, value: object, where: str, setting: str, table: str | None = None) -> Self:
        try:
            return cls(str(value))
        except ValueError:
            raise ConfigError(f"{where} is {value!r}; use one of {', '.join(repr(m.value) for m in cls)}",
                              setting=setting, table=table) from None


class Delivery(Mode):
    """How binlog changes inside a snapshot chunk's watermark window are treated."""

    EXACTLY_ONCE = "exactly_once"  # drop the changes a chunk's rows already contain
    AT_LEAST_ONCE = "at_least_once"  # apply them again (MERGE on _seq makes that harmless)


class SnapshotMode(Mode):
    """How a snapshot chunk's rows are tied to a binlog position."""

    AUTO = "auto"  # consistent where the source reports read-view positions, window elsewhere
    CONSISTENT = "consistent"  # the read view's exact position (MariaDB, Percona): no replay
    WINDOW = "window"  # low watermark, SELECT, high watermark, replay of the window (any MySQL)


class Startup(Mode):
    """Where a table's first run starts (Flink CDC's startup modes)."""

    INITIAL = "initial"  # snapshot, then the binlog from the snapshot's position
    LATEST = "latest"  # no snapshot: only changes from the source's position at the first run
    POSITION = "position"  # no snapshot: only changes after a given binlog position
    GTID = "gtid"  # no snapshot: only changes after the transaction of a given MariaDB GTID
    TIMESTAMP = "timestamp"  # no snapshot: only transactions the binlog dates at or after a time
    SNAPSHOT = "snapshot"  # the snapshot only: copied once (consistent at its end), never followed


class SchemaPolicy(Mode):
    """What a table's capture does with a DDL that changes it (a table module's ``on_schema_change``)."""

    EVOLVE = "evolve"  # apply it to bronze and silver at its position; stop when that cannot be exact
    STOP = "stop"  # stop the table with the command that re-snapshots it
    IGNORE = "ignore"  # log a warning; the lake keeps its columns (new ones left out, gone ones NULL)


class Layer(StrEnum):
    BRONZE = "bronze"  # the changelog: every change, appended
    SILVER = "silver"  # the current state: MERGE on the key


@dataclass(frozen=True)
class SourceProfile:
    host: str
    port: int
    user: str
    password: str = field(repr=False)
    database: str
    connect_timeout: int = DEFAULTS.connect_timeout_s
    # Environment variables the profile names but the environment lacks (rendered as ""); only
    # ever non-empty when loaded with ``require_env=False``, by commands that need no source.
    unset: tuple[str, ...] = ()

    @property
    def address(self) -> str:
        return f"{self.user}@{self.host}:{self.port}/{self.database}"


@dataclass(frozen=True)
class SparkSettings:
    master: str
    conf: Mapping[str, str]
    jars_dir: str | None = None


@dataclass(frozen=True)
class Defaults:
    chunk_size: int
    delivery: Delivery
    flush_rows: int
    even_distribution: tuple[float, float]
    commit_rows: int  # snapshot rows committed to bronze together (chunks read in parallel)
    snapshot_mode: SnapshotMode = SnapshotMode.AUTO
    # Delta features a schema change may switch on (sink.schemacommit.FEATURES)
    table_features: frozenset[str] = frozenset(DEFAULTS.table_features)

    def chunks_per_commit(self, chunk_size: int) -> int:
        """Chunks read in parallel and committed together: commits are sized by rows, so a
        small chunk size does not mean many small Delta commits."""
        return max(1, -(-self.commit_rows // chunk_size))


@dataclass(frozen=True)
class ProjectConfig:
    name: str
    root: Path
    lake_root: str
    target_dir: Path
    gx_dir: Path
    max_lag_seconds: float  # dq's freshness check, unless a table module sets its own
    spark: SparkSettings
    defaults: Defaults
    server_ids: tuple[int, int]
    source: SourceProfile
    target: str = DEFAULTS.target  # the profile output in use; a target with a lake of its own has its own target_dir

    def table_path(self, layer: Layer, table: str) -> str:
        return f"{self.lake_root.rstrip('/')}/{layer}/{table}"


def load_project(
    root: Path,
    *,
    profiles_dir: Path | None = None,
    target: str | None = None,
    env: Mapping[str, str] | None = None,
    require_env: bool = True,
) -> ProjectConfig:
    """Read the project file and the selected profile output, rendering ``env_var``.

    With ``require_env=False`` an unset variable renders as "" and is listed in
    ``source.unset``: for commands that never connect to the source (``status``, ``list``)."""
    env = os.environ if env is None else env
    project = _read_yaml(root / PROJECT_FILE)
    keys.check_project(project, root / PROJECT_FILE)
    profiles_dir = profiles_dir or Path(env.get("LAKEHOUSE_PROFILES_DIR", "") or root)
    profiles = _read_yaml(profiles_dir / PROFILES_FILE)
    profile_name = _required(project, "profile", PROJECT_FILE)
    where = profiles_dir / PROFILES_FILE
    if isinstance(profiles.get(profile_name), dict):
        keys.check_profile(profiles[profile_name], str(profile_name), where)
    target, outputs = _profile_output(profiles, str(profile_name), target, env, where)
    source = _load_source(outputs[target], target, env, where, require_env)

    spark = _section(project, "spark")
    defaults = _section(project, "defaults")
    binlog = _section(project, "binlog")
    server_ids = _server_id_range(binlog.get("server_id_range", list(DEFAULTS.server_id_range)))
    delivery = Delivery.parse(defaults.get("delivery", DEFAULTS.delivery), f"{PROJECT_FILE}: defaults.delivery",
                              "defaults.delivery")
    even = defaults.get("even_distribution", DEFAULTS.even_distribution)
    project_lake = str(_required(project, "lake_root", PROJECT_FILE))
    lake_root, own_lake = _target_lake(root, project_lake, outputs, target, env, where)
    target_dir = _target_dir(root, project)
    quality = _section(project, "quality")
    gx_dir = root / str(quality.get("gx_root", DEFAULTS.gx_root))
    max_lag = _positive_number(quality.get("max_lag_seconds", DEFAULTS.max_lag_seconds), "quality.max_lag_seconds")
    return ProjectConfig(
        name=str(project.get("name", root.name)),
        root=root,
        lake_root=lake_root,
        # run_results.json, the log and the table locks follow the lake: a target with a lake
        # of its own (prod) keeps them in target/<target>/.
        target_dir=target_dir / target if own_lake else target_dir,
        # Great Expectations keeps its project in <gx_root>/gx (Data Docs under uncommitted/). A
        # target with a lake of its own keeps one in target/<target>/: its validation results and
        # Data Docs never mix with another lake's (the suites are rebuilt from the table modules).
        gx_dir=target_dir / target if own_lake else gx_dir,
        max_lag_seconds=max_lag,
        spark=SparkSettings(
            master=str(env.get("SPARK_MASTER") or spark.get("master", DEFAULTS.spark_master)),
            # Rendered like profiles: keys of an object store come from the environment, never the file.
            conf=_spark_conf(spark.get("conf"), env, require_env),
            jars_dir=env.get("LAKEHOUSE_JARS_DIR") or spark.get("jars_dir"),
        ),
        defaults=Defaults(
            chunk_size=_positive_int(defaults.get("chunk_size", DEFAULTS.chunk_size), "defaults.chunk_size"),
            delivery=delivery,
            flush_rows=_positive_int(defaults.get("flush_rows", DEFAULTS.flush_rows), "defaults.flush_rows"),
            even_distribution=_number_pair(even, "defaults.even_distribution", "[0.05, 1000.0]"),
            commit_rows=_positive_int(defaults.get("commit_rows", DEFAULTS.commit_rows), "defaults.commit_rows"),
            snapshot_mode=SnapshotMode.parse(defaults.get("snapshot_mode", DEFAULTS.snapshot_mode),
                                             f"{PROJECT_FILE}: defaults.snapshot_mode", "defaults.snapshot_mode"),
            table_features=_table_features(defaults.get("table_features", list(DEFAULTS.table_features))),
        ),
        server_ids=server_ids,
        source=source,
        target=target,
    )


def _section(project: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """A top-level section of the project file: a mapping, or empty when left out."""
    value = project.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{PROJECT_FILE}: '{name}' must be a mapping of settings, not {_kind(value)}",
                          setting=name)
    return value


def _server_id_range(value: object) -> tuple[int, int]:
    """The replica server ids binlog readers take: two ordered whole numbers. (YAML reads
    ``5400`` as one number and ``"5400"`` as a string, which indexing would split into digits.)"""
    if (isinstance(value, list | tuple) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            and 1 <= value[0] <= value[1] <= MAX_SERVER_ID):
        return int(value[0]), int(value[1])
    raise ConfigError(f"{PROJECT_FILE}: binlog.server_id_range is {value!r}; use two ordered whole numbers "
                      f"from 1 to {MAX_SERVER_ID}, lowest first, e.g. [5400, 5499]",
                      setting="binlog.server_id_range")


def _number_pair(value: object, name: str, example: str) -> tuple[float, float]:
    """Two ordered numbers, e.g. ``defaults.even_distribution``."""
    try:
        if not isinstance(value, list | tuple) or len(value) != 2 or isinstance(value[0], str | bool) \
                or isinstance(value[1], str | bool):
            raise TypeError
        low, high = float(value[0]), float(value[1])
    except (TypeError, ValueError):
        low = high = float("nan")
    if not low <= high:  # also refuses NaN
        raise ConfigError(f"{PROJECT_FILE}: {name} is {value!r}; use two ordered numbers, lowest first, "
                          f"e.g. {example}", setting=name)
    return low, high


def _spark_conf(value: object, env: Mapping[str, str], require_env: bool) -> dict[str, str]:
    """``spark.conf``: Spark settings to values, ``env_var`` rendered (keys of an object store
    come from the environment, never the file). Values are never shown in a message."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{PROJECT_FILE}: spark.conf must be a mapping of Spark settings to values "
                          f"(e.g. spark.driver.memory: 4g), not {_kind(value)}", setting="spark.conf")
    for key, item in value.items():
        if isinstance(item, dict | list) or item is None:
            raise ConfigError(f"{PROJECT_FILE}: spark.conf {key!r} must be one value (text or a number), "
                              f"not {_kind(item)}", setting=f"spark.conf.{key}")
    rendered = render_env_vars(value, env, PROJECT_FILE, None if require_env else set(), "spark.conf")
    return {str(k): str(v) for k, v in rendered.items()}


def _kind(value: object) -> str:
    """What a YAML value is, for a message that must not show the value itself."""
    kinds = {bool: "true/false", int: "a number", float: "a number", str: "text", list: "a list",
             dict: "a mapping", type(None): "empty"}
    return kinds.get(type(value), type(value).__name__)


def _table_features(value: object) -> frozenset[str]:
    known = TABLE_FEATURES
    if not isinstance(value, list) or any(v not in known for v in value):
        raise ConfigError(f"{PROJECT_FILE}: defaults.table_features is {value!r}; use a list of "
                          f"{', '.join(known)} (or [] for none)", setting="defaults.table_features")
    return frozenset(value)


def peek_target_dir(root: Path) -> Path | None:
    """The project's ``target/`` folder, read leniently: the log file and run results must be
    written even when the configuration is broken. ``None`` when ``root`` holds no project
    file (a command run from the wrong folder must not leave a ``target/`` there)."""
    path = root / PROJECT_FILE
    if not path.is_file():
        return None
    try:
        project = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):  # load_project reports it properly
        project = None
    return _target_dir(root, project if isinstance(project, dict) else {})


def _target_dir(root: Path, project: Mapping[str, Any]) -> Path:
    return root / str(project.get("target_dir") or DEFAULTS.target_dir)


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


def _profile_output(
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


def _target_lake(
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


def _load_source(
    output: dict[str, Any],
    target: str,
    env: Mapping[str, str],
    where: Path,
    require_env: bool = True,
) -> SourceProfile:
    missing: set[str] | None = None if require_env else set()
    raw = render_env_vars(output, env, str(where), missing)
    for key in ("host", "port", "user", "password", "database"):
        if key not in raw:
            raise ConfigError(f"{where}: output {target!r} lacks '{key}'", setting=key)
    try:
        port = int(raw["port"])
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: port {raw['port']!r} is not a number", setting="port") from None
    return SourceProfile(
        host=str(raw["host"]),
        port=port,
        user=str(raw["user"]),
        password=str(raw["password"]),
        database=str(raw["database"]),
        connect_timeout=_positive_int(raw.get("connect_timeout", DEFAULTS.connect_timeout_s), "connect_timeout",
                                      str(where)),
        unset=tuple(sorted(missing or ())),
    )


def _read_yaml(path: Path) -> dict[str, Any]:
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


def _required(mapping: dict[str, Any], key: str, where: str) -> Any:
    if key not in mapping:
        raise ConfigError(f"{where}: '{key}' is required", setting=key)
    return mapping[key]


def _positive_number(value: Any, name: str) -> float:
    try:
        if isinstance(value, bool):  # float(True) is 1.0
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{PROJECT_FILE}: {name} must be a number", setting=name) from None
    if not number > 0:  # also refuses NaN
        raise ConfigError(f"{PROJECT_FILE}: {name} must be positive", setting=name)
    return number


def _positive_int(value: Any, name: str, where: str = PROJECT_FILE) -> int:
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
