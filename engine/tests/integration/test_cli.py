"""The commands a user runs: ingest and dq through the CLI, with run_results.json, and every way
they can fail: one line on stderr, the details in target/lakehouse.log, the outcome recorded."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, NumberFormatException

from lakehouse_engine.errors import ConfigError, IngestError
from lakehouse_engine.failures import translate
from lakehouse_engine.run.locks import table_locks
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.sink import bronze
from lakehouse_engine.sink import paths as lake
from lakehouse_engine.state.checkpoint import Checkpoint, Phase
from lakehouse_engine.tables import TableSpec

from .conftest import PASSWORD, PROJECT_ROOT, USER
from .helpers import assert_silver_equals_source, run_source_sql

pytestmark = pytest.mark.integration

# Our progress lines ("12:00:01 customers: snapshot ..."); anything else on stderr is an error line.
PROGRESS = re.compile(r"^\d\d:\d\d:\d\d (?!(ERROR|WARN|INFO) )")


def cli_command(config, *args: str, lake_root: str | None = None) -> tuple[list[str], dict[str, str]]:
    """Write the project and profile files for ``config``; return the command line and its env."""
    profiles = config.target_dir / "profiles"
    profiles.mkdir(parents=True, exist_ok=True)
    source = config.source
    (profiles / "profiles.yml").write_text(
        "acme_lakehouse:\n  target: dev\n  outputs:\n    dev:\n"
        f"      host: {source.host}\n      port: {source.port}\n      user: {USER}\n"
        f"      password: {PASSWORD}\n      database: {source.database}\n"
    )
    project = project_dir(config)
    project.mkdir(exist_ok=True)
    (project / "lakehouse_project.yml").write_text(
        (PROJECT_ROOT / "lakehouse_project.yml").read_text().replace(
            "lake_root:", f"lake_root: {lake_root or config.lake_root} #")
    )
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    command = [sys.executable, "-m", "acme_lakehouse", "--project-dir", str(project),
               "--profiles-dir", str(profiles), *args]
    return command, env


def cli(config, *args: str, lake_root: str | None = None, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    command, env = cli_command(config, *args, lake_root=lake_root)
    return subprocess.run([*prefix, *command], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=600, env=env)


def cli_without_java(config, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """The CLI with no Java to be found: had the run started a JVM, Spark's start would fail it.
    Returns the run and its environment."""
    command, env = cli_command(config, *args)
    no_java = tmp_path / "bin"
    no_java.mkdir(exist_ok=True)
    env = {**{k: v for k, v in env.items() if k != "JAVA_HOME"}, "PATH": str(no_java)}
    return subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, env=env), env


def project_dir(config) -> Path:
    return config.target_dir / "project"


def run_results(config) -> dict:
    return json.loads((project_dir(config) / "target" / "run_results.json").read_text())


def log_text(config) -> str:
    return (project_dir(config) / "target" / "lakehouse.log").read_text()


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip() and not PROGRESS.match(line)]


def stale_success(config) -> None:
    """A run_results.json from an earlier, successful run: a failed run must replace it."""
    target = project_dir(config) / "target"
    target.mkdir(parents=True, exist_ok=True)
    (target / "run_results.json").write_text(json.dumps({"status": "success", "message": "earlier run"}))


def as_unprivileged_root() -> list[str]:
    """A command prefix under which permission bits hold.

    Tests run as root, whose CAP_DAC_OVERRIDE writes through a chmod-ed folder. setpriv drops
    that capability (and DAC_READ_SEARCH) from the bounding set, so the CLI runs as root (its
    Spark jar cache and target folder stay readable) but obeys the folder's mode like any user.
    """
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: a chmod-ed folder cannot stop root")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]


def test_ingest_and_dq_commands_record_their_results(spark, config):
    done = cli(config, "ingest", "--select", "customers", "products")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "customers" in done.stdout and "products" in done.stdout
    results = run_results(config)
    assert results["status"] == "success" and results["metadata"]["command"] == "ingest"
    assert {r["table"]: r["snapshot_rows"] for r in results["results"]} == {"customers": 400, "products": 300}
    for table in ("customers", "products"):
        assert_silver_equals_source(spark, config, table)

    done = cli(config, "dq", "--select", "customers")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "customers                PASS" in done.stdout
    results = run_results(config)
    assert results["status"] == "success" and results["results"][0]["success"] is True


def test_an_ingest_with_nothing_new_answers_without_spark_and_one_with_a_change_reads_it(config, mariadb, tmp_path):
    done = cli(config, "ingest", "--select", "customers")
    assert done.returncode == 0, done.stderr[-3000:]
    idle, env = cli_without_java(config, tmp_path, "ingest", "--select", "customers")
    assert idle.returncode == 0, idle.stderr[-3000:]
    assert "customers                ok     snapshot rows        0  binlog rows       0" in idle.stdout
    assert run_results(config)["status"] == "success"
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET tier = 'gold' WHERE customer_id = 4")
    changed = cli(config, "ingest", "--select", "customers")
    assert changed.returncode == 0, changed.stderr[-3000:]
    assert "binlog rows       1" in changed.stdout
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET tier = 'silver' WHERE customer_id = 4")
    refused = subprocess.run(cli_command(config, "ingest", "--select", "customers")[0], cwd=PROJECT_ROOT,
                             capture_output=True, text=True, timeout=600, env=env)
    assert refused.returncode == 2 and "Java 17 is needed" in refused.stderr  # the check is real: work needs Spark


def test_an_ingest_with_only_binlog_to_read_takes_what_its_reader_read_while_spark_started(spark, config, mariadb):
    done = cli(config, "ingest", "--select", "customers")
    assert done.returncode == 0, done.stderr[-3000:]
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET tier = 'gold' WHERE customer_id = 4")
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET tier = 'bronze' WHERE customer_id = 5")
    changed = cli(config, "ingest", "--select", "customers")
    assert changed.returncode == 0, changed.stderr[-3000:]
    assert "binlog rows       2" in changed.stdout
    this_run = log_text(config).rsplit("binlog: reading", 1)[1]
    assert "was read ahead while Spark started" in this_run
    assert_silver_equals_source(spark, config, "customers")


def test_a_table_held_by_another_run_is_skipped_as_busy_and_the_others_are_ingested(spark, config, tmp_path):
    with table_locks(project_dir(config) / "target" / "locks", ["customers"]):  # a run in progress
        done = cli(config, "ingest", "--select", "customers", "products", "--results-file", str(tmp_path / "mine.json"))
    assert done.returncode == 1, done.stderr[-3000:]  # retriable: the busy table is tried next time
    assert "customers                SKIPPED  another run holds it: try again later" in done.stdout
    assert "products                 ok     snapshot rows      300" in done.stdout
    (line,) = error_lines(done.stderr)
    assert line.startswith("ERROR [busy]: table customers is being ingested by another run"), line
    recorded = run_results(config)
    assert {r["table"]: r["status"] for r in recorded["results"]} == {"customers": "skipped-busy",
                                                                       "products": "success"}
    assert "1 skipped: another run holds them" in recorded["message"]
    assert json.loads((tmp_path / "mine.json").read_text()) == recorded  # the scheduler task's own copy
    assert_silver_equals_source(spark, config, "products")


def test_a_follow_refused_by_a_busy_table_leaves_the_holders_run_results(config):
    stale_success(config)
    before = run_results(config)
    with table_locks(project_dir(config) / "target" / "locks", ["customers"], "ingest"):
        done = cli(config, "follow", "--select", "customers", "--max-cycles", "1")
    assert done.returncode == 1, done.stderr[-3000:]
    (line,) = error_lines(done.stderr)
    assert line.startswith("ERROR [busy]: table customers is being ingested by another run"), line
    assert run_results(config) == before


def test_a_read_only_lake_is_one_configuration_line_recorded_in_run_results(spark, config, mariadb):
    Pipeline(config, spark, "earlier-run").ingest([TableSpec("customers", "customers")])
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET full_name = 'Changed' WHERE customer_id = 1")
    stale_success(config)
    prefix = as_unprivileged_root()
    subprocess.run(["chmod", "-R", "a-w", config.lake_root], check=True)
    try:
        done = cli(config, "ingest", "--select", "customers", prefix=tuple(prefix))
    finally:
        subprocess.run(["chmod", "-R", "u+w", config.lake_root], check=True)
    assert done.returncode == 2, done.stderr[-3000:]
    assert error_lines(done.stderr) == [
        f"ERROR [configuration]: lake_root {config.lake_root} is not a writable folder (Permission denied); "
        "fix its permissions or lake_root in lakehouse_project.yml"
    ]
    results = run_results(config)
    assert results["status"] == "error" and "is not a writable folder" in results["message"]
    assert "Traceback" in log_text(config) and "PermissionError" in log_text(config)


def test_dq_of_a_local_lake_passes_without_a_jvm_and_hands_a_difference_to_spark(spark, config, tmp_path):
    Pipeline(config, spark, "earlier-run").ingest([TableSpec("customers", "customers"), TableSpec("orders", "orders")])
    checked, env = cli_without_java(config, tmp_path, "dq", "--select", "customers", "orders")
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-3000:] + log_text(config)[-3000:]
    assert "customers                PASS" in checked.stdout and "hold the source's values" in checked.stdout
    assert [r["success"] for r in run_results(config)["results"]] == [True, True]
    silver = config.table_path("silver", "customers")
    spark.sql(f"UPDATE delta.`{silver}` SET full_name = 'tampered' WHERE customer_id = 7")
    refused = subprocess.run(cli_command(config, "dq", "--select", "customers", "orders")[0], cwd=PROJECT_ROOT,
                             capture_output=True, text=True, timeout=600, env=env)
    # The difference needs Spark, which cannot start: that table fails, naming the fix; the other
    # table's check stands.
    assert refused.returncode == 1, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert "customers                FAIL" in refused.stdout and "orders                   PASS" in refused.stdout
    assert "it needs Spark (silver's sums differ" in refused.stdout and "install openjdk-17" in refused.stdout
    found = cli(config, "dq", "--select", "customers")
    assert found.returncode == 1 and "customer_id=7: other values" in found.stdout, found.stdout[-3000:]


def test_dq_checks_a_read_only_lake_which_an_ingest_refuses(spark, config):
    # dq only reads the lake: a checker with read-only rights (or a read-only mount) runs it.
    Pipeline(config, spark, "earlier-run").ingest([TableSpec("customers", "customers")])
    prefix = tuple(as_unprivileged_root())
    subprocess.run(["chmod", "-R", "a-w", config.lake_root], check=True)
    try:
        refused = cli(config, "ingest", "--select", "customers", prefix=prefix)
        checked = cli(config, "dq", "--select", "customers", prefix=prefix)
    finally:
        subprocess.run(["chmod", "-R", "u+w", config.lake_root], check=True)
    assert refused.returncode == 2 and "is not a writable folder" in refused.stderr  # the lake is read-only
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-3000:]
    assert "customers                PASS" in checked.stdout and "hold the source's values" in checked.stdout


def test_a_lake_root_that_cannot_be_a_folder_is_one_configuration_line(config, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    stale_success(config)
    done = cli(config, "ingest", "--select", "customers", lake_root=str(blocker / "lake"))
    assert done.returncode == 2, done.stderr[-3000:]
    assert error_lines(done.stderr) == [
        f"ERROR [configuration]: lake_root {blocker / 'lake'} is not a writable folder (Not a directory); "
        "fix its permissions or lake_root in lakehouse_project.yml"
    ]
    assert run_results(config)["status"] == "error"


def test_an_s3a_lake_root_without_hadoop_aws_names_the_package_to_add(config):
    stale_success(config)
    done = cli(config, "ingest", "--select", "customers", lake_root="s3a://no-such-bucket/lake")
    assert done.returncode == 2, done.stderr[-3000:]
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith("ERROR [configuration]: lake_root s3a://no-such-bucket/lake needs the S3A filesystem")
    assert re.search(r"'org\.apache\.hadoop:hadoop-aws:\d+\.\d+\.\d+'", lines[0]) and "spark.jars.packages" in lines[0]
    results = run_results(config)
    assert results["status"] == "error" and "hadoop-aws" in results["message"]
    assert "ClassNotFoundException" in log_text(config)  # the JVM's own words stay in the log


def test_ctrl_c_during_ingest_stops_at_once_and_records_interrupted(config):
    stale_success(config)
    command, env = cli_command(config, "ingest", "--progress", "always")  # stderr is a pipe here
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        seen = _read_until(process, "snapshot", timeout=300)
        time.sleep(0.5)  # into the Spark job that reads the chunks
        process.send_signal(signal.SIGINT)
        started = time.monotonic()
        _, rest = process.communicate(timeout=120)
        stopped_in = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
    stderr = seen + rest
    assert process.returncode == 130, stderr[-3000:]
    assert error_lines(stderr) == ["ERROR: interrupted; progress up to the last commit is kept"]
    assert stopped_in < 60
    results = run_results(config)
    assert results["status"] == "interrupted"
    assert results["message"] == "interrupted; progress up to the last commit is kept"


def _read_until(process: subprocess.Popen, marker: str, timeout: float) -> str:
    """Read the process's stderr until a line holds ``marker``; return what was read."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], 1.0)
        if not ready:
            continue
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line)
        if marker in line:
            return "".join(seen)
    raise AssertionError(f"no line with {marker!r} on stderr: {''.join(seen)[-3000:]}")


