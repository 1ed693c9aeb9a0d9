"""The binlog reader never guesses: table ids, DDL placement and row images it cannot be sure of
stop the table with one clear line, and every table it can be sure of goes on."""

from __future__ import annotations

import pytest

from lakehouse_engine.run.pipeline import Pipeline, TablesFailed
from lakehouse_engine.source import embedded
from lakehouse_engine.tables import TableSpec

from .helpers import assert_silver_equals_source, run_source_sql

pytestmark = pytest.mark.integration


def _specs(*names: str) -> list[TableSpec]:
    return [TableSpec(name, name) for name in names]


def _silver_count(spark, config, table: str) -> int:
    return spark.read.format("delta").load(config.table_path("silver", table)).count()


def _failure(excinfo: pytest.ExceptionInfo[TablesFailed], table: str) -> str:
    (result,) = [r for r in excinfo.value.results if r.table == table]
    assert result.status == "error"
    assert "\n" not in result.message, "a failure is one line"
    return result.message


def _root(mariadb: embedded.EmbeddedServer, sql: str, database: str | None = None) -> None:
    """Each statement on one root connection, so SET SESSION applies to the statements after it."""
    with embedded.root_connection(mariadb, database) as conn, conn.cursor() as cur:
        for statement in embedded.split_sql(sql):
            cur.execute(statement)


# -- table ids ---------------------------------------------------------------------------------


def test_table_ids_reused_after_a_server_restart_never_route_rows_to_the_wrong_table(spark, config, mariadb):
    """Table ids are handed out afresh after a restart: the same id then names another table.
    Rows of a table we do not capture must never be decoded as the captured one's."""
    db = config.source.database
    run_source_sql(mariadb, db, """
        CREATE TABLE watched (id INT PRIMARY KEY, note VARCHAR(40));
        CREATE TABLE bystander (id INT PRIMARY KEY, note VARCHAR(40));
        INSERT INTO watched VALUES (1, 'one'), (2, 'two');
    """)
    Pipeline(config, spark, "run-1").ingest(_specs("watched"))
    # After each restart the first table opened gets the same id: first `watched`, then `bystander`.
    embedded.stop(mariadb)
    embedded.start(mariadb)
    run_source_sql(mariadb, db, "INSERT INTO watched VALUES (3, 'three');")
    embedded.stop(mariadb)
    embedded.start(mariadb)
    run_source_sql(mariadb, db, """
        INSERT INTO bystander VALUES (100, 'not yours'), (101, 'not yours either');
        UPDATE watched SET note = 'uno' WHERE id = 1;
    """)
    Pipeline(config, spark, "run-2").ingest(_specs("watched"))
    assert_silver_equals_source(spark, config, "watched")


# -- DDL placement -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ddl",
    ["TRUNCATE TABLE {db}.customers", "ALTER TABLE {db}.customers ADD COLUMN nick VARCHAR(20)"],
    ids=["truncate", "alter"],
)
def test_ddl_on_a_watched_table_from_another_default_database_is_applied_there(spark, config, mariadb, ddl):
    db = config.source.database
    Pipeline(config, spark, "run-1").ingest(_specs("customers"))
    run_source_sql(mariadb, db, "UPDATE customers SET tier = 'gold' WHERE customer_id = 3;")
    # USE another database, then change the watched table by its qualified name.
    _root(mariadb, ddl.format(db=db) + f";\nUPDATE {db}.customers SET tier = 'silver' WHERE customer_id = 4",
          database="mysql")
    (result,) = Pipeline(config, spark, "run-2").ingest(_specs("customers"))
    assert result.status == "success", result.message
    assert_silver_equals_source(spark, config, "customers")


@pytest.mark.parametrize(
    "ddl",
    [
        # Same columns, no rows: only the DDL event tells that every row is gone.
        "CREATE TABLE {db}.twin LIKE {db}.customers; CREATE OR REPLACE TABLE {db}.customers LIKE {db}.twin",
        "ALTER TABLE {db}.customers ADD COLUMN nick VARCHAR(20)",
    ],
    ids=["create-or-replace", "alter-with-stop-policy"],
)
def test_ddl_on_a_watched_table_from_another_default_database_stops_the_table(spark, config, mariadb, ddl):
    db = config.source.database
    specs = [TableSpec("customers", "customers", on_schema_change="stop" if "ALTER" in ddl else "evolve")]
    Pipeline(config, spark, "run-1").ingest(specs)
    before = _silver_count(spark, config, "customers")
    run_source_sql(mariadb, db, "UPDATE customers SET tier = 'gold' WHERE customer_id = 3;")
    _root(mariadb, ddl.format(db=db).replace("; ", ";\n"), database="mysql")
    with pytest.raises(TablesFailed) as excinfo:
        Pipeline(config, spark, "run-2").ingest(specs)
    message = _failure(excinfo, "customers")
    assert "schema change" in message and "make ingest TABLE=customers FULL_REFRESH=1" in message
    assert _silver_count(spark, config, "customers") == before


