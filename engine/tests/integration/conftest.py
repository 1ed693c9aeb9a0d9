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


@pytest.fixture(scope="session")
def spark(base_config: ProjectConfig):
    session = get_spark(base_config, app_name="tests")
    yield session
    session.stop()


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
