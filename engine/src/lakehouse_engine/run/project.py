"""Which project a ``lakehouse`` command runs in, as ``dbt`` finds ``dbt_project.yml``: the folder
given by ``--project-dir`` (default: the current one) holding ``lakehouse_project.yml``, and the
project's Python package whose ``tables`` subpackage holds the table modules."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from ..config.project import PROJECT_FILE
from ..errors import ConfigError

PACKAGE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ANSWERS_FILE = ".cookiecutter.json"  # the template's answers, saved by its post-generation hook


def project_dir_from(argv: Sequence[str]) -> Path:
    """The ``--project-dir`` of a command line (its last one, as argparse takes it), else the
    current folder."""
    found = Path.cwd()
    for i, arg in enumerate(argv):
        if arg == "--project-dir" and i + 1 < len(argv):
            found = Path(argv[i + 1])
        elif arg.startswith("--project-dir="):
            found = Path(arg.split("=", 1)[1])
    return found.resolve()


def project_package(project_dir: Path) -> str:
    """The package ``lakehouse_project.yml`` names (``package:``), else the one folder of the
    project with a ``tables/__init__.py``."""
    file = project_dir / PROJECT_FILE
    if not file.is_file():
        raise ConfigError(f"no {PROJECT_FILE} in {project_dir}: run the command in a project's folder, or give "
                          "it with --project-dir", setting="project_dir")
    try:
        settings = yaml.safe_load(file.read_text()) or {}
    except (OSError, yaml.YAMLError):
        settings = {}  # the configuration's own load reports it, with the line
    named = settings.get("package") if isinstance(settings, dict) else None
    if named is not None:
        if not isinstance(named, str) or not PACKAGE_NAME.match(named):
            raise ConfigError(f"{PROJECT_FILE}: package is {named!r}; set it to the project's Python package "
                              "name (the folder holding tables/)", setting="package")
        return named
    found = sorted(d.name for d in project_dir.iterdir() if (d / "tables" / "__init__.py").is_file())
    if len(found) != 1:
        what = "no folder" if not found else f"{len(found)} folders ({', '.join(found)})"
        raise ConfigError(f"{project_dir} has {what} with a tables/__init__.py: set package: <name> in "
                          f"{PROJECT_FILE}", setting="package")
    return found[0]


def package_if_found(project_dir: Path) -> str | None:
    """``project_package``, made importable; None (not an error yet) when it cannot be told."""
    try:
        package = project_package(project_dir)
    except ConfigError:
        return None
    importable(project_dir)
    return package


def importable(project_dir: Path) -> None:
    """Let the project's package be imported (a console script's path is its own folder's)."""
    if str(project_dir) not in sys.path:
        sys.path.insert(0, str(project_dir))


def template_commit(project_dir: Path) -> str | None:
    """The template commit the project was generated from (or last updated to), if recorded."""
    try:
        answers = json.loads((project_dir / ANSWERS_FILE).read_text())
    except (OSError, ValueError):
        return None
    commit = answers.get("_template_commit") if isinstance(answers, dict) else None
    return str(commit) if commit else None
