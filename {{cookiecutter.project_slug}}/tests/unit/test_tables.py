import ast

from {{ cookiecutter.package_name }} import tables
from {{ cookiecutter.package_name }}.engine.run.scaffold import TableModuleSpec, render_table_module
from {{ cookiecutter.package_name }}.engine.tables import discover


def test_every_generated_table_module_is_discovered():
    found = discover(tables)
    assert found, "the template should have generated at least one table module"
    assert all(spec.source_table for spec in found.values())


def test_scaffolded_modules_are_valid_python_with_the_key():
    text = render_table_module(TableModuleSpec("Orders", key=("id",), columns=(("id", "int"),)))
    ast.parse(text)
    assert 'name="orders"' in text and "key=('id',)" in text and "#   id: int" in text
