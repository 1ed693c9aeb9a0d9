"""``lakehouse eject``: copy the engine's source into the project, as ``dlt init`` copies a
source: the repository then holds (and owns) the engine instead of pinning the package."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
from pathlib import Path

from .. import __version__
from ..errors import ConfigError

TARGET = "lakehouse_engine"
REQUIREMENTS = "requirements.txt"
# The pin the template writes (and the comments it puts above it).
_PIN = re.compile(r"^\s*lakehouse[-_]engine\b", re.IGNORECASE)


def engine_dependencies() -> list[str]:
    """The installed engine's own pinned dependencies (what the project must now pin itself)."""
    try:
        required = importlib.metadata.requires("lakehouse-engine") or []
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError("the engine is not installed as the lakehouse-engine package (already vendored?): "
                          "nothing to eject", setting="eject") from None
    return [r for r in required if ";" not in r]  # extras and markers are not the engine's own needs


def eject(project_dir: Path) -> list[str]:
    """Vendor the running engine into ``project_dir``; returns what was done, one line each."""
    source = Path(__file__).resolve().parents[1]
    target = project_dir / TARGET
    if target.exists() or source == target:
        raise ConfigError(f"{target} exists: the engine is vendored already", setting="eject")
    requirements = project_dir / REQUIREMENTS
    lines = requirements.read_text().splitlines() if requirements.exists() else []
    dependencies = engine_dependencies()
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (target / "VENDORED").write_text(f"lakehouse-engine {__version__}\nejected from {source}\n")
    kept = [line for line in lines if not _PIN.match(line) and "lakehouse-engine" not in line]
    requirements.write_text("\n".join([*kept, f"# The engine's dependencies: its source is in {TARGET}/ "
                                       f"(vendored from lakehouse-engine {__version__}).", *dependencies]) + "\n")
    return [f"copied lakehouse-engine {__version__} to {target}",
            f"{REQUIREMENTS}: the engine's pin replaced by its {len(dependencies)} dependencies",
            "next: `make setup`, then `.venv/bin/python -m pip uninstall -y lakehouse-engine`; the Makefile now runs "
            f"`python -m {TARGET}` from this folder"]
