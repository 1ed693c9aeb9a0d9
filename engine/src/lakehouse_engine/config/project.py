"""Project file and profiles, dbt style.

``lakehouse_project.yml`` holds what the team shares (lake root, Spark, defaults, server-id
range); ``profiles.yml`` holds where the source is, with secrets only through
``{{ env_var('NAME') }}`` / ``{{ env_var('NAME', 'default') }}``.

This module holds the configuration's model (:class:`ProjectConfig` and its parts, the settings
with a fixed set of values) and :func:`load_project`, which reads both files into it. The
selected target and ``env_var`` rendering are :mod:`profiles`' part, the checks of single
values :mod:`values`', the keys each file may hold :mod:`keys`'.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Self

import yaml

from ..errors import ConfigError
from . import keys, values
from .defaults import DEFAULTS
from .profiles import render_env_vars, select_output, target_lake
from .telemetry import Telemetry, telemetry_from

PROJECT_FILE = "lakehouse_project.yml"
PROFILES_FILE = "profiles.yml"


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
    portable: bool = False  # public Spark and Delta APIs only (always so on Spark Connect)


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
    telemetry: Telemetry = Telemetry()  # alerts, metrics and lineage (all off unless configured)
    dq_source_readers: int = DEFAULTS.dq_source_readers  # quality.source_readers

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
    project = values.read_yaml(root / PROJECT_FILE)
    keys.check_project(project, root / PROJECT_FILE)
    profiles_dir = profiles_dir or Path(env.get("LAKEHOUSE_PROFILES_DIR", "") or root)
    profiles = values.read_yaml(profiles_dir / PROFILES_FILE)
    profile_name = values.required(project, "profile", PROJECT_FILE)
    where = profiles_dir / PROFILES_FILE
    if isinstance(profiles.get(profile_name), dict):
        keys.check_profile(profiles[profile_name], str(profile_name), where)
    target, outputs = select_output(profiles, str(profile_name), target, env, where)
    source = _load_source(outputs[target], target, env, where, require_env)

    spark = values.section(project, "spark", PROJECT_FILE)
    defaults = values.section(project, "defaults", PROJECT_FILE)
    binlog = values.section(project, "binlog", PROJECT_FILE)
    server_ids = values.server_id_range(binlog.get("server_id_range", list(DEFAULTS.server_id_range)), PROJECT_FILE)
    delivery = Delivery.parse(defaults.get("delivery", DEFAULTS.delivery), f"{PROJECT_FILE}: defaults.delivery",
                              "defaults.delivery")
    project_lake = str(values.required(project, "lake_root", PROJECT_FILE))
    lake_root, own_lake = target_lake(root, project_lake, outputs, target, env, where)
    target_dir = _target_dir(root, project)
    quality = values.section(project, "quality", PROJECT_FILE)
    gx_dir = root / str(quality.get("gx_root", DEFAULTS.gx_root))
    max_lag = values.positive_number(quality.get("max_lag_seconds", DEFAULTS.max_lag_seconds),
                                     "quality.max_lag_seconds", PROJECT_FILE)
    readers = values.one_of(quality.get("source_readers", DEFAULTS.dq_source_readers), (1, 2),
                            "quality.source_readers", PROJECT_FILE)
    spark_settings = _spark_settings(spark, env, require_env)
    table_defaults = _defaults(defaults, delivery)
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
        dq_source_readers=readers,
        spark=spark_settings,
        defaults=table_defaults,
        server_ids=server_ids,
        source=source,
        target=target,
        telemetry=telemetry_from(project, PROJECT_FILE),
    )


def _spark_settings(spark: Mapping[str, Any], env: Mapping[str, str], require_env: bool) -> SparkSettings:
    """The ``spark`` section; ``SPARK_MASTER`` and ``LAKEHOUSE_JARS_DIR`` override it."""
    return SparkSettings(
        master=str(env.get("SPARK_MASTER") or spark.get("master", DEFAULTS.spark_master)),
        # Rendered like profiles: keys of an object store come from the environment, never the file.
        conf=_spark_conf(spark.get("conf"), env, require_env),
        jars_dir=env.get("LAKEHOUSE_JARS_DIR") or spark.get("jars_dir"),
        portable=bool(spark.get("portable", False)),
    )


def _defaults(defaults: Mapping[str, Any], delivery: Delivery) -> Defaults:
    """The ``defaults`` section (``delivery`` already read: it is checked before the lake)."""
    even = defaults.get("even_distribution", DEFAULTS.even_distribution)
    return Defaults(
        chunk_size=values.positive_int(defaults.get("chunk_size", DEFAULTS.chunk_size), "defaults.chunk_size",
                                       PROJECT_FILE),
        delivery=delivery,
        flush_rows=values.positive_int(defaults.get("flush_rows", DEFAULTS.flush_rows), "defaults.flush_rows",
                                       PROJECT_FILE),
        even_distribution=values.number_pair(even, "defaults.even_distribution", "[0.05, 1000.0]", PROJECT_FILE),
        commit_rows=values.positive_int(defaults.get("commit_rows", DEFAULTS.commit_rows), "defaults.commit_rows",
                                        PROJECT_FILE),
        snapshot_mode=SnapshotMode.parse(defaults.get("snapshot_mode", DEFAULTS.snapshot_mode),
                                         f"{PROJECT_FILE}: defaults.snapshot_mode", "defaults.snapshot_mode"),
        table_features=values.table_features(defaults.get("table_features", list(DEFAULTS.table_features)),
                                             PROJECT_FILE),
    )


def _spark_conf(value: object, env: Mapping[str, str], require_env: bool) -> dict[str, str]:
    """``spark.conf``: Spark settings to values, ``env_var`` rendered (keys of an object store
    come from the environment, never the file). Values are never shown in a message."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{PROJECT_FILE}: spark.conf must be a mapping of Spark settings to values "
                          f"(e.g. spark.driver.memory: 4g), not {values.kind(value)}", setting="spark.conf")
    for key, item in value.items():
        if isinstance(item, dict | list) or item is None:
            raise ConfigError(f"{PROJECT_FILE}: spark.conf {key!r} must be one value (text or a number), "
                              f"not {values.kind(item)}", setting=f"spark.conf.{key}")
    rendered = render_env_vars(value, env, PROJECT_FILE, None if require_env else set(), "spark.conf")
    return {str(k): str(v) for k, v in rendered.items()}



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
        connect_timeout=values.positive_int(raw.get("connect_timeout", DEFAULTS.connect_timeout_s), "connect_timeout",
                                            str(where)),
        unset=tuple(sorted(missing or ())),
    )
