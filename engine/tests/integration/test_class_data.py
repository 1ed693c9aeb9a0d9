"""The driver JVM's class-data archive on a real JVM: ``spark-check`` saves it (with the jar list,
resolved by Ivy on a fresh cache), the next local session maps it, and an archive the JVM cannot
start with is removed while the command goes on without it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import PROJECT_ROOT
from .test_cli import cli_command

pytestmark = pytest.mark.integration

START_WITH_ARCHIVE = """
import sys
from pathlib import Path
from lakehouse_engine.config.project import load_project
from lakehouse_engine.sink import classdata
from lakehouse_engine.sink.spark import get_spark
config = load_project(Path(sys.argv[1]), profiles_dir=Path(sys.argv[2]))
spark = get_spark(config)
assert spark.range(3).count() == 3
process = spark.sparkContext._gateway.proc
print("mapped:", [p.name for p in classdata.archive_dir().glob("*.jsa") if classdata.mapped_by(process.pid, p)])
"""


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, env=env)


def test_spark_check_saves_the_jar_list_and_an_archive_that_later_sessions_map_or_drop_when_broken(config, tmp_path):
    command, env = cli_command(config, "spark-check")
    cache = tmp_path / "cache"
    env = {**env, "XDG_CACHE_HOME": str(cache)}

    first = run(command, env)
    assert first.returncode == 0, first.stderr
    manifest = next((cache / "lakehouse-ingest").glob("*.jars")).read_text().splitlines()
    assert any("io.delta_delta-spark" in jar for jar in manifest)
    assert not any("lakehouse-delta-logstore" in jar for jar in manifest)  # the engine's own jar ships with it
    (archive,) = (cache / "lakehouse-ingest" / "classdata").glob("*.jsa")
    assert archive.name.endswith(f"-{archive.stat().st_size}.jsa")
    assert f"JVM class-data archive saved: {archive}" in first.stdout

    second = run(command, env)
    assert second.returncode == 0, second.stderr
    assert f"JVM class-data archive in use: {archive}" in second.stdout  # the JVM's /proc maps show it

    # Damaged with its size in its name matching (a truncated copy): the JVM dies mapping it.
    archive.chmod(0o644)
    data = archive.read_bytes()[: archive.stat().st_size // 2]
    archive.unlink()
    damaged = archive.with_name(f"{archive.name.rsplit('-', 1)[0]}-{len(data)}.jsa")
    damaged.write_bytes(data)
    project, profiles = command[command.index("--project-dir") + 1], command[command.index("--profiles-dir") + 1]
    third = run([sys.executable, "-c", START_WITH_ARCHIVE, project, profiles], env)
    assert third.returncode == 0, third.stderr
    assert "mapped: []" in third.stdout
    assert f"Spark did not start with the JVM's class-data archive {damaged}" in third.stderr
    assert not damaged.exists()

