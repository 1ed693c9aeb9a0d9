"""Every failure of a command is one line on stderr, its details in target/lakehouse.log, and
for ingest and dq a fresh run_results.json, never an earlier run's "success".

These run ``main`` in this process: each failure happens before a source or Spark is needed.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import fixture_project
import pytest

from lakehouse_engine.run import cli
from lakehouse_engine.run.printer import shown

PROFILES = """p:
  target: dev
  outputs:
    dev: {host: 127.0.0.1, port: 1, user: u, password: x, database: d}
"""
PROJECT = "profile: p\nlake_root: lake\n"


def project(tmp_path: Path, project_yml: str = PROJECT, profiles_yml: str = PROFILES) -> Path:
    """A project folder holding an earlier, successful run_results.json."""
    (tmp_path / "lakehouse_project.yml").write_text(project_yml)
    (tmp_path / "profiles.yml").write_text(profiles_yml)
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "run_results.json").write_text(json.dumps({"status": "success"}))
    return tmp_path


def run(root: Path, *args: str, package: str = fixture_project.PACKAGE) -> int:
    """The command as the project's ``python -m <package>`` runs it (its tables are the demo's)."""
    return cli.main(["--project-dir", str(root), "--profiles-dir", str(root), *args], package=package)


def stderr_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def recorded(root: Path) -> dict:
    return json.loads((root / "target" / "run_results.json").read_text())


def logged(root: Path) -> str:
    return (root / "target" / "lakehouse.log").read_text()


@pytest.mark.parametrize("broken", ["lakehouse_project.yml", "profiles.yml"])
def test_bad_yaml_is_one_line_logged_and_recorded_in_the_default_target(tmp_path, capsys, broken):
    root = project(tmp_path)
    (root / broken).write_text("profile: p\nlake_root: [lake\ndefaults: {}\n")
    assert run(root, "ingest") == 2
    lines = stderr_lines(capsys)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"ERROR [configuration]: {root / broken} is not valid YAML: ")
    assert lines[0].endswith("(line 3, column 9)")
    results = recorded(root)
    assert results["status"] == "error" and "is not valid YAML" in results["message"]
    assert results["metadata"]["command"] == "ingest"
    assert "Traceback" in logged(root) and "ScannerError" not in lines[0]


def test_a_missing_environment_variable_replaces_an_earlier_success(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("LAKEHOUSE_TEST_UNSET", raising=False)
    secret = "{{ env_var('LAKEHOUSE_TEST_UNSET') }}"
    root = project(tmp_path, profiles_yml=PROFILES.replace("password: x", f'password: "{secret}"'))
    assert run(root, "dq") == 2
    assert len(stderr_lines(capsys)) == 1
    assert recorded(root)["status"] == "error" and "LAKEHOUSE_TEST_UNSET" in recorded(root)["message"]
    assert recorded(root)["error"] == {"category": "configuration", "setting": "LAKEHOUSE_TEST_UNSET"}


def test_a_json_error_line_carries_the_setting_to_change_as_a_field(tmp_path, capsys):
    root = project(tmp_path, project_yml=PROJECT + "defaults: {delivery: exactly-once}\n")
    assert run(root, "ingest", "--log-format", "json") == 2
    lines = stderr_lines(capsys)
    assert len(lines) == 1, lines
    line = json.loads(lines[0])
    assert line["level"] == "error" and line["category"] == "configuration" and line["exit_code"] == 2
    assert line["setting"] == "defaults.delivery" and "'exactly-once'" in line["message"]


def table_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module_source: str) -> str:
    """A throwaway project package whose ``tables`` folder holds one module, ``broken.py``."""
    name = f"pkg_{uuid.uuid4().hex[:8]}"
    tables = tmp_path / "code" / name / "tables"
    tables.mkdir(parents=True)
    (tables.parent / "__init__.py").write_text("")
    (tables / "__init__.py").write_text("")
    (tables / "broken.py").write_text(module_source)
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    return name


def test_a_table_module_with_a_syntax_error_is_one_line_naming_its_file(tmp_path, capsys, monkeypatch):
    package = table_package(tmp_path, monkeypatch, "TABLE = (\n  oops oops\n")
    root = project(tmp_path)
    assert run(root, "ingest", package=package) == 2
    lines = stderr_lines(capsys)
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"ERROR [configuration]: table module {package}/tables/broken.py has a syntax error at line "
    )
    assert recorded(root)["status"] == "error"
    assert "SyntaxError" in logged(root)


def test_a_table_module_raising_at_import_is_one_line_naming_its_file(tmp_path, capsys, monkeypatch):
    package = table_package(tmp_path, monkeypatch, "raise RuntimeError('orders needs a setting\\nsecond line')\n")
    root = project(tmp_path)
    assert run(root, "ingest", package=package) == 2
    assert stderr_lines(capsys) == [
        f"ERROR [configuration]: table module {package}/tables/broken.py failed to import: RuntimeError: "
        "orders needs a setting second line; fix it, or move the file out of the tables folder"
    ]
    assert recorded(root)["status"] == "error"


def test_an_unexpected_exception_is_one_internal_error_line_with_details_in_the_log(tmp_path, capsys, monkeypatch):
    def broken_command(*args):
        raise ZeroDivisionError("division by zero\nmore detail")

    monkeypatch.setitem(cli.COMMANDS, "ingest", broken_command)
    root = project(tmp_path)
    assert run(root, "ingest") == 1
    log_file = shown(root / "target" / "lakehouse.log")
    assert stderr_lines(capsys) == [
        f"ERROR: internal error: ZeroDivisionError: division by zero; details in {log_file}"
    ]
    results = recorded(root)
    assert results["status"] == "error" and results["message"].startswith("internal error: ZeroDivisionError")
    assert "Traceback" in logged(root) and "more detail" in logged(root)


def test_ctrl_c_exits_130_with_one_line_and_records_interrupted(tmp_path, capsys, monkeypatch):
    def interrupted_command(*args):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "dq", interrupted_command)
    root = project(tmp_path)
    assert run(root, "dq") == 130
    assert stderr_lines(capsys) == ["ERROR: interrupted; progress up to the last commit is kept"]
    assert recorded(root)["status"] == "interrupted"


def test_a_lake_root_under_a_file_fails_before_the_source_is_contacted(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    root = project(tmp_path, project_yml="profile: p\nlake_root: a-file/lake\n")
    assert run(root, "ingest") == 2
    lake = tmp_path.resolve() / "a-file" / "lake"
    assert stderr_lines(capsys) == [
        f"ERROR [configuration]: lake_root {lake} is not a writable folder (Not a directory); "
        "fix its permissions or lake_root in lakehouse_project.yml"
    ]
    assert recorded(root)["status"] == "error"


def test_a_run_results_file_that_cannot_be_replaced_is_said_on_the_error_line(tmp_path, capsys, monkeypatch):
    def failing_command(*args):
        (root / "target" / "run_results.json").unlink()
        (root / "target" / "run_results.json").mkdir()  # os.replace cannot put a file there
        raise ZeroDivisionError("boom")

    monkeypatch.setitem(cli.COMMANDS, "ingest", failing_command)
    root = project(tmp_path)
    assert run(root, "ingest") == 1
    lines = stderr_lines(capsys)
    assert len(lines) == 1 and lines[0].endswith("(run_results.json not written: Is a directory)"), lines
