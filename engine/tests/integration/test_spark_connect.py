"""Portable mode against a real Spark Connect server: pyspark's own ``SparkConnectServer``
started by the harness with the Delta jars and Delta's SQL extension (no Delta Connect plugin),
the CLI as its ``sc://`` client. Snapshot, catch-up, dq, repair, maintain and follow run through
public APIs only, and the same changes give silver exactly as the default, JVM path gives it on another
lake."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from lakehouse_engine.sink.connect import DELTA_EXTENSION
from lakehouse_engine.sink.spark import DELTA_CATALOG
from lakehouse_engine.source.embedded import free_port

from .helpers import assert_silver_equals_exact_source, run_source_sql
from .test_cli import cli_command, run_results
from .test_follow import _until_silver_is_the_source, sigterm

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent


def _connect_jar() -> str:
    import pyspark

    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("spark-connect_*.jar"))
    if not jars:
        pytest.fail("pyspark ships no spark-connect jar")
    return str(jars[0])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class ConnectServer:
    """pyspark's Spark Connect server on local[2], with the Delta jars the test session uses."""

    def __init__(self, folder: Path, delta_jars: str, extra: tuple[str, ...] = (),
                 environment: dict[str, str] | None = None):
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
        env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", **(environment or {}))
        command = [
            str(BIN / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--master", "local[2]", "--jars", f"{delta_jars},{_connect_jar()}",
            "--conf", f"spark.connect.grpc.binding.port={self.port}",
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", f"spark.sql.extensions={DELTA_EXTENSION}",
            "--conf", f"spark.sql.catalog.spark_catalog={DELTA_CATALOG}",
            "--conf", "spark.driver.memory=1g", "--conf", "spark.ui.enabled=false",
            "--conf", "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            *extra, "spark-internal",
        ]
        self.log = folder / "connect-server.log"
        self.process = subprocess.Popen(command, stdout=self.log.open("w"), stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 180
        while not _listening(self.port):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                pytest.fail(f"the Spark Connect server did not start: see {self.log}")
            time.sleep(1)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def delta_jars(spark) -> str:
    """The Delta jars the test session runs with (resolved once, from the jar cache)."""
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.fail("Java is needed for the Spark Connect server")
    return ",".join(j for j in spark.sparkContext.getConf().get("spark.jars", "").split(",") if j)


@pytest.fixture(scope="module")
def connect_server(spark, tmp_path_factory) -> Iterator[ConnectServer]:
    server = ConnectServer(tmp_path_factory.mktemp("connect"), delta_jars(spark))
    yield server
    server.stop()


def _lakehouse(config, *args: str, master: str | None = None) -> subprocess.CompletedProcess:
    command, env = cli_command(config, *args)
    if master is not None:
        env = {**env, "SPARK_MASTER": master}
    return subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)


def _silver(spark, config, table: str) -> tuple[str, list[tuple]]:
    """Silver's schema, and its rows in key order, every column but the time of the run's ingest."""
    df = spark.read.format("delta").load(config.table_path("silver", table))
    rows = df.drop("_ingested_at")
    return df.schema.json(), [tuple(r) for r in rows.orderBy(*rows.columns).collect()]


def test_snapshot_catch_up_dq_repair_and_maintain_through_spark_connect_give_the_jvm_paths_silver(
        spark, config, mariadb, connect_server, tmp_path):
    classic = replace(config, lake_root=str(tmp_path / "classic-lake"), target_dir=tmp_path / "classic-target")

    for run in (_lakehouse(config, "ingest", "--select", "customers", master=connect_server.url),
                _lakehouse(classic, "ingest", "--select", "customers")):
        assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert run_results(config)["results"][0]["snapshot_rows"] == 400
    assert_silver_equals_exact_source(spark, config, "customers")

    run_source_sql(mariadb, config.source.database,
                   "UPDATE customers SET full_name = CONCAT(full_name, ' x') WHERE customer_id <= 5;\n"
                   "DELETE FROM customers WHERE customer_id = 6;\n"
                   "INSERT INTO customers (customer_id, full_name, email, country, created_at) "
                   "VALUES (9001, 'New One', 'new@example.com', 'NL', '2026-01-02 03:04:05.678');")
    for run in (_lakehouse(config, "ingest", "--select", "customers", master=connect_server.url),
                _lakehouse(classic, "ingest", "--select", "customers")):
        assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert run_results(config)["results"][0]["binlog_rows"] == 7
    assert_silver_equals_exact_source(spark, config, "customers")
    assert _silver(spark, config, "customers") == _silver(spark, classic, "customers")

    checked = _lakehouse(config, "dq", "--select", "customers", master=connect_server.url)
    assert checked.returncode == 0 and "PASS" in checked.stdout, checked.stdout + checked.stderr[-3000:]

    silver = config.table_path("silver", "customers")
    spark.sql(f"UPDATE delta.`{silver}` SET full_name = 'Wrong' WHERE customer_id = 7")
    drift = _lakehouse(config, "dq", "--select", "customers", master=connect_server.url)
    assert drift.returncode == 1 and "customer_id=7" in drift.stdout + drift.stderr, drift.stdout + drift.stderr
    repair = _lakehouse(config, "repair", "--select", "customers", master=connect_server.url)
    assert repair.returncode == 0, repair.stdout + repair.stderr[-3000:]
    assert_silver_equals_exact_source(spark, config, "customers")
    maintain = _lakehouse(config, "maintain", "--select", "customers", master=connect_server.url)
    assert maintain.returncode == 0, maintain.stdout + maintain.stderr[-3000:]
    assert_silver_equals_exact_source(spark, config, "customers")


def test_a_spark_connect_server_without_delta_is_one_line_naming_the_fix(config, tmp_path):
    port = free_port()
    run = _lakehouse(config, "ingest", "--select", "customers", master=f"sc://127.0.0.1:{port}")
    assert run.returncode != 0
    assert f"cannot reach the Spark Connect server at sc://127.0.0.1:{port}" in run.stderr, run.stderr[-2000:]


def test_follow_through_spark_connect_keeps_silver_equal_to_the_source_and_stops_on_sigterm(
        spark, config, mariadb, connect_server):
    first = _lakehouse(config, "ingest", "--select", "customers", master=connect_server.url)
    assert first.returncode == 0, first.stdout + first.stderr[-3000:]
    command, env = cli_command(config, "follow", "--select", "customers", "--interval", "0.5")
    process = subprocess.Popen(command, env={**env, "SPARK_MASTER": connect_server.url}, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        run_source_sql(mariadb, config.source.database,
                       "UPDATE customers SET tier = 'gold' WHERE customer_id <= 20;\n"
                       "DELETE FROM customers WHERE customer_id BETWEEN 30 AND 32;")
        seen = _until_silver_is_the_source(process, spark, config)
        rest = sigterm(process)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, (seen + rest)[-3000:]
    assert "follow: SIGTERM: stopping after the current cycle" in seen + rest
    assert_silver_equals_exact_source(spark, config, "customers")
