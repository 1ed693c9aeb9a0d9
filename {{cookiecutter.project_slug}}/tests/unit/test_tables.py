import ast

import pytest

from {{ cookiecutter.package_name }} import tables
from {{ cookiecutter.package_name }}.engine.errors import ConfigError
from {{ cookiecutter.package_name }}.engine.run.scaffold import TableModuleSpec, render_table_module
from {{ cookiecutter.package_name }}.engine.tables import TableSpec, discover, select


def specs() -> dict[str, TableSpec]:
    return {
        "orders": TableSpec("orders", "orders", tags=("finance",)),
        "customers": TableSpec("customers", "customers", tags=("crm",)),
        "refunds": TableSpec("refunds", "refunds", tags=("finance",)),
    }


def test_every_generated_table_module_is_discovered():
    found = discover(tables)
    assert found, "the template should have generated at least one table module"
    assert all(spec.source_table for spec in found.values())


def test_selection_by_name_tag_and_exclusion():
    assert [s.name for s in select(specs(), ["orders"])] == ["orders"]
    assert [s.name for s in select(specs(), ["tag:finance"], ["refunds"])] == ["orders"]
    assert len(select(specs())) == 3


def test_an_unknown_table_is_a_configuration_error_naming_the_fix():
    with pytest.raises(ConfigError, match="no table named 'nope'.*add-table"):
        select(specs(), ["nope"])


def test_an_empty_selection_is_an_error():
    with pytest.raises(ConfigError, match="matches no table"):
        select(specs(), ["tag:none"])


def test_scaffolded_modules_are_valid_python_with_the_key():
    text = render_table_module(TableModuleSpec("Orders", key=("id",), columns=(("id", "int"),)))
    ast.parse(text)
    assert 'name="orders"' in text and "key=('id',)" in text and "#   id: int" in text
