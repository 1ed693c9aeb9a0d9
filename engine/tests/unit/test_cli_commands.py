"""The dbt-like commands that need neither the source nor Spark: ``--version``, ``list``,
``validate``, ``status``, ``debug``; global flags after the command; wildcards in ``--select``;
``--log-format json``."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import fixture_project
import pytest

from lakehouse_engine.logs import PROGRESS
from lakehouse_engine.run import cli, parser
from lakehouse_engine.run.runlog import RunLog
from lakehouse_engine.state.checkpoint import Checkpoint, Phase
from lakehouse_engine.state.positions import BinlogPosition

PACKAGE = "acme_lakehouse"
PROJECT_ROOT = fixture_project.PROJECT_ROOT
# The project's own table modules (whatever tables it was generated with, or added since).
TABLES = sorted(p.stem for p in (PROJECT_ROOT / PACKAGE / "tables").glob("*.py") if p.stem != "__init__")
# A three-letter wildcard matching as many of them as any does (``ord*``: order_items, orders).
PREFIX = max((t[:3] for t in TABLES), key=lambda p: (sum(t.startswith(p) for t in TABLES), p))
# The rest holds env_var templates: cookiecutter must leave them alone.

PROFILES = """p:
  target: dev
  outputs:
    dev: {host: 127.0.0.1, port: 1, user: u, password: "{{ env_var('LAKEHOUSE_TEST_PASSWORD') }}",
          database: d, connect_timeout: 2}
    prod: {host: 127.0.0.1, port: 1, user: u, password: x, database: d, lake_root: prod-lake}
"""


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose dev output's password comes from an unset environment variable."""
    monkeypatch.delenv("LAKEHOUSE_TEST_PASSWORD", raising=False)
    (tmp_path / "lakehouse_project.yml").write_text("profile: p\nlake_root: lake\n")
    (tmp_path / "profiles.yml").write_text(PROFILES)
    return tmp_path


def run(root: Path, *args: str) -> int:
    return cli.main(["--project-dir", str(root), "--profiles-dir", str(root), *args], package=PACKAGE)


def out_lines(capsys: pytest.CaptureFixture[str]) -> tuple[list[str], list[str]]:
    captured = capsys.readouterr()
    return ([line for line in captured.out.splitlines() if line.strip()],
            [line for line in captured.err.splitlines() if line.strip()])


def test_version_names_the_engine_version_the_template_commit_and_the_project(capsys):
    import lakehouse_engine

    with pytest.raises(SystemExit) as exited:
        cli.main(["--project-dir", str(PROJECT_ROOT), "--version"], package=PACKAGE)
    assert exited.value.code == 0
    (line,), _ = out_lines(capsys)
    assert line.startswith(f"lakehouse-engine {lakehouse_engine.__version__} (template "), line
    assert f"; project {PACKAGE} 0.1.0; pyspark 4.1." in line and "delta-spark 4.4." in line


def test_list_takes_wildcards_and_needs_no_password(root, capsys):
    assert run(root, "list", "--select", f"{PREFIX}*") == 0
    out, err = out_lines(capsys)
    assert [line.split()[0] for line in out[1:]] == [t for t in TABLES if t.startswith(PREFIX)] and not err


@pytest.mark.parametrize("selector", ["zzz*", "nope", "tag:nothing-has-this"])
def test_a_selector_matching_nothing_is_a_usage_error(root, capsys, selector):
    assert run(root, "list", "--select", selector) == 2
    out, err = out_lines(capsys)
    assert len(err) == 1 and err[0].startswith("ERROR [configuration]: ") and not out[1:]


def test_global_flags_are_accepted_after_the_command(root, capsys):
    assert run(root, "validate", "--target", "prod") == 0
    out, _ = out_lines(capsys)
    assert f"(target prod, lake {root.resolve() / 'prod-lake'})" in out[0]
    # Before the command still works; an unknown target after it is refused, so it was read.
    assert cli.main(["--target", "prod", "validate", "--project-dir", str(root), "--profiles-dir", str(root)],
                    package=PACKAGE) == 0
    assert run(root, "list", "--target", "nope") == 2
    _, err = out_lines(capsys)
    assert "has no output 'nope'" in err[-1]


def test_validate_loads_every_table_module_without_the_password(root, capsys):
    assert run(root, "validate") == 0
    out, err = out_lines(capsys)
    assert out[1].startswith(f"{len(TABLES)} table module(s): {', '.join(TABLES)}")
    assert out[2] == "note: LAKEHOUSE_TEST_PASSWORD is not set; ingest, follow, dq and debug need it"
    assert not err


def test_validate_fails_on_a_broken_project_file(root, capsys):
    (root / "lakehouse_project.yml").write_text("profile: p\n")
    assert run(root, "validate") == 2
    _, err = out_lines(capsys)
    assert err == ["ERROR [configuration]: lakehouse_project.yml: 'lake_root' is required"]


@pytest.mark.parametrize("command", ["ingest", "follow", "dq", "add-table"])
def test_commands_that_read_the_source_need_the_password(root, capsys, command):
    args = [command, "orders"] if command == "add-table" else [command]
    assert run(root, *args) == 2
    _, err = out_lines(capsys)
    assert len(err) == 1 and "LAKEHOUSE_TEST_PASSWORD is not set; export LAKEHOUSE_TEST_PASSWORD=" in err[0]


@pytest.mark.parametrize(("args", "needed"), [
    (["ingest"], True), (["follow"], True), (["dq"], True), (["add-table", "t"], True), (["source", "up"], True),
    (["status"], False), (["list"], False), (["validate"], False), (["debug"], False), (["spark-check"], False),
    (["source", "down"], False), (["source", "changes"], False),
])
def test_only_the_commands_that_read_the_source_require_its_secrets(args, needed):
    # `make setup` runs spark-check before any password is exported; debug reports a missing one.
    assert cli._needs_source(parser.build_parser("prog").parse_args(args)) is needed


