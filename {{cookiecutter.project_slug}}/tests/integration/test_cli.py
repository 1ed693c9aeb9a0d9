"""The commands a user runs: ingest and dq through the CLI, with run_results.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import PASSWORD, PROJECT_ROOT, USER
from .helpers import assert_silver_equals_source

pytestmark = pytest.mark.integration


def cli(config, *args: str) -> subprocess.CompletedProcess:
    profiles = config.target_dir / "profiles"
    profiles.mkdir(parents=True, exist_ok=True)
    source = config.source
    (profiles / "profiles.yml").write_text(
        "{{ cookiecutter.package_name }}:\n  target: dev\n  outputs:\n    dev:\n"
        f"      host: {source.host}\n      port: {source.port}\n      user: {USER}\n"
        f"      password: {PASSWORD}\n      database: {source.database}\n"
    )
    project = config.target_dir / "project"
    project.mkdir(exist_ok=True)
    (project / "lakehouse_project.yml").write_text(
        (PROJECT_ROOT / "lakehouse_project.yml").read_text().replace("lake_root:", f"lake_root: {config.lake_root} #")
    )
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "{{ cookiecutter.package_name }}", "--project-dir", str(project),
         "--profiles-dir", str(profiles), *args],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, env=env,
    )


def test_ingest_and_dq_commands_record_their_results(spark, config):
    done = cli(config, "ingest", "--select", "customers", "products")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "customers" in done.stdout and "products" in done.stdout
    results = json.loads((config.target_dir / "project" / "target" / "run_results.json").read_text())
    assert results["status"] == "success" and results["metadata"]["command"] == "ingest"
    assert {r["table"]: r["snapshot_rows"] for r in results["results"]} == {"customers": 400, "products": 300}
    for table in ("customers", "products"):
        assert_silver_equals_source(spark, config, table)

    done = cli(config, "dq", "--select", "customers")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "customers                PASS" in done.stdout
    results = json.loads((config.target_dir / "project" / "target" / "run_results.json").read_text())
    assert results["status"] == "success" and results["results"][0]["success"] is True
