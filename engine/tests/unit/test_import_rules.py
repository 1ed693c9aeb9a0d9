"""The engine's dependency rule (engine/README.md): ``state`` imports nothing of the engine,
``source`` only ``state`` and ``config``, ``sink`` never ``source``, ``telemetry`` only
``config``, and nothing imports ``run`` but ``run`` itself and the package's entry point.
Top-level modules (``errors``, ``failures``, ``identifiers``...) are shared by all.
Read from the source text, lazy imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import lakehouse_engine

ROOT = Path(lakehouse_engine.__file__).resolve().parent
ENTRY_POINTS = {"__main__", "submit"}  # python -m, and spark-submit's application


def packages_of(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}


def allowed(package: str | None, packages: set[str]) -> set[str]:
    """The engine packages ``package`` may import (top-level modules are always allowed)."""
    rules = {"state": set(), "source": {"state", "config"}, "sink": packages - {"source", "run"},
             "telemetry": {"config"}}
    return rules.get(package or "", packages)


def imported_packages(path: Path, root: Path, packages: set[str]) -> set[str]:
    """The engine packages a module imports, lazily or not."""
    parts = path.relative_to(root).with_suffix("").parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(parts[:-1])[: len(parts) - node.level]
            target = [*base, *(node.module.split(".") if node.module else [])]
            names = [target[0]] if target else [alias.name for alias in node.names]
            found |= {name for name in names if name in packages}
        elif isinstance(node, ast.ImportFrom | ast.Import):
            modules = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            found |= {m.split(".")[1] for m in filter(None, modules) if m.startswith("lakehouse_engine.")}
    return found


def violations(root: Path = ROOT) -> list[str]:
    packages = packages_of(root)
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        own = parts[0] if len(parts) > 1 else None
        for package in sorted(imported_packages(path, root, packages) - {own}):
            if package == "run" and parts[-1] not in ENTRY_POINTS:
                found.append(f"{'.'.join(parts)} imports run")
            elif package != "run" and package not in allowed(own, packages):
                found.append(f"{'.'.join(parts)} imports {package}")
    return found


def test_the_engine_keeps_its_dependency_rule():
    assert violations() == []


def test_the_rule_check_sees_a_violation(tmp_path):
    """``state`` importing ``snapshot`` (as checkpoint.py once did) and a lazy import of ``run``
    in ``sink`` are both reported."""
    fake = tmp_path / "lakehouse_engine"
    for package in ("state", "snapshot", "run", "sink", "source"):
        (fake / package).mkdir(parents=True)
        (fake / package / "__init__.py").write_text("")
    (fake / "state" / "checkpoint.py").write_text("from ..snapshot.chunking import Chunk\n")
    (fake / "sink" / "bronze.py").write_text("def f():\n    from ..run import failures\n")
    (fake / "sink" / "silver.py").write_text("from ..source.connection import quote_ident\n")
    (fake / "source" / "ok.py").write_text("from ..state import positions\nfrom . import ok\n")
    assert violations(fake) == ["sink.bronze imports run", "sink.silver imports source",
                                "state.checkpoint imports snapshot"]
