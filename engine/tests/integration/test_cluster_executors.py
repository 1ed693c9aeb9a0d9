"""Executors that are not the driver: Spark's ``local-cluster`` master starts executor processes
of their own, whose Python is the one ``spark.pyspark.python`` names, not the driver's venv. The
engine ships itself to them; a Python that lacks a requirement is one line naming it."""

from __future__ import annotations

import json
import site
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import assert_silver_equals_source
from .test_cli import PROJECT_ROOT, cli_command, error_lines, project_dir, run_results

pytestmark = pytest.mark.integration

CLUSTER = "local-cluster[1,1,1024]"  # one worker, one core, 1 GiB: its executor is a process of its own


def _python(folder: Path, *, with_requirements: bool) -> str:
    """A Python of its own for the executors: bare, or seeing the requirements (pymysql, pyarrow,
    numpy...) but not the engine, as a worker with the requirements installed and nothing else."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    if with_requirements:
        (inner,) = folder.glob("lib/python*/site-packages")
        # A plain path line: the engine's editable-install .pth inside it is not processed.
        (inner / "requirements.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return str(folder / "bin" / "python")


def _ingest_on_cluster(config, python: str) -> subprocess.CompletedProcess:
    command, env = cli_command(config, "ingest", "--select", "customers")
    project_file = project_dir(config) / "lakehouse_project.yml"
    text = project_file.read_text()
    assert "  conf: {}" in text
    project_file.write_text(text.replace("  conf: {}", "  conf: " + json.dumps({"spark.pyspark.python": python})))
    env = {**env, "SPARK_MASTER": CLUSTER}
    env.pop("PYSPARK_PYTHON", None)
    return subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900, env=env)


def test_executors_without_the_engine_installed_run_the_shipped_engine(spark, config, tmp_path):
    python = _python(tmp_path / "executor-python", with_requirements=True)
    probe = subprocess.run([python, "-c", "import lakehouse_engine"], capture_output=True, text=True)
    assert "No module named 'lakehouse_engine'" in probe.stderr  # not installed there
    done = _ingest_on_cluster(config, python)
    assert done.returncode == 0, done.stderr[-3000:]
    assert run_results(config)["results"][0]["snapshot_rows"] == 400
    assert_silver_equals_source(spark, config, "customers")


def test_an_executor_python_without_the_requirements_fails_the_run_with_one_line_naming_the_module(config,
                                                                                                   tmp_path):
    python = _python(tmp_path / "bare-python", with_requirements=False)
    done = _ingest_on_cluster(config, python)
    assert done.returncode == 1, done.stderr[-3000:]  # the table failed (the others would go on)
    (line,) = error_lines(done.stderr)
    assert "ModuleNotFoundError: No module named" in line and "on the executors" in line, line
    assert python in line and "spark.pyspark.python" in line
    (result,) = run_results(config)["results"]
    assert result["status"] == "error" and result["category"] == "configuration"  # not retriable