def test_spark_errors_translate_to_one_line_naming_operation_and_root_cause(spark, tmp_path):
    with pytest.raises(AnalysisException) as raised:
        bronze.read_batches(spark, str(tmp_path / "missing"), 0, 1).collect()
    error = translate(raised.value, command="ingest", lake_root=str(tmp_path))
    assert type(error) is IngestError
    message = str(error)
    assert message.startswith("ingest failed in bronze.read_batches: ") and str(tmp_path / "missing") in message
    assert "\n" not in message and "JVM stacktrace" not in message

    with pytest.raises(NumberFormatException) as raised:  # pyspark's copy of a Java exception
        spark._jvm.java.lang.Integer.parseInt("not a number")
    assert str(translate(raised.value, command="dq", lake_root=None)) == (
        'dq failed: NumberFormatException: For input string: "not a number"'
    )

    with pytest.raises(Py4JJavaError) as raised:  # one pyspark leaves as it is
        spark._jvm.java.io.FileInputStream(str(tmp_path / "missing"))
    assert str(translate(raised.value, command="dq", lake_root=None)) == (
        f"dq failed, Spark call FileInputStream: FileNotFoundException: {tmp_path / 'missing'} "
        "(No such file or directory)"
    )


def test_a_spark_write_under_a_file_is_a_configuration_error_naming_the_lake(spark, tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    root = str(tmp_path / "a-file" / "lake")
    with pytest.raises(Py4JJavaError) as raised:
        bronze.append(spark.range(1), f"{root}/bronze/t", Checkpoint("t", 1, Phase.BINLOG, "run"))
    error = translate(raised.value, command="ingest", lake_root=root)
    assert isinstance(error, ConfigError)
    assert str(error).startswith(f"cannot write lake_root {root} (in bronze.append): ")
    assert str(error).endswith(f"{tmp_path / 'a-file'}; make the lake folder writable for this user, "
                               "or change lake_root in lakehouse_project.yml")
    assert "\n" not in str(error)


def test_the_lake_filesystem_check_raises_what_the_cli_translates_for_s3a(spark):
    with pytest.raises(Py4JJavaError) as raised:
        lake.check_filesystem(spark, "s3a://no-such-bucket/lake")
    error = translate(raised.value, command="ingest", lake_root="s3a://no-such-bucket/lake")
    assert isinstance(error, ConfigError) and "hadoop-aws" in str(error)


def test_one_failed_table_is_recorded_alone_and_the_run_exits_1(config, mariadb):
    first = cli(config, "ingest", "--select", "customers", "products")
    assert first.returncode == 0, first.stderr
    run_source_sql(mariadb, config.source.database, """
        UPDATE products SET stock = stock + 1 WHERE price > 10;
        ALTER TABLE customers DROP PRIMARY KEY, ADD PRIMARY KEY (customer_id, email);
    """)
    done = cli(config, "ingest", "--select", "customers", "products")
    assert done.returncode == 1, done.stderr
    (line,) = error_lines(done.stderr)
    assert line.startswith("ERROR [fatal]: table customers: schema change") and "FULL_REFRESH=1" in line
    results = run_results(config)
    assert results["status"] == "error"
    statuses = {r["table"]: (r["status"], r["binlog_rows"]) for r in results["results"]}
    assert statuses["customers"][0] == "error" and statuses["products"][0] == "success"
    assert statuses["products"][1] > 0
    assert "table customers: schema change" in log_text(config)


def with_password_from_environment(config, prod_lake: Path | None = None) -> None:
    """Rewrite the CLI's profile: the password from MYSQL_PASSWORD, and a prod output on the
    same source with a lake of its own."""
    profiles = config.target_dir / "profiles" / "profiles.yml"
    text = profiles.read_text().replace(
        f"password: {PASSWORD}", "password: \"{{ env_var('MYSQL_PASSWORD') }}\"")
    if prod_lake is not None:
        dev = text[text.index("    dev:\n"):]
        text += dev.replace("    dev:\n", "    prod:\n") + f"      lake_root: {prod_lake}\n"
    profiles.write_text(text)


def cli_env(config, *args: str, password: str | None, prod_lake: Path) -> subprocess.CompletedProcess:
    command, env = cli_command(config, *args)
    with_password_from_environment(config, prod_lake)
    env.pop("MYSQL_PASSWORD", None)
    if password is not None:
        env["MYSQL_PASSWORD"] = password
    return subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, env=env)


