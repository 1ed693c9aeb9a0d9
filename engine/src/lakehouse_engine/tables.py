"""Per-table ingestion specs and their discovery in the project's ``tables`` package."""

from __future__ import annotations

import datetime as dt
import importlib
import pkgutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from .config.project import Delivery, Mode, SchemaPolicy, Startup
from .errors import ConfigError
from .state.positions import BinlogPosition, parse_gtid_position


class CascadePolicy(Mode):
    """What a followed table that is the child of a cascading foreign key does (``on_cascade``).

    InnoDB applies ON DELETE/UPDATE CASCADE and SET NULL below the binlog: the child rows it
    deletes or changes never reach the lake (see ``source.cascades``)."""

    REFUSE = "refuse"  # stop the table, naming the foreign key and the fix
    IGNORE = "ignore"  # ingest it with a warning each run: silver keeps what the cascade changes
    APPLY = "apply"  # derive the cascaded changes from the parent's, at its position (cdc.cascading)


@dataclass(frozen=True)
class Layout:
    """Silver's Delta table options (applied by ``sink.layout``)."""

    change_data_feed: bool = False
    cluster_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableSpec:
    """What one ingestion module declares. ``name`` names the lake tables; ``key`` overrides
    the primary key (must be unique and NOT NULL); ``None`` fields take project defaults."""

    name: str
    source_table: str
    key: tuple[str, ...] | None = None
    chunk_size: int | None = None
    delivery: Delivery | str | None = None  # a Delivery member or its value ("at_least_once")
    tags: tuple[str, ...] = ()
    # A Startup member or its value: "initial" (snapshot first), "latest" (changes from now on
    # only), "position" (changes after ``start_position``, e.g. "mysql-bin.000003:1234"), "gtid"
    # (changes after the transaction ``start_gtid``, a MariaDB GTID such as "0-1-1234", or after
    # a GTID position with one GTID per replication domain, "0-1-1234,7-1-5") or
    # "timestamp" (transactions the binlog dates at or after ``start_timestamp``, an ISO 8601 time
    # with its zone, e.g. "2026-11-23T10:00:00Z"), or "snapshot" (copied once, consistent at the
    # binlog position the snapshot ends at, then left as it is; FULL_REFRESH=1 copies it again).
    # Without a snapshot silver holds only the rows changed since, so dq compares no row counts.
    startup: Startup | str = Startup.INITIAL
    start_position: str | None = None
    start_gtid: str | None = None
    start_timestamp: str | dt.datetime | None = None
    max_lag_seconds: float | None = None  # dq's freshness limit; None: quality.max_lag_seconds
    # dq reconciles silver with the source value by value (one scan of each side per check run);
    # False leaves only row count, key uniqueness and freshness, e.g. for a huge table checked often.
    compare_values: bool = True
    # 1: silver holds each key's newest row; 2: every version, with _seq/_end_seq (exact, binlog
    # order), _valid_from/_valid_to (source commit times) and _is_current (see sink/history.py).
    scd_type: int = 1
    # Delta's change data feed on silver (readChangeFeed), and liquid clustering columns for it
    # (maintain's OPTIMIZE clusters by them): see sink/layout.py.
    change_data_feed: bool = False
    cluster_by: tuple[str, ...] = ()
    # A DDL changing the source table: "evolve" applies it to bronze and silver at its binlog
    # position (ADD/DROP/RENAME/widening MODIFY COLUMN, TRUNCATE; anything it cannot apply
    # exactly stops the table), "stop" stops the table, "ignore" keeps the lake's columns.
    on_schema_change: SchemaPolicy | str = SchemaPolicy.EVOLVE
    # A foreign key of this table with ON DELETE/UPDATE CASCADE or SET NULL (checked every run):
    # the binlog does not carry the rows it changes. "refuse" stops the table; "ignore" ingests
    # it with a warning, silver keeping the rows and values the cascade deleted or changed;
    # "apply" derives the cascade's deletes and updates from the parent's changes (one level,
    # same database, keys compared without a collation: see cdc/cascading.py).
    on_cascade: CascadePolicy | str = CascadePolicy.REFUSE
    # Applied to each deduplicated batch before the silver MERGE; must keep the key columns.
    transform: Callable[[Any], Any] | None = None
    # Returns extra Great Expectations expectations (called only when checks run).
    expectations: Callable[[], Sequence[Any]] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # A misspelt mode must fail here, naming the table, not quietly act as another mode.
        where = f"table {self.name!r}"
        if self.delivery is not None:
            delivery = Delivery.parse(self.delivery, f"{where}: delivery", "delivery", self.name)
            object.__setattr__(self, "delivery", delivery)
        object.__setattr__(self, "on_schema_change", SchemaPolicy.parse(
            self.on_schema_change, f"{where}: on_schema_change", "on_schema_change", self.name))
        object.__setattr__(self, "on_cascade", CascadePolicy.parse(
            self.on_cascade, f"{where}: on_cascade", "on_cascade", self.name))
        startup = Startup.parse(self.startup, f"{where}: startup", "startup", self.name)
        object.__setattr__(self, "startup", startup)
        for mode, setting, example in START_SETTINGS:
            if (startup is mode) != (getattr(self, setting) is not None):
                raise ConfigError(f"{where}: {setting} goes with startup='{mode}' (and only with it), e.g. "
                                  f"startup='{mode}', {setting}={example!r}", table=self.name, setting=setting)
        try:
            if self.start_position is not None:
                BinlogPosition.parse(str(self.start_position))
            if self.start_gtid is not None:
                parse_gtid_position(str(self.start_gtid))
            if self.start_timestamp is not None:
                object.__setattr__(self, "start_timestamp", _aware_time(self.start_timestamp))
        except ValueError as exc:
            setting = next(s for m, s, _ in START_SETTINGS if m is startup)
            raise ConfigError(f"{where}: {setting} {exc}", table=self.name, setting=setting) from None
        lag: object = self.max_lag_seconds
        if lag is not None and (isinstance(lag, bool) or not isinstance(lag, int | float) or not lag > 0):
            raise ConfigError(f"{where}: max_lag_seconds is {lag!r}; use a positive number of seconds",
                              table=self.name, setting="max_lag_seconds")
        if type(self.scd_type) is not int or self.scd_type not in (1, 2):
            raise ConfigError(f"{where}: scd_type is {self.scd_type!r}; use 1 (newest row per key) or 2 (history)",
                              table=self.name, setting="scd_type")
        # Table modules are user code: check what the types only promise.
        size: object = self.chunk_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ConfigError(f"{where}: chunk_size is {size!r}; use a positive whole number of rows",
                              table=self.name, setting="chunk_size")
        key: object = self.key
        if isinstance(key, str):  # key="id" would iterate as ("i", "d")
            key = (key,)
        if key is not None and (not isinstance(key, tuple | list) or not key
                                or not all(isinstance(k, str) and k for k in key)):
            raise ConfigError(f"{where}: key is {key!r}; use a tuple of column names, e.g. key=(\"id\",)",
                              table=self.name, setting="key")
        if key is not None:
            object.__setattr__(self, "key", tuple(key))
        cluster: object = self.cluster_by
        if isinstance(cluster, str):
            cluster = (cluster,)
        if not isinstance(cluster, tuple | list) or not all(isinstance(c, str) and c for c in cluster):
            raise ConfigError(f"{where}: cluster_by is {cluster!r}; use a tuple of column names, e.g. "
                              "cluster_by=(\"country\",)", table=self.name, setting="cluster_by")
        object.__setattr__(self, "cluster_by", tuple(cluster))

    @property
    def layout(self) -> Layout:
        """Silver's table options (change data feed, clustering)."""
        return Layout(bool(self.change_data_feed), self.cluster_by)

    @property
    def snapshots(self) -> bool:
        """Whether the first run copies the table (else silver holds only later changes)."""
        return self.startup in (Startup.INITIAL, Startup.SNAPSHOT)

    @property
    def followed(self) -> bool:
        """Whether the binlog keeps silver current after the first run (not ``snapshot`` only)."""
        return self.startup != Startup.SNAPSHOT

    def start_at(self) -> BinlogPosition | None:
        """The binlog position of ``startup='position'``."""
        return BinlogPosition.parse(self.start_position) if self.start_position is not None else None

    def start_epoch(self) -> float | None:
        """``start_timestamp`` (``startup='timestamp'``) in seconds since the epoch."""
        return self.start_timestamp.timestamp() if isinstance(self.start_timestamp, dt.datetime) else None

    def delivery_or(self, default: Delivery) -> Delivery:
        """This table's delivery mode, or the project's default when it sets none."""
        return Delivery(self.delivery) if self.delivery is not None else default


