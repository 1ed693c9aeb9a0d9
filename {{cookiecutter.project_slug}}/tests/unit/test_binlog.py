import pytest

from {{ cookiecutter.package_name }}.engine.binlog import ddl_target

TABLES = ("orders", "order_items")


@pytest.mark.parametrize(
    ("statement", "table"),
    [
        ("ALTER TABLE orders ADD COLUMN x INT", "orders"),
        ("alter online table `demo`.`order_items` drop column y", "order_items"),
        ("TRUNCATE orders", "orders"),
        ("DROP TABLE IF EXISTS `orders`", "orders"),
        ("RENAME TABLE orders TO orders_old", "orders"),
        ("/* app */ ALTER TABLE orders ENGINE=InnoDB", "orders"),
    ],
)
def test_ddl_on_a_watched_table_is_recognised(statement, table):
    assert ddl_target(statement, TABLES) == table


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE orders_archive ADD COLUMN x INT",
        "CREATE TABLE copy LIKE orders",
        "INSERT INTO orders VALUES (1)",
        "ALTER TABLE customers ADD COLUMN orders INT",
    ],
)
def test_other_statements_are_not_schema_changes_of_watched_tables(statement):
    assert ddl_target(statement, TABLES) is None