def table_line(stdout: str, table: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith(f"{table} "))


def test_status_and_debug_on_a_real_source_and_a_prod_target_with_its_own_lake(config, mariadb, tmp_path):
    prod_lake = tmp_path / "prod-lake"
    done = cli_env(config, "ingest", "--select", "customers", password=PASSWORD, prod_lake=prod_lake)
    assert done.returncode == 0, done.stderr[-3000:]

    # No password: status answers from the lake alone, and says how to see the lag.
    started = time.monotonic()
    done = cli_env(config, "status", password=None, prod_lake=prod_lake)
    assert done.returncode == 0, done.stderr[-3000:]
    assert time.monotonic() - started < 20  # no JVM
    customers = table_line(done.stdout, "customers")
    # All chunks read: the phase stays "snapshot" until a binlog batch is committed.
    assert re.match(r"customers +(snapshot 1/1 chunks|binlog) +\d+ +\d+ +mysql-bin\.\d+:\d+ +- +\d+s ago +success$",
                    customers), done.stdout
    assert table_line(done.stdout, "orders").split()[1:] == ["not", "ingested", "yet"]
    assert "behind source: not measured, MYSQL_PASSWORD is not set" in done.stdout
    assert "last run: ingest success" in done.stdout

    # With it: the lag in binlog bytes, growing with the source's writes.
    done = cli_env(config, "status", "--select", "cust*", password=PASSWORD, prod_lake=prod_lake)
    assert " 0 bytes, 0s " in table_line(done.stdout, "customers"), done.stdout
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET full_name = 'Lagging' WHERE customer_id < 50")
    done = cli_env(config, "status", "--select", "cust*", password=PASSWORD, prod_lake=prod_lake)
    assert done.returncode == 0, done.stderr[-3000:]
    lag = re.search(r" ([\d,]+) bytes, ", table_line(done.stdout, "customers"))
    assert lag and int(lag.group(1).replace(",", "")) > 0, done.stdout
    assert "source binlog head: mysql-bin." in done.stdout
    # And in time: since the moment the table last read up to the head (recorded by a catch-up).
    assert cli_env(config, "ingest", "--select", "customers", password=PASSWORD, prod_lake=prod_lake).returncode == 0
    done = cli_env(config, "status", "--select", "cust*", password=PASSWORD, prod_lake=prod_lake)
    assert " 0 bytes, 0s " in table_line(done.stdout, "customers"), done.stdout
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET full_name = 'Later' WHERE customer_id < 50")
    done = cli_env(config, "status", "--select", "cust*", password=PASSWORD, prod_lake=prod_lake)
    seconds = re.search(r" [\d,]+ bytes, (\d+)s ", table_line(done.stdout, "customers"))
    assert seconds and 0 < int(seconds.group(1)) < 300, done.stdout

    done = cli_env(config, "debug", password=PASSWORD, prod_lake=prod_lake)
    assert done.returncode == 0, done.stdout
    for check in ("connection", "binlog settings", "grants", "binlog position", "java"):
        assert re.search(rf"^{check} +ok ", done.stdout, re.M), (check, done.stdout)
    done = cli_env(config, "debug", password="wrong", prod_lake=prod_lake)
    assert done.returncode == 1
    assert re.search(r"^connection +FAIL +source login refused", done.stdout, re.M), done.stdout

    # prod: its own lake and target folder; dev's checkpoint is not used (a fresh snapshot).
    done = cli_env(config, "status", "--target", "prod", password=None, prod_lake=prod_lake)
    assert done.returncode == 0, done.stderr[-3000:]
    assert table_line(done.stdout, "customers").split()[1:] == ["not", "ingested", "yet"]
    dev_before = run_results(config)
    done = cli_env(config, "ingest", "--select", "customers", "--target", "prod", password=PASSWORD,
                   prod_lake=prod_lake)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (prod_lake / "bronze" / "customers" / "_delta_log").is_dir()
    prod_results = json.loads((project_dir(config) / "target" / "prod" / "run_results.json").read_text())
    assert prod_results["results"][0]["snapshot_rows"] == 400
    assert run_results(config) == dev_before  # dev's own record is untouched
    # prod's quality results and Data Docs go to target/prod/gx, never into dev's gx/.
    dev_gx = sorted(p for p in (project_dir(config) / "gx").rglob("*") if p.is_file())
    done = cli_env(config, "dq", "--select", "customers", "--target", "prod", password=PASSWORD, prod_lake=prod_lake)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert (project_dir(config) / "target" / "prod" / "gx" / "uncommitted" / "data_docs" / "local_site"
            / "index.html").is_file()
    assert sorted(p for p in (project_dir(config) / "gx").rglob("*") if p.is_file()) == dev_gx
