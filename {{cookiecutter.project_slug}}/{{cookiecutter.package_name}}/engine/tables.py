"""Per-table ingestion specs and their discovery in the project's ``tables`` package."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from .config import Delivery
from .errors import ConfigError


@dataclass(frozen=True)
class TableSpec:
    """What one ingestion module declares. ``name`` names the lake tables; ``key`` overrides
    the primary key (must be unique and NOT NULL); ``None`` fields take project defaults."""

    name: str
    source_table: str
    key: tuple[str, ...] | None = None
    chunk_size: int | None = None
    delivery: Delivery | None = None
    tags: tuple[str, ...] = ()
    # Applied to each deduplicated batch before the silver MERGE; must keep the key columns.
    transform: Callable[[Any], Any] | None = None
    # Returns extra Great Expectations expectations (called only when checks run).
    expectations: Callable[[], Sequence[Any]] | None = field(default=None, repr=False)


def discover(package: ModuleType) -> dict[str, TableSpec]:
    """Import every module of the ``tables`` package and collect its ``TABLE``."""
    specs: dict[str, TableSpec] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        spec = getattr(module, "TABLE", None)
        if not isinstance(spec, TableSpec):
            raise ConfigError(f"{module.__name__} defines no TABLE = TableSpec(...)")
        if spec.name in specs:
            raise ConfigError(f"two table modules are both named {spec.name!r}")
        specs[spec.name] = spec
    return specs


def select(
    specs: dict[str, TableSpec],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> list[TableSpec]:
    """dbt-like selection: names and ``tag:x``; nothing included means everything."""

    def matches(spec: TableSpec, selector: str) -> bool:
        if selector.startswith("tag:"):
            return selector[4:] in spec.tags
        return selector == spec.name

    for selector in (*include, *exclude):
        if not selector.startswith("tag:") and selector not in specs:
            known = ", ".join(sorted(specs)) or "none"
            raise ConfigError(
                f"no table named {selector!r} (known: {known}); add it with "
                f"`python -m <package> add-table {selector}`"
            )
    chosen = [s for s in specs.values() if not include or any(matches(s, i) for i in include)]
    chosen = [s for s in chosen if not any(matches(s, e) for e in exclude)]
    if not chosen:
        raise ConfigError("the selection matches no table")
    return chosen
