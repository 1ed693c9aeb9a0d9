"""A smoke run on the embedded demo source: this project's table modules and configuration with
the pinned engine, end to end (ingest, change rows, ingest again, quality checks). Kept only in
projects generated for the demo's tables."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from lakehouse_engine.run import cli
from lakehouse_engine.source import embedded

pytestmark = pytest.mark.integration

PROJECT = Path(__file__).resolve().parents[1]
PACKAGE = "{{ cookiecutter.package_name }}"
PASSWORD = "test-only-password"



@pytest.fixture
def source(tmp_path: Path):
    server = embedded.EmbeddedServer(tmp_path / "mariadb", embedded.free_port())
    embedded.start(server)
    try:
        embedded.create_ingest_user(server, "ingest", PASSWORD, "demo")
        embedded.run_sql(server, embedded.split_sql((PROJECT / "demo" / "schema.sql").read_text()), "demo")
        yield server
    finally:
        embedded.stop(server)


def test_the_demo_tables_ingest_take_changes_from_the_binlog_and_pass_their_checks(source, tmp_path, monkeypatch):
    # This project's settings, with the lake and target under tmp_path.
    settings = yaml.safe_load((PROJECT / "lakehouse_project.yml").read_text())
    settings.update(lake_root=str(tmp_path / "lake"), target_dir=str(tmp_path / "target"))
    run_dir = tmp_path / "project"
    run_dir.mkdir()
    (run_dir / "lakehouse_project.yml").write_text(yaml.safe_dump(settings))
    for name, value in {"MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": str(source.port), "MYSQL_USER": "ingest",
                        "MYSQL_DATABASE": "demo", "MYSQL_PASSWORD": PASSWORD}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(run_dir)

    def lakehouse(*args: str) -> int:
        return cli.main(["--project-dir", str(run_dir), "--profiles-dir", str(PROJECT), *args], package=PACKAGE)

    assert lakehouse("ingest") == 0
    embedded.run_sql(source, embedded.split_sql((PROJECT / "demo" / "changes.sql").read_text()), "demo")
    assert lakehouse("ingest") == 0
    assert lakehouse("dq") == 0
