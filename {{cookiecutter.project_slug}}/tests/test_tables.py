"""This project's table modules: each one loads and declares one table, and the engine's
`lakehouse validate` and `list` accept them all (no source, no Spark)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from lakehouse_engine.run import cli
from lakehouse_engine.tables import TableSpec, discover

import {{ cookiecutter.package_name }}.tables as tables_package

PROJECT = Path(__file__).resolve().parents[1]
PACKAGE = "{{ cookiecutter.package_name }}"
MODULES = sorted(p.stem for p in (PROJECT / PACKAGE / "tables").glob("*.py") if not p.stem.startswith("_"))


@pytest.mark.parametrize("module", MODULES)
def test_each_table_module_declares_a_table_with_a_source_table_and_a_usable_key(module):
    spec = importlib.import_module(f"{PACKAGE}.tables.{module}").TABLE
    assert isinstance(spec, TableSpec)
    assert spec.name and spec.source_table
    # None: the source table's primary key (the engine refuses a table without one at its first run).
    assert spec.key is None or (len(spec.key) > 0 and all(isinstance(c, str) and c for c in spec.key))


def test_every_module_is_discovered_once_under_its_own_name():
    specs = discover(tables_package)
    assert len(specs) == len(MODULES) > 0


def lakehouse(capsys, *args: str) -> tuple[int, list[str]]:
    code = cli.main(["--project-dir", str(PROJECT), "--profiles-dir", str(PROJECT), *args], package=PACKAGE)
    return code, capsys.readouterr().out.splitlines()


def test_the_engine_validates_the_configuration_and_lists_every_table(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("MYSQL_PASSWORD", "unused")  # validate and list never connect
    monkeypatch.chdir(tmp_path)  # nothing is written into the checkout
    code, _ = lakehouse(capsys, "validate")
    assert code == 0
    code, out = lakehouse(capsys, "list")
    assert code == 0
    listed = {line.split()[0] for line in out[1:] if line.strip()}
    assert listed == set(discover(tables_package))