START_SETTINGS = (
    (Startup.POSITION, "start_position", "mysql-bin.000003:1234"),
    (Startup.GTID, "start_gtid", "0-1-1234"),
    (Startup.TIMESTAMP, "start_timestamp", "2026-11-23T10:00:00Z"),
)


def _aware_time(value: object) -> dt.datetime:
    """``start_timestamp`` as an aware time: an ISO 8601 text or a datetime, with its zone."""
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"is {value!r}, not an ISO 8601 time such as '2026-11-23T10:00:00Z'") from None
    if not isinstance(value, dt.datetime):
        raise ValueError(f"is {value!r}; use an ISO 8601 time such as '2026-11-23T10:00:00Z'")
    if value.tzinfo is None:
        raise ValueError(f"{value.isoformat()} has no zone; add one, e.g. '{value.isoformat()}Z' for UTC")
    return value


def discover(package: ModuleType) -> dict[str, TableSpec]:
    """Import every module of the ``tables`` package and collect its ``TABLE``; a module added
    since the last look (``follow`` looks again while it runs) included."""
    _forget_listings(package)
    specs: dict[str, TableSpec] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = _import_table_module(package, info)
        spec = getattr(module, "TABLE", None)
        problem = (f"{module.__name__} defines no TABLE = TableSpec(...)" if not isinstance(spec, TableSpec) else
                   f"two table modules are both named {spec.name!r}" if spec.name in specs else None)
        if problem is not None:
            # Forgotten, so that a later look (follow's) imports the file again once it is fixed.
            sys.modules.pop(module.__name__, None)
            raise ConfigError(problem)
        assert isinstance(spec, TableSpec)
        specs[spec.name] = spec
    return specs


