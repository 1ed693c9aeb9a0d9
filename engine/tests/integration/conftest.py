"""One embedded MariaDB and one Spark session for the whole test session; a fresh database
(loaded with the demo schema) and a fresh lake for every test."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import fixture_project
import pytest

from lakehouse_engine.config.project import ProjectConfig, SourceProfile, load_project
from lakehouse_engine.sink.spark import get_spark
from lakehouse_engine.source import embedded

# Spark hands TIMESTAMP values to Python in the process's local zone: pin it.
os.environ["TZ"] = "UTC"
time.tzset()

PROJECT_ROOT = fixture_project.PROJECT_ROOT
PASSWORD = "test-only-password"
USER = "ingest"



@pytest.fixture(scope="session")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[embedded.EmbeddedServer]:
    server = embedded.EmbeddedServer(tmp_path_factory.mktemp("mariadb"), embedded.free_port())
    embedded.start(server)
    yield server
    embedded.stop(server)


@pytest.fixture(scope="session")
def base_config(tmp_path_factory: pytest.TempPathFactory, mariadb: embedded.EmbeddedServer) -> ProjectConfig:
    config = load_project(PROJECT_ROOT, env={"MYSQL_PASSWORD": PASSWORD})
    lake = tmp_path_factory.mktemp("lake")
    return replace(
        config,
        lake_root=str(lake),
        target_dir=lake / "target",
        gx_dir=lake / "gx",
        source=SourceProfile("127.0.0.1", mariadb.port, USER, PASSWORD, "unused"),
        defaults=replace(config.defaults, chunk_size=300, commit_rows=1200),
    )


# One JVM serves every test's tables (hundreds of Delta tables, their cached logs) where a run
# serves one project's: Spark's default 1g heap ran out once, late in a full run, on the 8 MiB
# blob test (which passes alone at 1g); the local JVM then exits and every later test fails.
TEST_DRIVER_MEMORY = "2g"


@pytest.fixture(scope="session")
def spark(base_config: ProjectConfig):
    conf = {"spark.driver.memory": TEST_DRIVER_MEMORY, **base_config.spark.conf}
    session = get_spark(replace(base_config, spark=replace(base_config.spark, conf=conf)), app_name="tests")
    yield session
    session.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """When Spark's JVM died during the session, show why: its log is in a temporary folder
    that CI does not keep."""
    base = Path(terminalreporter.config._tmp_path_factory.getbasetemp())
    logs = sorted({log.resolve() for log in base.glob("lake*/target/spark.log")})  # lakeN, lakecurrent
    for log in logs:
        lines = log.read_text(errors="replace").splitlines()
        fatal = [i for i, line in enumerate(lines) if "OutOfMemoryError" in line or "Uncaught exception" in line]
        if fatal:
            terminalreporter.write_sep("-", f"Spark's JVM failed: {log}")
            for line in lines[max(0, fatal[0] - 5):fatal[0] + 30]:
                terminalreporter.write_line(line)


@pytest.fixture
def demo_db(mariadb: embedded.EmbeddedServer) -> str:
    """A new database loaded with demo/schema.sql, readable by the ingest user."""
    name = f"demo_{uuid.uuid4().hex[:8]}"
    embedded.create_ingest_user(mariadb, USER, PASSWORD, name)
    schema = (PROJECT_ROOT / "demo" / "schema.sql").read_text()
    embedded.run_sql(mariadb, embedded.split_sql(schema), name)
    return name


@pytest.fixture
def config(base_config: ProjectConfig, demo_db: str, tmp_path: Path) -> ProjectConfig:
    return replace(
        base_config,
        lake_root=str(tmp_path / "lake"),
        target_dir=tmp_path / "target",
        gx_dir=tmp_path / "gx",
        source=replace(base_config.source, database=demo_db),
    )
