"""Template answers are validated before anything is generated."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from .conftest import TEMPLATE, run_cookiecutter


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        (
            {"project_slug": "Bad Slug!", "package_name": "ok_pkg"},
            "project_slug 'Bad Slug!' is not a valid folder name",
        ),
        ({"package_name": "1pkg"}, "package_name '1pkg' is not a valid Python package name"),
        ({"package_name": "class"}, "package_name 'class' is not a valid Python package name"),
        ({"package_name": "json"}, "package_name 'json' would shadow an installed module"),
        ({"tables": "orders, 9lives"}, "table name '9lives' is not supported"),
        ({"tables": "orders; drop"}, "table name 'orders;' is not supported"),
        ({"tables": "orders, ORDERS"}, "table 'ORDERS' is listed twice"),
        ({"tables": " "}, "tables is empty"),
        ({"source_port": "70000"}, "source_port 70000 is out of range"),
        ({"chunk_size": "lots"}, "chunk_size 'lots' is not a whole number"),
        ({"chunk_size": "010"}, "chunk_size '010' is not a whole number"),  # YAML would read octal 8
        ({"server_id_start": "1_000"}, "server_id_start '1_000' is not a whole number"),
        ({"project_name": "Two\nLines"}, "project_name holds a line break or control character ('\\n')"),
        # Cookiecutter renders command-line answers: this one arrives as 'Lake {{ x'.
        ({"project_name": "Lake {{ '{{' }} x"}, "project_name holds template markup '{{'"),
        ({"project_name": "Lake \U0001f30a"}, "project_name holds '\\U0001f30a', outside the Basic Multilingual"),
        ({"project_name": "Yes"}, "project_slug 'yes' reads as a boolean or null in YAML"),
        ({"project_name": "Ok Lake", "package_name": "null"}, "package_name 'null' reads as a boolean or null"),
        ({"source_host": "db'host"}, "source_host \"db'host\" cannot be the profiles.yml default"),
        ({"source_user": "ann smith"}, "source_user 'ann smith' cannot be the profiles.yml default"),
        ({"source_database": 'sales"db'}, "source_database 'sales\"db' cannot be the profiles.yml default"),
        ({"lake_root": " "}, "lake_root is empty"),
        ({"spark_master": "local[*]\t"}, "spark_master holds a line break or control character ('\\t')"),
    ],
    ids=lambda value: value.encode("unicode_escape").decode() if isinstance(value, str) else "-".join(value),
)
def test_bad_answers_fail_with_one_error_line_and_leave_nothing_behind(tmp_path, answers, message):
    done = run_cookiecutter(tmp_path, **answers)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, done.stderr
    assert message in errors[0]
    assert list(tmp_path.iterdir()) == []


def test_each_named_table_gets_its_module_and_the_answers_are_saved(generate):
    project = generate(project_name="Sales Lake", tables="invoices, Line_Items")
    assert project.name == "sales-lake"
    modules = sorted(p.name for p in (project / "sales_lake" / "tables").glob("*.py"))
    assert modules == ["__init__.py", "invoices.py", "line_items.py"]
    text = (project / "sales_lake" / "tables" / "line_items.py").read_text()
    assert 'source_table="Line_Items"' in text and 'name="line_items"' in text
    answers = json.loads((project / ".cookiecutter.json").read_text())
    assert answers["tables"] == "invoices, Line_Items" and answers["package_name"] == "sales_lake"
    assert "_output_dir" not in answers and "_repo_dir" not in answers  # this machine's paths


def test_derived_names_follow_the_project_name(generate):
    project = generate(project_name="Data Team_Lake")
    assert project.name == "data-team-lake"
    assert (project / "data_team_lake" / "tables" / "orders.py").exists()
    assert yaml.safe_load((project / "lakehouse_project.yml").read_text())["package"] == "data_team_lake"


def test_the_engine_is_pinned_at_this_templates_commit_or_folder(generate):
    project = generate(project_name="Pinned Lake")
    (pin,) = [line for line in (project / "requirements.txt").read_text().splitlines()
              if line.startswith("lakehouse-engine @ ")]
    dirty = subprocess.run(["git", "-C", str(TEMPLATE), "status", "--porcelain", "--", "engine"],
                           capture_output=True, text=True).stdout.strip()
    if dirty:  # a working copy: the engine folder as it is
        assert pin == f"lakehouse-engine @ {(TEMPLATE / 'engine').as_uri()}"
    else:
        commit = subprocess.run(["git", "-C", str(TEMPLATE), "rev-parse", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        local = TEMPLATE.as_uri().replace("file://", "file://localhost", 1)
        assert pin == f"lakehouse-engine @ git+{local}@{commit}#subdirectory=engine"
        assert json.loads((project / ".cookiecutter.json").read_text())["_template_commit"] == commit


@pytest.mark.parametrize(("template", "expected"), [
    ("gh:acme/lakehouse-template", "git+https://github.com/acme/lakehouse-template.git@c0ffee#subdirectory=engine"),
    ("https://git.example.com/t.git", "git+https://git.example.com/t.git@c0ffee#subdirectory=engine"),
    ("git@github.com:acme/t.git", "git+ssh://git@github.com/acme/t.git@c0ffee#subdirectory=engine"),
])
def test_a_template_given_by_url_pins_the_engine_at_that_url(template, expected):
    hook = (TEMPLATE / "hooks" / "post_gen_project.py").read_text()
    hook = hook.replace('r"""{{ cookiecutter | jsonify }}"""', "'{}'")
    namespace: dict = {"__name__": "hook"}
    exec(compile(hook, "post_gen_project.py", "exec"), namespace)
    assert namespace["engine_source"](template, Path("/t/engine"), "c0ffee") == expected


HOSTILE_NAME = "Ann's \"Lake\" \\ $HOME `id` <b> & Café {x}"
HOSTILE_LAKE = "/data/ann's \"lake\" #1 \\ $HOME"


def test_answers_with_quotes_backslashes_and_dollars_render_into_files_that_parse(generate):
    project = generate(project_name=HOSTILE_NAME, lake_root=HOSTILE_LAKE, spark_master="local[2]")
    assert project.name == "ann-s-lake-home-id-b-cafe-x"
    settings = yaml.safe_load((project / "lakehouse_project.yml").read_text())
    assert settings["lake_root"] == HOSTILE_LAKE and settings["spark"]["master"] == "local[2]"
    assert settings["name"] == project.name and settings["profile"] == "ann_s_lake_home_id_b_cafe_x"
    profiles = yaml.safe_load((project / "profiles.yml").read_text())
    assert set(profiles) == {settings["profile"]}
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    assert pyproject["project"]["description"].startswith(HOSTILE_NAME + ": ")
    for module in project.rglob("*.py"):
        compile(module.read_text(), str(module), "exec")
    assert (project / "README.md").read_text().startswith(f"# {HOSTILE_NAME}\n")
    done = subprocess.run(["make", "-s", "help"], cwd=project, capture_output=True, text=True)
    assert done.returncode == 0 and "make setup " in done.stdout, done.stderr
    assert json.loads((project / ".cookiecutter.json").read_text())["project_name"] == HOSTILE_NAME


def make_targets(project: Path) -> set[str]:
    done = subprocess.run(["make", "-s", "help"], cwd=project, capture_output=True, text=True, check=True)
    return {line.split()[1] for line in done.stdout.splitlines() if line.strip().startswith("make ")}


def test_the_next_steps_name_real_targets_starting_with_the_embedded_source(tmp_path):
    done = run_cookiecutter(tmp_path, project_name="Steps Lake")
    assert done.returncode == 0, done.stderr
    named = re.findall(r"\bmake ([a-z][a-z-]*)", done.stdout)
    assert named[:2] == ["demo", "source-down"] and {"test", "debug", "ingest-all"} <= set(named)
    assert set(named) <= make_targets(tmp_path / "steps-lake")
    (folder,) = re.findall(r"^  cd (\S+)$", done.stdout, re.MULTILINE)
    assert (Path(os.environ.get("PWD", ".")) / folder).resolve() == (tmp_path / "steps-lake").resolve()
    assert "MYSQL_PASSWORD" in done.stdout


def test_the_next_steps_skip_the_embedded_source_for_a_remote_one(tmp_path):
    done = run_cookiecutter(tmp_path, project_name="Remote Lake", source_host="db.internal", source_port="3306")
    assert done.returncode == 0, done.stderr
    named = re.findall(r"\bmake ([a-z][a-z-]*)", done.stdout)
    assert "demo" not in named and {"test", "debug", "ingest-all"} <= set(named)
    assert set(named) <= make_targets(tmp_path / "remote-lake")


def test_a_closed_stdout_does_not_fail_the_generation(tmp_path):
    # As with `cruft diff | head`: the next steps cannot be printed, the project is made anyway.
    command = [sys.executable, "-m", "cookiecutter", "--no-input", str(TEMPLATE), "-o", str(tmp_path),
               "project_name=Quiet Lake"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        proc.stdout.close()
        errors = proc.stderr.read().decode()
    assert proc.returncode == 0, errors
    assert (tmp_path / "quiet-lake" / "quiet_lake" / "tables" / "orders.py").exists()