def _forget_listings(package: ModuleType) -> None:
    """The import system caches each folder's listing (refreshed by the folder's mtime, which
    may not move within its resolution): forget the listings of the package's own folders only.
    ``importlib.invalidate_caches()`` would walk every folder of every package imported, which
    cost an idle ``follow`` 20 ms of CPU each time it looked for new tables."""
    for folder in package.__path__:
        invalidate = getattr(sys.path_importer_cache.get(folder), "invalidate_caches", None)
        if invalidate is not None:
            invalidate()


def _import_table_module(package: ModuleType, info: pkgutil.ModuleInfo) -> ModuleType:
    """Import one table module; any error it raises is a configuration error naming its file."""
    try:
        return importlib.import_module(f"{package.__name__}.{info.name}")
    except SyntaxError as exc:
        raise ConfigError(
            f"table module {_module_file(package, info)} has a syntax error at line {exc.lineno}: "
            f"{exc.msg}; fix it, or move the file out of the tables folder"
        ) from exc
    except ConfigError as exc:  # a TableSpec refusing its arguments: its message says what to fix
        raise ConfigError(f"table module {_module_file(package, info)}: {exc}") from exc
    except Exception as exc:  # whatever the module's own code raises, report it against its file
        detail = " ".join(str(exc).split()) or "no message"
        raise ConfigError(
            f"table module {_module_file(package, info)} failed to import: "
            f"{type(exc).__name__}: {detail[:300]}; fix it, or move the file out of the tables folder"
        ) from exc


def _module_file(package: ModuleType, info: pkgutil.ModuleInfo) -> str:
    """The module's file, relative to the project (``<package>/tables/orders.py``)."""
    folder = Path(getattr(info.module_finder, "path", package.__path__[0]))
    path = folder / info.name / "__init__.py" if info.ispkg else folder / f"{info.name}.py"
    project = folder.parents[1] if len(folder.parents) > 1 else folder
    return str(path.relative_to(project)) if path.is_relative_to(project) else str(path)
