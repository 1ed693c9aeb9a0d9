import ast

import pytest

from lakehouse_engine.errors import ConfigError
from lakehouse_engine.run.scaffold import TableModuleSpec, render_table_module
from lakehouse_engine.source.cascades import (
    ACTIONS,
    KEYS_SQL,
    RULES_SQL,
    cascades_from_rows,
    refusal,
    rules_from_ddl,
)
from lakehouse_engine.tables import CascadePolicy, TableSpec

# Rows as KEYS_SQL returns them: constraint, parent schema, parent table, child column, parent
# column; one per column, by constraint and position. RULES: (DELETE_RULE, UPDATE_RULE) by constraint.
KEYS = [
    ("fk_items_order", "shop", "orders", "order_id", "id"),
    ("fk_items_product", "catalog", "products", "sku", "sku"),
    ("fk_items_product", "catalog", "products", "region", "region"),
    ("fk_items_rate", "shop", "rates", "rate_code", "code"),
    ("fk_items_seller", "shop", "sellers", "seller_id", "id"),
]
RULES = {"fk_items_order": ("CASCADE", "RESTRICT"), "fk_items_product": ("SET NULL", "CASCADE"),
         "fk_items_rate": ("RESTRICT", "SET NULL"), "fk_items_seller": ("RESTRICT", "NO ACTION")}


def test_detection_rows_become_one_cascade_per_changing_constraint_with_its_columns_in_key_order():
    found = cascades_from_rows("shop", "order_items", KEYS, RULES)
    assert [(c.constraint, c.columns, c.parent_columns) for c in found] == [
        ("fk_items_order", ("order_id",), ("id",)),
        ("fk_items_product", ("sku", "region"), ("sku", "region")),
        ("fk_items_rate", ("rate_code",), ("code",)),
    ]  # fk_items_seller only refuses (RESTRICT, NO ACTION): the binlog misses nothing
    assert [c.describe() for c in found] == [
        "foreign key fk_items_order ON DELETE CASCADE from orders",
        "foreign key fk_items_product ON DELETE SET NULL ON UPDATE CASCADE from catalog.products",
        "foreign key fk_items_rate ON UPDATE SET NULL from rates",
    ]
    assert [c.consequence for c in found] == [
        "silver would keep deleted rows",
        "silver would keep references to deleted rows",
        "silver would keep old key values",
    ]


def test_rules_are_read_from_show_create_table_whatever_the_identifiers_hold():
    ddl = (
        "CREATE TABLE `odd``) ON DELETE CASCADE` (\n"
        "  `id` int(11) NOT NULL COMMENT 'an odd ` backquote, a quote \\' and a '' quote',\n"
        "  `p` int(11) DEFAULT NULL COMMENT 'CONSTRAINT `x` FOREIGN KEY (`p`) REFERENCES `t` (`id`) "
        "ON DELETE CASCADE',\n"
        "  PRIMARY KEY (`id`),\n"
        "  CONSTRAINT `fk_plain` FOREIGN KEY (`p`) REFERENCES `parent` (`id`),\n"
        "  CONSTRAINT `fk ``x``) ON UPDATE CASCADE` FOREIGN KEY (`p`, `id`) REFERENCES `db`.`t (a)` (`a`, `b`) "
        "ON DELETE SET NULL ON UPDATE CASCADE,\n"
        "  CONSTRAINT `fk_na` FOREIGN KEY (`p`) REFERENCES `parent` (`id`) ON DELETE NO ACTION\n"
        ") ENGINE=InnoDB"
    )
    assert rules_from_ddl(ddl) == {
        "fk_plain": ("RESTRICT", "RESTRICT"),
        "fk `x`) ON UPDATE CASCADE": ("SET NULL", "CASCADE"),
        "fk_na": ("NO ACTION", "RESTRICT"),
    }


def test_the_detection_queries_bind_schema_and_table_so_the_server_opens_only_that_table():
    for sql in (KEYS_SQL, RULES_SQL):
        assert sql.count("%s") == 2 and "SCHEMA = %s AND TABLE_NAME = %s" in sql
    assert "ORDER BY CONSTRAINT_NAME, ORDINAL_POSITION" in KEYS_SQL
    assert set(ACTIONS) == {"CASCADE", "SET NULL", "SET DEFAULT"}


def test_the_refusal_is_one_line_naming_table_constraint_parent_and_fix():
    error = refusal("order_items", cascades_from_rows("shop", "order_items", KEYS, RULES))
    assert str(error) == (
        "table order_items: foreign key fk_items_order ON DELETE CASCADE from orders (and 2 more such foreign "
        "key(s)): the binlog does not carry cascaded changes, so silver would keep deleted rows; set "
        "on_cascade='apply' in its table module to derive them from the parent's changes, or drop the cascade "
        "on the source (then re-snapshot with `make ingest TABLE=order_items FULL_REFRESH=1` if it may have fired "
        "since the table was first ingested), or set on_cascade='ignore' to accept stale rows"
    )
    assert (error.category, error.table, error.setting) == ("configuration", "order_items", "on_cascade")
    assert "\n" not in str(error)


def test_on_cascade_defaults_to_refuse_and_takes_ignore_as_text():
    assert TableSpec("t", "t").on_cascade is CascadePolicy.REFUSE
    assert TableSpec("t", "t", on_cascade="ignore").on_cascade is CascadePolicy.IGNORE


def test_a_misspelt_on_cascade_is_refused_naming_the_table():
    expected = r"table 't': on_cascade is 'ignored'; use one of 'refuse', 'ignore', 'apply'$"
    with pytest.raises(ConfigError, match=expected):
        TableSpec("t", "t", on_cascade="ignored")


def test_on_cascade_apply_is_a_policy_of_its_own():
    assert TableSpec("t", "t", on_cascade="apply").on_cascade is CascadePolicy.APPLY


def test_scaffolded_modules_set_on_cascade_and_list_the_cascading_foreign_keys():
    plain = render_table_module(TableModuleSpec("items", key=("id",)))
    assert 'on_cascade="refuse"' in plain and "Cascading foreign keys" not in plain
    text = render_table_module(TableModuleSpec("items", key=("id",), columns=(("id", "int"),), cascades=(
        "foreign key fk_items_order ON DELETE CASCADE from orders",)))
    ast.parse(text)
    assert "#   foreign key fk_items_order ON DELETE CASCADE from orders" in text
