"""Faults of the source and the lake in the middle of a run: each table gets one line with its
failure class and the fix, never a raw driver error; a password with any character works."""

from __future__ import annotations

import os
import signal
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from lakehouse_engine.cdc.binlog import BinlogSource
from lakehouse_engine.config.project import SourceProfile
from lakehouse_engine.errors import ConfigError, LakeDamagedError, SourceUnavailableError
from lakehouse_engine.run import snapshots
from lakehouse_engine.run.pipeline import Pipeline, TablesFailed
from lakehouse_engine.sink import silver
from lakehouse_engine.source import embedded
from lakehouse_engine.source.connection import connection, current_position
from lakehouse_engine.tables import TableSpec

from .conftest import PASSWORD, USER
from .helpers import assert_silver_equals_source, run_source_sql

pytestmark = pytest.mark.integration

CUSTOMERS = [TableSpec("customers", "customers")]


def test_a_password_with_a_euro_sign_snapshots_and_reads_the_binlog(spark, config, mariadb):
    password = "pa€ss-ü{x}"
    user = f"euro_{uuid.uuid4().hex[:6]}"
    embedded.create_ingest_user(mariadb, user, password, config.source.database)
    euro = replace(config, source=replace(config.source, user=user, password=password))
    Pipeline(euro, spark, "run-1").ingest(CUSTOMERS)  # the snapshot: pymysql connections
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET tier = 'gold' WHERE customer_id = 3;")
    Pipeline(euro, spark, "run-2").ingest(CUSTOMERS)  # the catch-up: the binlog reader's connection
    assert_silver_equals_source(spark, euro, "customers")


@pytest.fixture
def own_server(tmp_path: Path):
    """A MariaDB of this test's own, which it may kill."""
    server = embedded.EmbeddedServer(tmp_path / "killed-mariadb", embedded.free_port())
    embedded.start(server)
    yield server
    embedded.stop(server)


def _kill(server: embedded.EmbeddedServer) -> None:
    pid = int(server.pidfile.read_text().strip())
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)  # this process started it: reap it, or it would look alive


def test_killing_the_source_during_a_snapshot_fails_the_table_as_retriable_and_a_rerun_resumes(
        spark, config, own_server, monkeypatch):
    database = "faults"
    embedded.create_ingest_user(own_server, USER, PASSWORD, database)
    run_source_sql(own_server, database, """
        CREATE TABLE items (id INT PRIMARY KEY, label VARCHAR(40) NOT NULL);
        INSERT INTO items SELECT seq, CONCAT('item ', seq) FROM seq_1_to_3000;
    """)
    faults = replace(config, source=SourceProfile("127.0.0.1", own_server.port, USER, PASSWORD, database))
    batches = []
    original = snapshots.snapshot_batch

    def killed_after_the_first_commit(*args, **kwargs):
        if batches:
            _kill(own_server)
        batches.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(snapshots, "snapshot_batch", killed_after_the_first_commit)
    specs = [TableSpec("items", "items")]
    with pytest.raises(TablesFailed) as failed:
        Pipeline(faults, spark, "run-1").ingest(specs)
    error = failed.value.errors["items"]
    assert isinstance(error, SourceUnavailableError) and error.category == "retriable", repr(error)
    assert error.table == "items" and "run again" in str(error), str(error)
    assert failed.value.results[0].category == "retriable"

    monkeypatch.setattr(snapshots, "snapshot_batch", original)
    embedded.start(own_server)  # the source is back: the next run resumes the snapshot
    Pipeline(faults, spark, "run-2").ingest(specs)
    assert_silver_equals_source(spark, faults, "items")


def test_a_select_privilege_revoked_during_a_snapshot_is_a_configuration_error_naming_grant(
        spark, config, mariadb, monkeypatch):
    user = f"revoked_{uuid.uuid4().hex[:6]}"
    embedded.create_ingest_user(mariadb, user, "pw", config.source.database)
    run_source_sql(mariadb, config.source.database, """
        CREATE TABLE items (id INT PRIMARY KEY, label VARCHAR(40) NOT NULL);
        INSERT INTO items SELECT seq, CONCAT('item ', seq) FROM seq_1_to_3000;
    """)
    revoked = replace(config, source=replace(config.source, user=user, password="pw"))
    original, calls = snapshots.snapshot_batch, []

    def revoked_after_the_first_commit(*args, **kwargs):
        if calls:
            run_source_sql(mariadb, config.source.database,
                           f"REVOKE SELECT ON `{config.source.database}`.* FROM '{user}'@'127.0.0.1';")
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(snapshots, "snapshot_batch", revoked_after_the_first_commit)
    with pytest.raises(TablesFailed) as failed:
        Pipeline(revoked, spark, "run-1").ingest([TableSpec("items", "items")])
    error = failed.value.errors["items"]
    # The chunk tasks' new connections are refused the database (1044), not the login.
    assert isinstance(error, ConfigError) and error.category == "configuration", repr(error)
    assert error.table == "items" and "lack of a privilege (Access denied for user" in str(error)
    assert "GRANT the ingest user SELECT ON the source database" in str(error)


def test_a_binlog_read_without_replication_slave_is_a_configuration_error_naming_grant(config, mariadb):
    user = f"noslave_{uuid.uuid4().hex[:6]}"
    run_source_sql(mariadb, config.source.database, f"""
        CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY 'pw';
        GRANT SELECT ON `{config.source.database}`.* TO '{user}'@'127.0.0.1';
        GRANT BINLOG MONITOR ON *.* TO '{user}'@'127.0.0.1';
    """)
    profile = replace(config.source, user=user, password="pw")
    with connection(config.source) as conn:
        start = current_position(conn)
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET tier = 'gold' WHERE customer_id = 3;")
    with connection(config.source) as conn:
        stop = current_position(conn)
    source = BinlogSource(profile, 5471, config.source.database, {"customers": ("customer_id",)})
    with pytest.raises(ConfigError) as refused:
        list(source.transactions(start, stop))
    assert refused.value.setting == "GRANT" and "REPLICATION SLAVE" in str(refused.value)


def test_a_deleted_silver_data_file_is_repairable_by_rebuilding_silver(spark, config, mariadb):
    Pipeline(config, spark, "run-1").ingest(CUSTOMERS)
    silver_dir = Path(config.table_path("silver", "customers"))
    for data_file in silver_dir.glob("*.parquet"):
        data_file.unlink()
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET tier = 'gold' WHERE customer_id = 3;")
    with pytest.raises(TablesFailed) as failed:
        Pipeline(config, spark, "run-2").ingest(CUSTOMERS)
    error = failed.value.errors["customers"]
    assert isinstance(error, LakeDamagedError) and error.category == "repairable", repr(error)
    assert str(error).startswith("table customers: silver's data file ")
    assert "rebuild silver from bronze with `make rebuild TABLE=customers`" in str(error)
    # The fix the message names works: silver is written anew from bronze, and the next run is exact.
    silver.rebuild(spark, bronze_path=config.table_path("bronze", "customers"), silver_path=str(silver_dir),
                   key=("customer_id",), table="customers")
    Pipeline(config, spark, "run-3").ingest(CUSTOMERS)
    assert_silver_equals_source(spark, config, "customers")