def test_debug_without_the_password_fails_the_connection_check(root, capsys):
    assert run(root, "debug") == 1
    out, _ = out_lines(capsys)
    checks = {line.split()[0]: line.split()[1] for line in out[:-1] if not line.startswith("table modules")}
    assert checks["python"] == "ok" and checks["project"] == "ok"
    connection = next(line for line in out if line.startswith("connection"))
    assert connection.split()[1] == "FAIL" and "LAKEHOUSE_TEST_PASSWORD not set" in connection
    assert out[-1] == "1 check(s) failed"


def test_debug_names_an_unreachable_source(root, capsys, monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_TEST_PASSWORD", "x")
    assert run(root, "debug") == 1
    out, _ = out_lines(capsys)
    connection = next(line for line in out if line.startswith("connection"))
    assert "FAIL  cannot reach the source at 127.0.0.1:1" in connection


def test_json_log_format_makes_every_console_line_one_json_object(root, capsys):
    with RunLog(PACKAGE, "json"):
        logging.getLogger("lakehouse").info("orders: %d rows", 3)
    (line,) = capsys.readouterr().err.splitlines()
    assert json.loads(line)["message"] == "orders: 3 rows" and json.loads(line)["level"] == "info"
    assert run(root, "ingest", "--log-format", "json") == 2
    (line,) = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert record["level"] == "error" and record["exit_code"] == 2 and record["category"] == "configuration"
    assert "LAKEHOUSE_TEST_PASSWORD is not set" in record["message"]


@pytest.mark.parametrize("terminal", [True, False])
def test_progress_lines_reach_the_console_only_on_a_terminal_and_the_log_file_always(tmp_path, capsys, terminal,
                                                                                      monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)
    with RunLog(PACKAGE) as run_log:
        run_log.write_to(tmp_path)
        logging.getLogger("lakehouse").info("orders: snapshot chunks 1/9", extra=PROGRESS)
        logging.getLogger("lakehouse").info("orders: done")
    console = capsys.readouterr().err
    assert ("snapshot chunks 1/9" in console) is terminal and "orders: done" in console
    assert "snapshot chunks 1/9" in (tmp_path / "lakehouse.log").read_text()


@pytest.mark.parametrize(("flag", "terminal", "shown"), [("always", False, True), ("never", True, False)])
def test_the_progress_flag_overrides_the_terminal_check(tmp_path, capsys, monkeypatch, flag, terminal, shown):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)
    args = parser.build_parser("lakehouse").parse_args(["status", "--progress", flag])
    with RunLog(PACKAGE, progress=parser.PROGRESS[args.progress]):
        logging.getLogger("lakehouse").info("orders: snapshot chunks 1/9", extra=PROGRESS)
    assert ("snapshot chunks 1/9" in capsys.readouterr().err) is shown


def test_a_bad_log_format_is_a_usage_error(root):
    with pytest.raises(SystemExit) as exited:
        run(root, "status", "--log-format", "xml")
    assert exited.value.code == 2


def bronze_commit(lake: Path, table: str, checkpoint: Checkpoint) -> None:
    log = lake / "bronze" / table / "_delta_log"
    log.mkdir(parents=True)
    info = {"commitInfo": {"timestamp": 1_700_000_000_000, "operation": "WRITE", "userMetadata": checkpoint.to_json()}}
    (log / f"{0:020d}.json").write_text(json.dumps(info) + "\n")


def status_in_a_fresh_python(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``status`` in its own interpreter, which fails if anything imported pyspark (Spark's JVM
    starts only through it)."""
    code = (f"import sys\nfrom lakehouse_engine.run.cli import main\n"
            "args = ['--project-dir', sys.argv[1], '--profiles-dir', sys.argv[1], 'status']\n"
            f"code = main(args, package='{PACKAGE}')\n"
            "assert 'pyspark' not in sys.modules, 'status imported pyspark'\nsys.exit(code)\n")
    return subprocess.run([sys.executable, "-c", code, str(root)], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=120, env=env)


def test_status_reads_the_lake_without_spark_or_password(root):
    position = BinlogPosition("mysql-bin.000003", 1234)
    ingested = TABLES[-1]
    bronze_commit(root / "lake", ingested, Checkpoint(ingested, 4, Phase.BINLOG, "run", position=position))
    (root / "target").mkdir()
    (root / "target" / "run_results.json").write_text(json.dumps({
        "metadata": {"command": "ingest"}, "status": "success", "results": [{"table": ingested, "status": "success"}]}))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT_ROOT)}
    done = status_in_a_fresh_python(root, env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    row = next(line for line in lines if line.split()[:1] == [ingested]).split()
    assert row[:5] == [ingested, "binlog", "4", "-", "mysql-bin.000003:1234"] and row[-1] == "success"
    for other in TABLES[:-1]:
        assert next(line for line in lines if line.split()[:1] == [other]).split()[1:] == ["not", "ingested", "yet"]
    assert ("behind source: not measured, LAKEHOUSE_TEST_PASSWORD is not set (export it to compare with the "
            "source's binlog position)") in lines
    assert lines[-1] == "last run: ingest success"

    # With the password, the source is asked; unreachable, status still answers (exit 0).
    done = status_in_a_fresh_python(root, {**env, "LAKEHOUSE_TEST_PASSWORD": "x"})
    assert done.returncode == 0, done.stderr
    assert any(line.startswith("behind source: not measured, cannot reach the source at 127.0.0.1:1")
               for line in done.stdout.splitlines()), done.stdout

