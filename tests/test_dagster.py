"""The generated Dagster definitions, run by Dagster's own in-process executor against a real
project: the embedded MariaDB, Spark and Delta. Opt-in (`make test-dagster` installs Dagster):
every table materializes from one `lakehouse ingest`, and `dq` reports each table's check."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from lakehouse_engine.source.embedded import free_port

from .conftest import run_cookiecutter

pytestmark = pytest.mark.dagster

LAKEHOUSE = str(Path(sys.executable).with_name("lakehouse"))
PASSWORD = "demo-only-password"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("dagster")
    done = run_cookiecutter(out, project_name="Dagster Check", source_port=str(free_port()))
    assert done.returncode == 0, done.stderr
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    env = {**os.environ, "MYSQL_PASSWORD": PASSWORD}
    up = subprocess.run([LAKEHOUSE, "source", "up"], cwd=folder, env=env, capture_output=True, text=True)
    assert up.returncode == 0, up.stderr[-3000:]
    try:
        yield folder
    finally:
        subprocess.run([LAKEHOUSE, "source", "down"], cwd=folder, env=env, capture_output=True)


@pytest.fixture(scope="module")
def dg():
    """Dagster, imported only when these tests run (`make test-dagster` installs it)."""
    import dagster

    return dagster


@pytest.fixture(scope="module")
def defs_module(project, monkeypatch_module):
    monkeypatch_module.setenv("LAKEHOUSE_BIN", LAKEHOUSE)
    monkeypatch_module.setenv("MYSQL_PASSWORD", PASSWORD)
    spec = importlib.util.spec_from_file_location("dagster_defs", project / "orchestration" / "dagster_defs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_every_table_is_an_asset_materialized_by_one_ingest_and_checked_by_dq(dg, defs_module):
    tables = [t["name"] for t in defs_module.TABLES]
    assert sorted(tables) == ["customers", "order_items", "orders", "products"]
    result = dg.materialize([defs_module.ingest, defs_module.dq], instance=dg.DagsterInstance.ephemeral())
    assert result.success
    materialized = {e.asset_key.path[-1]: e.step_materialization_data.materialization.metadata
                    for e in result.get_asset_materialization_events()}
    assert sorted(materialized) == sorted(tables)
    assert all(m["snapshot_rows"].value > 0 for m in materialized.values())
    assert all(m["binlog_position"].value for m in materialized.values())
    checks = {e.asset_key.path[-1]: e for e in result.get_asset_check_evaluations()}
    assert sorted(checks) == sorted(tables)
    assert all(c.passed for c in checks.values()), {t: c.metadata for t, c in checks.items() if not c.passed}
    assert any("silver_values_equal_source" in name for name in checks["orders"].metadata)


def test_a_subset_runs_one_ingest_of_just_those_tables(dg, defs_module, project):
    result = dg.materialize([defs_module.ingest], selection=["lakehouse/orders"],
                            instance=dg.DagsterInstance.ephemeral())
    assert result.success
    assert [e.asset_key.path[-1] for e in result.get_asset_materialization_events()] == ["orders"]
    assert not list((project / "target").glob("dagster-*.json"))  # each run's results file is removed


def test_with_spark_submit_set_each_step_runs_the_submit_line_through_it(dg, defs_module, project, monkeypatch):
    # A cluster's gateway: the step runs `lakehouse submit-line`'s line with the given spark-submit
    # (here pyspark's own, on a local master), as Airflow's SparkSubmitOperator would.
    import pyspark

    spark_submit = str(Path(sys.executable).with_name("spark-submit"))
    monkeypatch.setenv("LAKEHOUSE_SPARK_SUBMIT", spark_submit)
    monkeypatch.setenv("SPARK_HOME", str(Path(pyspark.__file__).parent))  # as a gateway has it
    line = defs_module.command_line(["ingest", "--select", "products"])
    assert line[0] == spark_submit and any(word.endswith("lakehouse_engine/submit.py") for word in line)
    assert line[-3:] == ["ingest", "--select", "products"]
    result = dg.materialize([defs_module.ingest], selection=["lakehouse/products"],
                            instance=dg.DagsterInstance.ephemeral())
    assert result.success
    (event,) = result.get_asset_materialization_events()
    assert event.asset_key.path[-1] == "products"
    assert event.step_materialization_data.materialization.metadata["binlog_position"].value
