"""Driver and file-system errors get their failure class and the fix, never a raw Python error:
a lost source is retriable, a refused privilege is configuration (naming GRANT), a full disk is
retriable, a read-only lake is configuration, a missing data file is repairable with the command
that rebuilds it. Messages name the real table and the real command, no placeholder."""

from __future__ import annotations

import errno

import pymysql
import pytest

from lakehouse_engine.cdc.tablecapture import as_table_error
from lakehouse_engine.config.selection import select_tables
from lakehouse_engine.errors import (
    TABLE,
    ConfigError,
    FatalError,
    LakeDamagedError,
    LakeUnavailableError,
    SourceUnavailableError,
)
from lakehouse_engine.failures import storage_error
from lakehouse_engine.run import cli
from lakehouse_engine.run.printer import print_results
from lakehouse_engine.snapshot.reader import task_error
from lakehouse_engine.tables import TableSpec

LAKE = "/data/lake"
DENIED = "SELECT command denied to user 'ingest'@'127.0.0.1' for table `demo`.`orders`"


@pytest.mark.parametrize("exc", [
    pymysql.err.OperationalError(2013, "Lost connection to server during query"),
    pymysql.err.OperationalError(2006, "Server has gone away"),
    pymysql.err.InterfaceError(0, ""),
])
def test_a_connection_lost_mid_run_is_retriable_naming_the_table_and_to_run_again_once_the_source_is_back(exc):
    error = as_table_error(exc, "orders", LAKE)
    assert isinstance(error, SourceUnavailableError) and error.category == "retriable"
    assert error.table == "orders"
    assert str(error).startswith("table orders: lost the connection to the source (")
    assert str(error).endswith("): run again once the source is back; it resumes from the last commit")


@pytest.mark.parametrize("exc", [
    pymysql.err.OperationalError(1142, DENIED),
    pymysql.err.OperationalError(1227, "Access denied; you need (at least one of) the REPLICATION SLAVE "
                                       "privilege(s) for this operation"),
])
def test_a_privilege_refused_mid_run_is_a_configuration_error_naming_grant_not_a_retry(exc):
    error = as_table_error(exc, "orders", LAKE)
    assert isinstance(error, ConfigError) and error.category == "configuration"
    assert (error.table, error.setting) == ("orders", "GRANT")
    assert str(error).startswith(
        f"table orders: the source refused a statement for lack of a privilege ({exc.args[0]} ")
    assert "GRANT the ingest user SELECT ON the source database and REPLICATION SLAVE" in str(error)


def test_a_privilege_refused_inside_a_snapshot_task_is_a_configuration_error_too():
    traceback = ("Traceback (most recent call last):\n  File \"reader.py\", line 1, in stage_chunk\n"
                 f"pymysql.err.OperationalError: (1142, \"{DENIED}\")\n")
    error = task_error(RuntimeError(traceback), "orders")
    assert isinstance(error, ConfigError) and error.setting == "GRANT" and DENIED in str(error)


def test_a_source_killed_under_a_snapshot_task_is_retriable_naming_the_table():
    traceback = "pymysql.err.OperationalError: (2013, 'Lost connection to server during query')"
    error = task_error(RuntimeError(traceback), "orders")
    assert isinstance(error, SourceUnavailableError)
    assert str(error) == ("table orders: lost the connection to the source (2013 Lost connection to server during "
                          "query): run again once the source is back; it resumes from the last commit")


def test_a_full_disk_is_retriable_with_the_fix():
    error = as_table_error(OSError(errno.ENOSPC, "No space left on device", f"{LAKE}/bronze/orders/x.json"),
                           "orders", LAKE)
    assert isinstance(error, LakeUnavailableError) and error.category == "retriable" and error.table == "orders"
    assert str(error).startswith(f"table orders: no space left on the device writing {LAKE}/bronze/orders/x.json")
    assert "free space there" in str(error) and str(error).endswith("then run again; it resumes from the last commit")
    spark = storage_error(("IOException: No space left on device",), "table orders", "bronze.append")
    assert isinstance(spark, LakeUnavailableError) and "free space there" in str(spark)


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_a_read_only_lake_is_a_configuration_error_naming_the_folder_to_make_writable(code):
    path = f"{LAKE}/bronze/orders/_delta_log/00000000000000000003.json"
    error = as_table_error(OSError(code, "Read-only file system", path), "orders", LAKE)
    assert isinstance(error, ConfigError) and error.setting == "lake_root" and error.table == "orders"
    assert str(error).startswith(f"table orders: cannot write {path} (Read-only file system; in ")
    assert "make it writable for this user" in str(error)


SILVER_FILE = f"file:{LAKE}/silver/orders/part-00000-1f.c000.snappy.parquet"
BRONZE_FILE = f"{LAKE}/bronze/orders/part-00001-2e.c000.snappy.parquet"


def test_a_missing_silver_data_file_is_repairable_by_rebuilding_silver():
    causes = (f"SparkException: [FAILED_READ_FILE.FILE_NOT_EXIST] Error while reading file {SILVER_FILE}. "
              f"[DELTA_FILE_NOT_FOUND_DETAILED] File {SILVER_FILE} referenced in the transaction log cannot "
              "be found.",)
    error = storage_error(causes, "table orders", "silver.apply")
    assert isinstance(error, LakeDamagedError) and error.category == "repairable" and error.table == "orders"
    assert str(error) == (f"table orders: silver's data file {SILVER_FILE} is missing (deleted outside the engine; "
                          "in silver.apply): rebuild silver from bronze with `make rebuild TABLE=orders`, "
                          "then run again")


