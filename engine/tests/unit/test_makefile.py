"""The Makefile hands the demo password to the embedded source's targets only, and never
swallows a command's failure. Run with a stand-in virtualenv whose ``python`` and ``lakehouse``
print what they were given (arguments and MYSQL_PASSWORD) and exit with ``$FAKE_EXIT``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import fixture_project
import pytest

PROJECT_ROOT = fixture_project.PROJECT_ROOT
DEMO_PASSWORD = "demo-only-password"
REAL_TARGETS = [["ingest", "TABLE=orders"], ["ingest-all"], ["follow"], ["dq"], ["status"], ["list"], ["debug"]]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "lakehouse"):
        program = venv / "bin" / name
        program.write_text(f'#!/bin/sh\necho "{name} $* MYSQL_PASSWORD=${{MYSQL_PASSWORD-<unset>}}"\n'
                           'exit ${FAKE_EXIT:-0}\n')
        program.chmod(0o755)
    (venv / ".installed").touch()  # newer than the requirements: `setup` has nothing to do
    return venv


def make(venv: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MYSQL_", "MAKE")) and k != "FAKE_EXIT"}
    return subprocess.run(["make", "-s", f"VENV={venv}", *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=60, env={**clean, **env})


def passwords(done: subprocess.CompletedProcess) -> list[str]:
    return [line.rsplit("MYSQL_PASSWORD=", 1)[1] for line in done.stdout.splitlines()
            if line.startswith(("python ", "lakehouse "))]


@pytest.mark.parametrize("target", REAL_TARGETS, ids=lambda t: t[0])
def test_real_targets_never_get_the_demo_password(venv, target):
    done = make(venv, *target)
    assert done.returncode == 0, done.stderr
    assert passwords(done) == ["<unset>"]
    done = make(venv, *target, MYSQL_PASSWORD="real-secret")
    assert passwords(done) == ["real-secret"]


@pytest.mark.parametrize("target", ["source-up", "source-down", "source-changes"])
def test_the_embedded_source_targets_default_to_the_demo_password(venv, target):
    done = make(venv, target)
    assert done.returncode == 0, done.stderr
    assert passwords(done) == [DEMO_PASSWORD]
    assert passwords(make(venv, target, MYSQL_PASSWORD="mine")) == ["mine"]


def test_source_up_says_which_password_the_other_targets_need(venv):
    assert f"export MYSQL_PASSWORD={DEMO_PASSWORD}" in make(venv, "source-up").stdout
    assert "export MYSQL_PASSWORD" not in make(venv, "source-up", MYSQL_PASSWORD="mine").stdout


def test_make_demo_runs_every_step_on_the_demo_password_only(venv):
    done = make(venv, "demo", MYSQL_PASSWORD="real-secret")
    assert done.returncode == 0, done.stderr
    steps = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("lakehouse ")]
    assert steps == ["source", "ingest", "source", "ingest", "dq", "status"]
    assert set(passwords(done)) == {DEMO_PASSWORD}


@pytest.mark.parametrize("code", ["1", "2", "130"])
def test_a_failed_command_fails_make_with_its_code_on_the_error_line(venv, code):
    done = make(venv, "ingest-all", FAKE_EXIT=code)
    assert done.returncode == 2  # make's own code for any failed recipe
    assert f"Error {code}" in done.stderr
    demo = make(venv, "demo", FAKE_EXIT=code)
    assert demo.returncode == 2 and len(passwords(demo)) == 1  # stops at the first failure


def test_success_is_zero_and_a_missing_table_is_a_usage_error(venv):
    assert make(venv, "ingest", "TABLE=orders").returncode == 0
    done = make(venv, "ingest")
    assert done.returncode == 2 and "name a table: make ingest TABLE=<name>" in done.stdout
    assert passwords(done) == []


def test_target_passes_the_profile_output_to_every_command(venv):
    done = make(venv, "ingest-all", "TARGET=prod")
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("lakehouse ")]
    assert line.split()[1:4] == ["--target", "prod", "ingest"]
    (plain,) = [line for line in make(venv, "ingest-all").stdout.splitlines() if line.startswith("lakehouse ")]
    assert "--target" not in plain


def test_validate_checks_the_configuration_and_table_modules(venv):
    done = make(venv, "validate")
    assert done.returncode == 0, done.stderr
    assert [line.split()[1] for line in done.stdout.splitlines() if line.startswith("lakehouse ")] == ["validate"]


def test_a_full_refresh_is_confirmed_by_yes_or_left_to_the_engine_to_ask(venv):
    asked = make(venv, "ingest", "TABLE=orders", "FULL_REFRESH=1")
    (line,) = [line for line in asked.stdout.splitlines() if line.startswith("lakehouse ")]
    assert "--full-refresh" in line.split() and "--yes" not in line.split()  # the engine asks, or refuses
    confirmed = make(venv, "ingest-all", "FULL_REFRESH=1", "YES=1")
    (line,) = [line for line in confirmed.stdout.splitlines() if line.startswith("lakehouse ")]
    assert line.split()[1:4] == ["ingest", "--full-refresh", "--yes"]
    (plain,) = [line for line in make(venv, "ingest-all", "YES=1").stdout.splitlines() if line.startswith("lakehouse ")]
    assert "--yes" not in plain  # YES alone refreshes nothing
