"""A freshly generated repository is thin, lints clean and passes its own tests quickly, for any
table names and either way of holding the engine; its pin installs the engine from this clone."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import TEMPLATE, run_cookiecutter

# Bakes and runs whole suites or builds the engine: part of `make test`, not of plain `pytest`.
pytestmark = pytest.mark.integration


def bake(out: Path, **answers: str) -> Path:
    done = run_cookiecutter(out, **answers)
    assert done.returncode == 0, done.stderr
    (project,) = [p for p in out.iterdir() if p.is_dir()]
    return project


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bake(tmp_path_factory.mktemp("generated"), project_name="Template Check")


def run_suite(project: Path, *env_path: Path) -> subprocess.CompletedProcess:
    env = None
    if env_path:
        import os

        env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in env_path)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project,
                          capture_output=True, text=True, timeout=15 * 60, env=env)
    seconds = time.monotonic() - started
    # The generated `make test` must stay quick (under 2 minutes on 2 cores; the engine's long
    # suite runs in the template's CI): printed, not asserted, as every figure of speed here.
    print(f"{project.name}: its own suite in {seconds:.0f} s")
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in summary and "failed" not in summary and "skipped" not in summary, summary
    return done


def python_lines(project: Path) -> int:
    """Lines of Python the team owns outside its tests."""
    return sum(len(p.read_text().splitlines()) for p in project.rglob("*.py") if "tests" not in p.parts)


def test_the_generated_repository_lints_clean(project):
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=project, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_generated_package_type_checks_clean(project):
    """As the generated ``make lint`` runs it, with the project's own ``[tool.mypy]`` settings."""
    done = subprocess.run([sys.executable, "-m", "mypy", "template_check"], cwd=project,
                          capture_output=True, text=True, timeout=15 * 60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_generated_repository_is_thin_and_pins_the_engine(project):
    assert not (project / "template_check" / "engine").exists() and not (project / "lakehouse_engine").exists()
    assert python_lines(project) < 500
    requirements = (project / "requirements.txt").read_text()
    assert requirements.count("lakehouse-engine @ ") == 1 and "pyspark" not in requirements


def test_the_generated_makefile_lints_with_ruff_and_mypy(project):
    done = subprocess.run(["make", "-n", "lint", "VENV=/nonexistent"], cwd=project, capture_output=True, text=True)
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert "/nonexistent/bin/python -m ruff check ." in lines
    assert "/nonexistent/bin/python -m mypy template_check" in lines


def test_the_generated_makefile_calls_the_lakehouse_command(project):
    done = subprocess.run(["make", "-n", "ingest-all", "VENV=/v"], cwd=project, capture_output=True, text=True)
    assert "/v/bin/lakehouse ingest" in done.stdout, done.stdout + done.stderr


def test_the_generated_makefile_lists_its_targets_by_default(project):
    done = subprocess.run(["make", "-s"], cwd=project, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for target in ("setup", "source-up", "ingest", "ingest-all", "dq", "status", "test", "eject"):
        assert f"make {target} " in done.stdout


def test_the_generated_repository_passes_its_own_tests(project):
    """Its table modules and config, and a smoke ingest of the embedded demo (its tables)."""
    done = run_suite(project)
    assert "test_demo_ingest.py" in subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"], cwd=project,
        capture_output=True, text=True).stdout
    assert done.returncode == 0


@pytest.mark.parametrize("tables", ["accounts, invoices", "ledger"])
def test_a_project_with_other_tables_passes_its_own_tests_also_after_a_table_is_added(tmp_path, tables):
    other = bake(tmp_path, project_name="Other Lake", tables=tables)
    assert not (other / "tests" / "test_demo_ingest.py").exists()  # no demo tables to ingest
    run_suite(other)
    # What `lakehouse add-table` writes (it reads the columns from the source; here none).
    sys.path.insert(0, str(TEMPLATE / "engine" / "src"))
    from lakehouse_engine.run import scaffold

    scaffold.write_table_module(other / "other_lake" / "tables", scaffold.TableModuleSpec(source_table="refunds"))
    run_suite(other)


def test_a_vendored_project_holds_the_engine_and_passes_its_own_tests(tmp_path):
    vendored = bake(tmp_path, project_name="Own Lake", engine="vendored")
    assert (vendored / "lakehouse_engine" / "run" / "pipeline.py").is_file()
    assert (vendored / "lakehouse_engine" / "VENDORED").read_text().startswith("lakehouse-engine ")
    requirements = (vendored / "requirements.txt").read_text()
    assert "lakehouse-engine @" not in requirements and "\npyspark==" in requirements
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=vendored, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    make = subprocess.run(["make", "-n", "ingest-all", "VENV=/v"], cwd=vendored, capture_output=True, text=True)
    assert "/v/bin/python -m lakehouse_engine ingest" in make.stdout, make.stdout + make.stderr
    run_suite(vendored, vendored)  # the copy, not the template's installed engine


def test_the_pin_installs_the_engine_from_this_clone_as_a_fresh_machine_would(project, tmp_path):
    """pip resolves the generated requirements.txt (this clone at its commit, or its engine folder
    when that has uncommitted changes); the project then runs on that copy of the engine."""
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                           "-r", str(project / "requirements.txt")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (target / "lakehouse_engine" / "run" / "pipeline.py").is_file()
    import os

    env = {**os.environ, "PYTHONPATH": str(target)}
    version = subprocess.run([sys.executable, "-m", "lakehouse_engine", "--version"], cwd=project,
                             capture_output=True, text=True, timeout=120, env=env)
    assert version.returncode == 0, version.stderr
    import lakehouse_engine

    assert version.stdout.startswith(f"lakehouse-engine {lakehouse_engine.__version__} (template "), version.stdout
    where = subprocess.run([sys.executable, "-c", "import lakehouse_engine; print(lakehouse_engine.__file__)"],
                           cwd=project, capture_output=True, text=True, env=env)
    assert where.stdout.strip().startswith(str(target)), where.stdout
