"""Mistakes a user can make get one clear line, a non-zero exit, and lose nothing."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from lakehouse_engine.errors import ConfigError, FatalError, PreflightError
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.source import embedded
from lakehouse_engine.source.connection import connection
from lakehouse_engine.source.introspect import describe_table
from lakehouse_engine.source.preflight import run_preflight
from lakehouse_engine.tables import TableSpec

from .conftest import PASSWORD, PROJECT_ROOT
from .helpers import run_source_sql

pytestmark = pytest.mark.integration


def run_cli(tmp_path: Path, port: int, password: str, *args: str) -> subprocess.CompletedProcess:
    profiles = tmp_path / "profiles"
    profiles.mkdir(exist_ok=True)
    (profiles / "profiles.yml").write_text(
        "acme_lakehouse:\n  target: dev\n  outputs:\n    dev:\n"
        f"      host: 127.0.0.1\n      port: {port}\n      user: ingest\n"
        f"      password: {password}\n      database: demo\n"
    )
    return subprocess.run(
        [sys.executable, "-m", "acme_lakehouse", "--profiles-dir", str(profiles), *args],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )


def test_an_unreachable_source_is_one_line_naming_the_fix(tmp_path):
    done = run_cli(tmp_path, 1, PASSWORD, "ingest")
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "cannot reach the source at 127.0.0.1:1" in lines[0] and "profiles.yml" in lines[0]


def test_a_wrong_password_is_a_configuration_error_without_the_password(tmp_path, mariadb):
    done = run_cli(tmp_path, mariadb.port, "wrong-secret", "ingest")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"ERROR [configuration]: source login refused for ingest@127.0.0.1:{mariadb.port}: check the user in "
        "profiles.yml and the MYSQL_PASSWORD environment variable"
    ]
    assert "wrong-secret" not in done.stderr + done.stdout


def test_an_unknown_table_selection_exits_2(tmp_path, mariadb):
    done = run_cli(tmp_path, mariadb.port, PASSWORD, "ingest", "--select", "nope")
    assert done.returncode == 2
    assert "no table named 'nope'" in done.stderr


def test_a_table_without_a_key_is_refused_with_the_fix(config, mariadb):
    run_source_sql(mariadb, config.source.database, "CREATE TABLE no_key (a INT, b TEXT);")
    with connection(config.source) as conn, pytest.raises(ConfigError, match="no primary key or NOT NULL unique key"):
        describe_table(conn, config.source.database, "no_key")


def test_a_user_without_replication_grants_fails_preflight(config, mariadb):
    run_source_sql(mariadb, config.source.database, f"""
        CREATE USER IF NOT EXISTS 'reader'@'127.0.0.1' IDENTIFIED BY 'pw';
        GRANT SELECT ON `{config.source.database}`.* TO 'reader'@'127.0.0.1';
    """)
    reader = replace(config.source, user="reader", password="pw")
    with connection(reader) as conn, pytest.raises(PreflightError, match="REPLICATION SLAVE") as refused:
        run_preflight(conn)
    assert refused.value.setting == "REPLICATION SLAVE"


def _customers(on_schema_change: str = "evolve") -> list[TableSpec]:
    return [TableSpec("customers", "customers", on_schema_change=on_schema_change)]


@pytest.mark.parametrize("ddl", ["ALTER TABLE customers ADD COLUMN nick VARCHAR(20)", "TRUNCATE TABLE customers"])
def test_a_schema_change_under_the_stop_policy_stops_the_table_with_the_re_snapshot_command(
        spark, config, mariadb, ddl):
    Pipeline(config, spark, "run-1").ingest(_customers("stop"))
    before = spark.read.format("delta").load(config.table_path("silver", "customers")).count()
    change = "UPDATE customers SET tier = 'gold' WHERE customer_id = 3"
    run_source_sql(mariadb, config.source.database, f"{change};\n{ddl};")
    with pytest.raises(FatalError, match="schema change.*TABLE=customers FULL_REFRESH=1"):
        Pipeline(config, spark, "run-2").ingest(_customers("stop"))
    assert spark.read.format("delta").load(config.table_path("silver", "customers")).count() == before


def test_a_purged_binlog_position_names_the_re_snapshot_command(spark, config, mariadb):
    Pipeline(config, spark, "run-1").ingest(_customers())
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET tier = 'gold' WHERE customer_id = 5;")
    Pipeline(config, spark, "run-2").ingest(_customers())  # the checkpoint now sits in the current file
    with embedded.root_connection(mariadb) as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        checkpoint_file = cur.fetchone()[0]
    run_source_sql(mariadb, config.source.database, "FLUSH BINARY LOGS;\nUPDATE customers SET tier = 'silver';")
    with embedded.root_connection(mariadb) as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        current = cur.fetchone()[0]
        # MariaDB silently keeps a file until its binlog checkpoint (crash recovery) has moved past
        # it, which happens asynchronously after the rotation: purge until the file is gone.
        deadline = time.monotonic() + 30
        while True:
            cur.execute(f"PURGE BINARY LOGS TO '{current}'")
            cur.execute("SHOW BINARY LOGS")
            if checkpoint_file not in {row[0] for row in cur.fetchall()}:
                break
            assert time.monotonic() < deadline, f"{checkpoint_file} was not purged within 30 s"
            time.sleep(0.2)
    with pytest.raises(FatalError, match="no longer on the source.*FULL_REFRESH=1") as stopped:
        Pipeline(config, spark, "run-3").ingest(_customers())
    error = stopped.value.errors["customers"]
    assert error.table == "customers" and str(error.position).startswith(f"{checkpoint_file}:")
    assert stopped.value.results[0].error_position == error.position


def test_a_configured_key_the_source_does_not_enforce_as_unique_is_refused(config, mariadb):
    run_source_sql(mariadb, config.source.database, """
        CREATE TABLE visits (id INT NOT NULL PRIMARY KEY, visitor INT NOT NULL, page VARCHAR(20) NOT NULL,
                             KEY ix_visitor (visitor));
        INSERT INTO visits SELECT seq, seq % 10, CONCAT('p', seq) FROM seq_1_to_100;
    """)
    with connection(config.source) as conn, pytest.raises(ConfigError) as excinfo:
        describe_table(conn, config.source.database, "visits", ("visitor",))
    message = str(excinfo.value)
    assert f"table {config.source.database}.visits: key (visitor) is not unique on the source" in message
    assert "PRIMARY (id)" in message and "add a UNIQUE index on (visitor)" in message


def test_a_configured_unique_not_null_key_is_accepted(config, mariadb):
    run_source_sql(mariadb, config.source.database, """
        CREATE TABLE accounts (id INT NOT NULL PRIMARY KEY, code CHAR(8) NOT NULL, UNIQUE KEY uq_code (code));
    """)
    with connection(config.source) as conn:
        assert describe_table(conn, config.source.database, "accounts", ("code",)).key == ("code",)
        assert describe_table(conn, config.source.database, "order_items", ("line_no", "order_id")).key == (
            "line_no", "order_id")
