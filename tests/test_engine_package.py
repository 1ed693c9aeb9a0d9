"""The engine is a distribution of its own: it lints clean, type-checks, and builds as a wheel
holding its code, its data files and the ``lakehouse`` command, at the version it declares."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

from .conftest import TEMPLATE

# Bakes and runs whole suites or builds the engine: part of `make test`, not of plain `pytest`.
pytestmark = pytest.mark.integration

ENGINE = TEMPLATE / "engine"


def test_the_engine_lints_clean():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ENGINE, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_engine_type_checks_clean():
    """As `make lint` runs it, with the engine's own ``[tool.mypy]`` settings."""
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ENGINE, capture_output=True, text=True,
                          timeout=15 * 60)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ENGINE), "-w", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("*.whl")
    return built


def test_the_wheel_carries_the_declared_version_the_code_and_the_command(wheel):
    import lakehouse_engine

    assert wheel.name == f"lakehouse_engine-{lakehouse_engine.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        dist = f"lakehouse_engine-{lakehouse_engine.__version__}.dist-info"
        entry_points = archive.read(f"{dist}/entry_points.txt").decode()
        metadata = archive.read(f"{dist}/METADATA").decode()
    assert {"lakehouse_engine/run/pipeline.py", "lakehouse_engine/sink/log4j2.properties",
            "lakehouse_engine/sink/jars/lakehouse-delta-logstore.jar",
            "lakehouse_engine/sink/jars/lakehouse-hadoop-local.jar",
            "lakehouse_engine/py.typed", "lakehouse_engine/tables.py"} <= names
    assert not any(name.startswith(("tests/", "lakehouse_engine/tests")) for name in names)
    assert "lakehouse = lakehouse_engine.run.cli:entry" in entry_points
    assert "Requires-Dist: pyspark==4.1.4" in metadata  # its pins, from requirements.txt


def test_the_changelog_has_an_entry_for_the_version():
    import lakehouse_engine

    assert f"\n## {lakehouse_engine.__version__}\n" in (ENGINE / "CHANGELOG.md").read_text()