def test_a_missing_bronze_data_file_is_repairable_by_a_re_snapshot():
    exc = FileNotFoundError(f"Failed to open local file '{BRONZE_FILE}'. Detail: [errno 2] No such file or directory")
    error = as_table_error(exc, "orders", LAKE)
    assert isinstance(error, LakeDamagedError) and error.category == "repairable"
    assert f"bronze's data file {BRONZE_FILE} is missing" in str(error)
    assert str(error).endswith("re-snapshot the table with `make ingest TABLE=orders FULL_REFRESH=1`")


def test_an_error_the_binlog_stream_shares_names_each_table_in_its_own_copy():
    shared = FatalError(f"binlog position b.000001:4 is gone: re-snapshot with `make ingest TABLE={TABLE} "
                        "FULL_REFRESH=1`", position="b.000001:4")
    first, second = as_table_error(shared, "orders"), as_table_error(shared, "customers")
    assert str(first).endswith("`make ingest TABLE=orders FULL_REFRESH=1`") and first.table == "orders"
    assert str(second).endswith("`make ingest TABLE=customers FULL_REFRESH=1`") and second.table == "customers"
    assert isinstance(second, FatalError) and second.position == "b.000001:4"
    lost = SourceUnavailableError("lost the binlog connection: run again")
    assert (as_table_error(lost, "orders").table, as_table_error(lost, "customers").table) == ("orders", "customers")


def test_an_unknown_table_names_the_projects_own_add_table_command():
    with pytest.raises(ConfigError) as unknown:
        select_tables({"orders": TableSpec("orders", "orders")}, ["ordres"], package="acme_lakehouse")
    assert "add it with `python -m acme_lakehouse add-table ordres` (a table without a primary key also " \
           "needs --key col1,col2)" in str(unknown.value)
    with pytest.raises(ConfigError) as unknown:
        select_tables({"orders": TableSpec("orders", "orders")}, ["ordres"])
    assert "add it with `lakehouse add-table ordres`" in str(unknown.value)


def test_a_failed_tables_line_names_the_table_when_its_error_did_not(capsys):
    from lakehouse_engine.run.results import RunStatus, TableResult

    results = [TableResult("orders", RunStatus.ERROR, message="cannot reach the source at h:1 (x): start it",
                           category="retriable"),
               TableResult("customers", RunStatus.ERROR, message="table customers: gone", category="fatal")]
    print_results(results)
    assert capsys.readouterr().err.splitlines() == [
        "ERROR [retriable]: table orders: cannot reach the source at h:1 (x): start it",
        "ERROR [fatal]: table customers: gone",
    ]


def test_a_source_lost_outside_any_table_is_one_retriable_line_not_an_internal_error(tmp_path, capsys, monkeypatch):
    def lost(*args):
        raise pymysql.err.OperationalError(2013, "Lost connection to server during query")

    monkeypatch.setitem(cli.COMMANDS, "status", lost)
    (tmp_path / "lakehouse_project.yml").write_text("profile: p\nlake_root: lake\n")
    (tmp_path / "profiles.yml").write_text(
        "p:\n  target: dev\n  outputs:\n    dev: {host: h, port: 1, user: u, password: x, database: d}\n")
    assert cli.main(["--project-dir", str(tmp_path), "--profiles-dir", str(tmp_path), "status"],
                    package="acme_lakehouse") == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "ERROR [retriable]: status: lost the connection to the source (2013 Lost connection to server during "
        "query): run again once the source is back; it resumes from the last commit; details in "), lines


def _refused_by_a_gone_jvm() -> OSError:
    """The error py4j's own client raises once Spark's JVM has exited: its socket is refused."""
    import socket
    from types import SimpleNamespace

    from py4j.clientserver import ClientServerConnection, JavaParameters, PythonParameters

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    gone = ClientServerConnection(JavaParameters(port=port), PythonParameters(), SimpleNamespace(pool=None), None)
    with pytest.raises(OSError) as refused:
        gone.connect_to_java_server()
    return refused.value


def test_spark_s_jvm_gone_is_named_with_spark_log_and_driver_memory_not_read_as_the_source_refusing():
    # A task out of heap makes Spark's local JVM exit; the tables after it got py4j's
    # ConnectionRefusedError and read as "Connection refused", like the source refusing.
    error = as_table_error(_refused_by_a_gone_jvm(), "orders", LAKE)
    assert str(error).startswith("table orders failed: Spark's JVM stopped (ConnectionRefusedError: ")
    assert "spark.log" in str(error) and "spark.driver.memory" in str(error)
    assert "source" not in str(error).split("(")[0]
    assert error.table == "orders"


def test_an_os_error_outside_py4j_stays_a_lake_error():
    error = as_table_error(ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "orders", LAKE)
    assert "Spark's JVM" not in str(error)


def test_only_a_broken_gateway_reads_as_a_stopped_jvm_not_a_method_the_jvm_lacks():
    from py4j.protocol import Py4JError, Py4JNetworkError

    from lakehouse_engine.failures import spark_failure

    lacking = spark_failure(Py4JError("An error occurred while calling o42.merge. Trace:\n"
                                      "py4j.Py4JException: Method merge([]) does not exist"))
    assert lacking is not None and "JVM stopped" not in lacking.root
    gone = spark_failure(Py4JNetworkError("Answer from Java side is empty"))
    assert gone is not None and gone.root.startswith("Spark's JVM stopped (Answer from Java side is empty)")
