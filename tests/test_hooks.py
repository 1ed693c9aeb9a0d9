"""Template answers are validated before anything is generated."""

from __future__ import annotations

import json

import pytest

from .conftest import run_cookiecutter


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
    ],
    ids=lambda value: value if isinstance(value, str) else "-".join(value),
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


def test_derived_names_follow_the_project_name(generate):
    project = generate(project_name="Data Team_Lake")
    assert project.name == "data-team-lake"
    assert (project / "data_team_lake" / "engine" / "pipeline.py").exists()
