"""Bad settings are one configuration line (exit 2) naming the setting and the form it takes,
never a Python error; and a secret in a setting never reaches the console, the log or
run_results.json, even when the setting is wrong."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import fixture_project
import pytest

from lakehouse_engine.cdc.capture import server_id
from lakehouse_engine.config.project import load_project
from lakehouse_engine.run import cli

# The rest holds env_var templates and literal braces: cookiecutter must leave them alone.

PROFILES = """p:
  target: dev
  outputs:
    dev: {host: 127.0.0.1, port: 1, user: u, password: x, database: d}
"""


def project(tmp_path: Path, extra: str = "", profiles: str = PROFILES) -> Path:
    (tmp_path / "lakehouse_project.yml").write_text("profile: p\nlake_root: lake\n" + extra)
    (tmp_path / "profiles.yml").write_text(profiles)
    return tmp_path


def run(root: Path, *args: str) -> int:
    return cli.main(["--project-dir", str(root), "--profiles-dir", str(root), *args])


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def recorded_error(root: Path) -> dict:
    return json.loads((root / "target" / "run_results.json").read_text())["error"]


@pytest.mark.parametrize("value", ["5400", "'5400'", "[5499, 5400]", "[5400]", "[0, 10]", "[5400, x]",
                                   "[5400.5, 5499]"])
def test_a_server_id_range_that_is_not_two_ordered_numbers_is_a_configuration_error(tmp_path, capsys, value):
    root = project(tmp_path, f"binlog: {{server_id_range: {value}}}\n")
    assert run(root, "ingest") == 2
    line = error_line(capsys)
    assert line.startswith("ERROR [configuration]: lakehouse_project.yml: binlog.server_id_range is "), line
    assert line.endswith("use two ordered whole numbers from 1 to 4294967295, lowest first, e.g. [5400, 5499]")
    assert recorded_error(root) == {"category": "configuration", "setting": "binlog.server_id_range"}


def test_a_reversed_server_id_pair_still_gives_an_id_of_the_range():
    config = replace(load_project(project_root(), env={"MYSQL_PASSWORD": "x"}), server_ids=(5400, 5399))
    assert server_id(config) in (5399, 5400)


def project_root() -> Path:
    return fixture_project.PROJECT_ROOT


@pytest.mark.parametrize(("extra", "setting", "text"), [
    ("spark: {conf: 5}\n", "spark.conf", "spark.conf must be a mapping of Spark settings to values "
                                         "(e.g. spark.driver.memory: 4g), not a number"),
    ("spark: {conf: {spark.driver.memory: {a: 1}}}\n", "spark.conf.spark.driver.memory",
     "spark.conf 'spark.driver.memory' must be one value (text or a number), not a mapping"),
    ("spark: 5\n", "spark", "'spark' must be a mapping of settings, not a number"),
    ("defaults: [1]\n", "defaults", "'defaults' must be a mapping of settings, not a list"),
    ("defaults: {even_distribution: 3}\n", "defaults.even_distribution",
     "defaults.even_distribution is 3; use two ordered numbers, lowest first, e.g. [0.05, 1000.0]"),
    ("quality: {source_readers: 3}\n", "quality.source_readers", "quality.source_readers is 3; use 1 or 2"),
    ("quality: {source_readers: two}\n", "quality.source_readers",
     "quality.source_readers is 'two'; it must be a whole number"),
])
def test_a_setting_of_the_wrong_shape_is_a_configuration_error_naming_it(tmp_path, capsys, extra, setting, text):
    root = project(tmp_path, extra)
    assert run(root, "ingest") == 2
    assert error_line(capsys) == f"ERROR [configuration]: lakehouse_project.yml: {text}"
    assert recorded_error(root) == {"category": "configuration", "setting": setting}


@pytest.mark.parametrize("secret", ["pa{{ss", "pa{{ zorblat }}ss", "x{{ 'a' + }}y"])
def test_a_literal_password_that_is_no_valid_template_never_shows_in_the_output_or_the_log(
        tmp_path, capsys, secret):
    root = project(tmp_path, profiles=PROFILES.replace("password: x", f"password: {json.dumps(secret)}"))
    assert run(root, "ingest") == 2
    out = capsys.readouterr()
    lines = [line for line in out.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        f"ERROR [configuration]: {root / 'profiles.yml'}: password is not a valid template"), lines
    assert "write a literal '{{' as {{ '{{' }}" in lines[0]
    written = (root / "target" / "lakehouse.log").read_text() + (root / "target" / "run_results.json").read_text()
    for shown in (out.out, out.err, written):
        assert secret not in shown and "pa{{" not in shown and "zorblat" not in shown and "'a' +" not in shown
    assert recorded_error(root) == {"category": "configuration", "setting": "password"}

