"""The ``lakehouse`` command finds its project as ``dbt`` does (``lakehouse_project.yml`` in the
current folder or ``--project-dir``) and the table modules of the package it names; ``eject``
vendors the engine into a project."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import fixture_project
import pytest

import lakehouse_engine
from lakehouse_engine.errors import ConfigError
from lakehouse_engine.run import cli, eject, project

PROFILES = "p:\n  target: dev\n  outputs:\n    dev: {host: h, port: 1, user: u, password: x, database: d}\n"


def a_project(root: Path, settings: str, packages: tuple[str, ...] = ("team_lake",)) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "lakehouse_project.yml").write_text(settings)
    (root / "profiles.yml").write_text(PROFILES)
    for package in packages:
        (root / package / "tables").mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
        (root / package / "tables" / "__init__.py").write_text("")
        (root / package / "tables" / "t_one.py").write_text(
            "from lakehouse_engine.tables import TableSpec\n\nTABLE = TableSpec('t_one', 't_one')\n")
    return root


def test_the_package_is_the_one_lakehouse_project_yml_names_else_the_one_folder_with_tables(tmp_path):
    named = a_project(tmp_path / "named", "profile: p\npackage: second\n", ("first", "second"))
    assert project.project_package(named) == "second"
    alone = a_project(tmp_path / "alone", "profile: p\n")
    assert project.project_package(alone) == "team_lake"
    two = a_project(tmp_path / "two", "profile: p\n", ("first", "second"))
    with pytest.raises(ConfigError, match=r"has 2 folders \(first, second\) with a tables/__init__.py: set package"):
        project.project_package(two)
    with pytest.raises(ConfigError, match=r"package is 'not a name'"):
        project.project_package(a_project(tmp_path / "bad", "profile: p\npackage: not a name\n"))
    with pytest.raises(ConfigError, match=r"no lakehouse_project.yml in .*: run the command in a project's folder"):
        project.project_package(tmp_path / "empty")


def lakehouse(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """The installed console script, in a fresh interpreter, as a user runs it."""
    script = Path(sys.executable).parent / "lakehouse"
    return subprocess.run([str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_lakehouse_command_runs_in_the_project_folder_or_with_project_dir(tmp_path):
    root = a_project(tmp_path / "team", "profile: p\nlake_root: lake\n")
    for cwd, args in ((root, ()), (tmp_path, ("--project-dir", str(root)))):
        done = lakehouse(cwd, *args, "list", "--profiles-dir", str(root))
        assert done.returncode == 0, done.stderr
        assert [line.split()[0] for line in done.stdout.splitlines()[1:]] == ["t_one"]
    outside = lakehouse(tmp_path, "list")
    assert outside.returncode == 2
    assert outside.stderr.strip().splitlines() == [
        f"ERROR [configuration]: {tmp_path.resolve() / 'lakehouse_project.yml'} not found: run from the project "
        "folder or pass --project-dir"]


def test_the_version_needs_no_project_and_names_the_engine(tmp_path):
    done = lakehouse(tmp_path, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"lakehouse-engine {lakehouse_engine.__version__} (template unknown; pyspark ")


def test_eject_copies_the_engine_in_and_replaces_its_pin_by_its_dependencies(tmp_path):
    root = tmp_path / "team"
    shutil.copytree(fixture_project.PROJECT_ROOT, root, ignore=shutil.ignore_patterns("__pycache__"))
    assert "lakehouse-engine @ " in (root / "requirements.txt").read_text()
    done = eject.eject(root)
    assert done[0] == f"copied lakehouse-engine {lakehouse_engine.__version__} to {root / 'lakehouse_engine'}"
    assert (root / "lakehouse_engine" / "run" / "pipeline.py").is_file()
    assert (root / "lakehouse_engine" / "VENDORED").read_text().startswith(
        f"lakehouse-engine {lakehouse_engine.__version__}\n")
    requirements = (root / "requirements.txt").read_text()
    assert "lakehouse-engine @" not in requirements and "\npyspark==4.1." in requirements
    # The vendored copy is what the project now runs (python -m lakehouse_engine from its folder).
    version = subprocess.run([sys.executable, "-m", "lakehouse_engine", "--version"], cwd=root,
                             capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and " vendored (template " in version.stdout, version.stderr
    with pytest.raises(ConfigError, match="the engine is vendored already"):
        eject.eject(root)


def test_eject_is_a_command_of_its_own():
    assert "eject" in cli.COMMANDS