def test_truncating_a_same_named_table_in_another_database_leaves_the_watched_one_running(spark, config, mariadb):
    db = config.source.database
    _root(mariadb, "CREATE DATABASE IF NOT EXISTS elsewhere;\n"
                   "CREATE TABLE IF NOT EXISTS elsewhere.customers (id INT PRIMARY KEY)")
    Pipeline(config, spark, "run-1").ingest(_specs("customers"))
    # The default database is the watched one, the statement names the other.
    _root(mariadb, "TRUNCATE TABLE elsewhere.customers;\nUPDATE customers SET tier = 'gold' WHERE customer_id = 4",
          database=db)
    (result,) = Pipeline(config, spark, "run-2").ingest(_specs("customers"))
    assert result.status == "success" and result.binlog_rows == 1
    assert_silver_equals_source(spark, config, "customers")


def test_a_column_type_change_is_one_line_naming_the_column_never_a_merge_traceback(spark, config, mariadb):
    db = config.source.database
    Pipeline(config, spark, "run-1").ingest(_specs("customers"))
    # Issued from another default database, as the tester did: rows with the new type follow.
    _root(mariadb, f"ALTER TABLE {db}.customers MODIFY customer_id BIGINT NOT NULL;\n"
                   f"UPDATE {db}.customers SET tier = 'gold' WHERE customer_id = 5", database="mysql")
    with pytest.raises(TablesFailed) as excinfo:
        Pipeline(config, spark, "run-2").ingest(_specs("customers"))
    message = _failure(excinfo, "customers")
    assert "customer_id" in message and "FULL_REFRESH=1" in message
    assert "Exception" not in message and "at org." not in message


# -- session-level binlog settings -------------------------------------------------------------


@pytest.mark.parametrize(
    ("session", "reason"),
    [
        ("SET SESSION binlog_row_image = 'MINIMAL'", "binlog_row_image"),
        ("SET SESSION binlog_row_image = 'NOBLOB'", "binlog_row_image"),  # orders.note is TEXT
        ("SET SESSION binlog_format = 'STATEMENT'", "binlog_format=ROW"),
    ],
    ids=["minimal-image", "noblob-image", "statement-format"],
)
def test_a_session_that_logs_incomplete_changes_stops_the_table_and_spares_the_others(
    spark, config, mariadb, session, reason
):
    db = config.source.database
    Pipeline(config, spark, "run-1").ingest(_specs("orders", "products"))
    before = _silver_count(spark, config, "orders")
    run_source_sql(mariadb, db, "UPDATE products SET stock = stock + 1 WHERE price > 10;")
    _root(mariadb, f"{session};\n"
                   "UPDATE orders SET status = 'shipped' WHERE order_id % 10 = 1;\n"
                   "DELETE FROM orders WHERE order_id % 10 = 2;", database=db)
    with pytest.raises(TablesFailed) as excinfo:
        Pipeline(config, spark, "run-2").ingest(_specs("orders", "products"))
    assert reason in _failure(excinfo, "orders")
    assert _silver_count(spark, config, "orders") == before
    (products,) = [r for r in excinfo.value.results if r.table == "products"]
    assert products.status == "success" and products.binlog_rows > 0
    assert_silver_equals_source(spark, config, "products")


# -- one table's failure -----------------------------------------------------------------------


def test_missing_keyless_and_changed_tables_fail_alone_while_the_others_finish(spark, config, mariadb):
    db = config.source.database
    run_source_sql(mariadb, db, "CREATE TABLE no_key (a INT, b TEXT);")
    specs = _specs("customers", "products", "no_key", "ghost")
    with pytest.raises(TablesFailed) as excinfo:
        Pipeline(config, spark, "run-1").ingest(specs)
    assert "no primary key" in _failure(excinfo, "no_key")
    assert "does not exist" in _failure(excinfo, "ghost")
    run_source_sql(mariadb, db, """
        UPDATE products SET stock = stock + 1 WHERE price > 10;
        ALTER TABLE customers DROP PRIMARY KEY, ADD PRIMARY KEY (customer_id, email);
    """)
    with pytest.raises(TablesFailed) as excinfo:
        Pipeline(config, spark, "run-2").ingest(specs)
    statuses = {r.table: r.status for r in excinfo.value.results}
    assert statuses == {"customers": "error", "products": "success", "no_key": "error", "ghost": "error"}
    assert_silver_equals_source(spark, config, "products")
