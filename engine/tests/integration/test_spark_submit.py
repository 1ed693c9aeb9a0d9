"""spark-submit runs the engine: ``lakehouse submit-line`` prints the line (Delta jars, Delta's
session settings, the launcher), and a line without the Delta jars fails with one line saying
what to add, instead of a ClassNotFoundException."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from lakehouse_engine.sink import logstore
from lakehouse_engine.sink.spark import cached_jars, delta_artifact

from .helpers import assert_silver_equals_source
from .test_cli import PROJECT_ROOT, cli, run_results

pytestmark = pytest.mark.integration

SPARK_SUBMIT = str(Path(sys.executable).parent / "spark-submit")  # pyspark's own, in this venv


def _submit_line(config, *command: str) -> list[str]:
    printed = cli(config, "submit-line", *command)
    assert printed.returncode == 0, printed.stderr[-3000:]
    line = shlex.split(printed.stdout.strip())
    assert line[0] == "spark-submit" and line[line.index("--packages") + 1] == delta_artifact()
    assert line[-len(command):] == list(command)
    return [SPARK_SUBMIT, *line[1:]]


def _run(line: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(line, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900,
                          env={**_env(), "PYTHONPATH": str(PROJECT_ROOT)})


def _env() -> dict[str, str]:
    """As in an activated venv: pyspark's spark-submit finds its Spark through the first python3."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    return {**env, "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])}


def test_the_printed_spark_submit_line_ingests_with_the_delta_jars_it_names(spark, config):
    jars = cached_jars()
    assert jars, "the session's Spark start caches the Delta jar list"
    line = _submit_line(config, "ingest", "--select", "customers", "--profiles-dir",
                        str(config.target_dir / "profiles"))
    del line[line.index("--packages"):line.index("--packages") + 2]  # the same jars from the local
    at = line.index("--jars") + 1  # cache, beside the engine's own: no resolution in a test
    line[at] = ",".join([line[at], *jars])
    done = _run(line)
    assert done.returncode == 0, done.stderr[-3000:]
    assert run_results(config)["results"][0]["snapshot_rows"] == 400
    assert_silver_equals_source(spark, config, "customers")


def _failed_with(line: list[str]) -> list[str]:
    """The error lines of a spark-submit line that must stop as a configuration error."""
    done = _run(line)
    assert done.returncode == 2, done.stderr[-3000:]
    # spark-submit merges the Python driver's stderr into its stdout; its own JVM logs on stderr.
    return [text for text in done.stdout.splitlines() if text.startswith("ERROR")]


def test_a_spark_submit_line_without_the_delta_jars_is_one_line_naming_them(config):
    line = _submit_line(config, "ingest", "--select", "customers", "--profiles-dir",
                        str(config.target_dir / "profiles"))
    at = line.index("--packages")
    del line[at:at + 2]
    assert _failed_with(line) == [
        f"ERROR [configuration]: spark-submit started Spark without the Delta jars: add --packages "
        f"{delta_artifact()} (or --jars with those jars) to the spark-submit line; lakehouse submit-line prints it"]
    assert run_results(config)["status"] == "error"


def test_a_spark_submit_line_without_the_engines_log_store_jar_is_one_line_naming_it(spark, config):
    line = _submit_line(config, "ingest", "--select", "customers", "--profiles-dir",
                        str(config.target_dir / "profiles"))
    del line[line.index("--packages"):line.index("--packages") + 2]
    at = line.index("--jars") + 1
    assert line[at] == str(logstore.JAR)  # a local master's line names it
    line[at] = ",".join(cached_jars() or [])  # the Delta jars only
    assert _failed_with(line) == [
        f"ERROR [configuration]: spark-submit started Spark without the engine's log store jar: add {logstore.JAR} "
        "to --jars (or leave out --conf spark.delta.logStore.file.impl); lakehouse submit-line prints it"]
