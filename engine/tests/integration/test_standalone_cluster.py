"""A Spark standalone cluster as a platform team runs one: a master and a worker, each a process
of its own, the worker (and the executors it starts) in a mount namespace where the project
folder, its target/ and the engine's source are empty folders, with a Python of its own that has
the requirements but not the engine. Snapshot, catch-up, dq and repair run through the CLI
against it; silver equals the source."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import lakehouse_engine
from lakehouse_engine.source.embedded import free_port

from .conftest import PROJECT_ROOT
from .helpers import assert_silver_equals_exact_source, run_source_sql
from .test_cli import cli_command, project_dir, run_results
from .test_cluster_executors import _python

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent  # pyspark's spark-class, beside this venv's python
ENGINE_SOURCE = Path(lakehouse_engine.__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    return {**env, "PATH": os.pathsep.join([str(BIN), env.get("PATH", "")]), "SPARK_LOCAL_IP": "127.0.0.1"}


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as answer:
            return int(json.load(answer).get("aliveworkers", 0))
    except OSError:
        return 0


class Cluster:
    def __init__(self, folder: Path, hidden: list[Path]):
        if shutil.which("unshare") is None:
            pytest.fail("unshare (util-linux) is needed to hide the project from the worker")
        if any((p / "pyspark").is_dir() for p in hidden):  # hiding it would hide Spark from the worker
            pytest.fail("the engine is installed into site-packages (a generated project's make setup does "
                        "that): reinstall it editable with pip install -e engine, as make test does")
        self.port, ui = free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.seen = folder / "seen-by-worker.txt"
        spark_class = str(BIN / "spark-class")
        self.master = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
             "--webui-port", str(ui)],
            stdout=(folder / "master.log").open("w"), stderr=subprocess.STDOUT, env=_env())
        hide = "; ".join(f"mount -t tmpfs none {shlex.quote(str(p))}" for p in hidden)
        listing = " ".join(shlex.quote(str(p)) for p in hidden)
        worker = [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "2",
                  "--memory", "2g", "--work-dir", str(folder / "work"), "--webui-port", str(free_port()),
                  self.master_url]
        script = f"{hide}; find {listing} -mindepth 1 > {shlex.quote(str(self.seen))}; exec {shlex.join(worker)}"
        self.worker = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                                       stdout=(folder / "worker.log").open("w"), stderr=subprocess.STDOUT,
                                       env=_env())
        deadline = time.monotonic() + 180
        while _alive_workers(ui) < 1:
            if time.monotonic() > deadline or self.worker.poll() is not None or self.master.poll() is not None:
                self.stop()
                pytest.fail("the standalone cluster did not start: see " + str(folder))
            time.sleep(1)

    def stop(self) -> None:
        for process in (self.worker, self.master):
            process.terminate()
        for process in (self.worker, self.master):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture
def cluster(config, tmp_path) -> Iterator[Cluster]:
    folder = tmp_path / "cluster"
    folder.mkdir()
    config.target_dir.mkdir(parents=True, exist_ok=True)
    started = Cluster(folder, [PROJECT_ROOT, config.target_dir, ENGINE_SOURCE])
    yield started
    started.stop()


def _lakehouse(config, cluster: Cluster, python: str, *args: str) -> subprocess.CompletedProcess:
    command, env = cli_command(config, *args)
    project_file = project_dir(config) / "lakehouse_project.yml"
    conf = {"spark.pyspark.python": python, "spark.executor.memory": "1g", "spark.executor.cores": "1"}
    project_file.write_text(project_file.read_text().replace("  conf: {}", "  conf: " + json.dumps(conf)))
    env = {**_env(), "PYTHONPATH": env["PYTHONPATH"], "SPARK_MASTER": cluster.master_url}
    return subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900, env=env)


def test_snapshot_catch_up_dq_and_repair_run_on_a_worker_that_cannot_see_the_project(
        spark, config, mariadb, cluster, tmp_path):
    assert cluster.seen.read_text() == "", "the worker saw the project folder"
    python = _python(tmp_path / "worker-python", with_requirements=True)

    snapshot = _lakehouse(config, cluster, python, "ingest", "--select", "customers")
    assert snapshot.returncode == 0, snapshot.stdout + snapshot.stderr[-3000:]
    assert run_results(config)["results"][0]["snapshot_rows"] == 400
    assert_silver_equals_exact_source(spark, config, "customers")

    run_source_sql(mariadb, config.source.database,
                   "UPDATE customers SET full_name = CONCAT(full_name, ' x') WHERE customer_id <= 5;\n"
                   "DELETE FROM customers WHERE customer_id = 6;")
    catch_up = _lakehouse(config, cluster, python, "ingest", "--select", "customers")
    assert catch_up.returncode == 0, catch_up.stdout + catch_up.stderr[-3000:]
    assert run_results(config)["results"][0]["binlog_rows"] == 6
    assert_silver_equals_exact_source(spark, config, "customers")

    silver = config.table_path("silver", "customers")
    spark.sql(f"UPDATE delta.`{silver}` SET full_name = 'Wrong' WHERE customer_id = 7")
    drift = _lakehouse(config, cluster, python, "dq", "--select", "customers")
    assert drift.returncode == 1 and "customer_id=7" in drift.stdout + drift.stderr, drift.stdout
    repair = _lakehouse(config, cluster, python, "repair", "--select", "customers")
    assert repair.returncode == 0, repair.stdout + repair.stderr[-3000:]
    assert_silver_equals_exact_source(spark, config, "customers")
    checked = _lakehouse(config, cluster, python, "dq", "--select", "customers")
    assert checked.returncode == 0 and "customers                PASS" in checked.stdout, checked.stdout
