"""Columns named as the source allows, which Delta's Parquet naming does not, ingest as they are.

Delta refuses a column name with a space or one of ``,;{}()=`` (and newline, tab) unless the table
maps its columns to physical names (column mapping): such a table's bronze and silver are created
with column mapping, so the snapshot, the binlog, silver's MERGE (in Arrow, and Delta's own for a
silver with a change feed) and dq's checks take it unchanged. A table whose names Delta takes
(``€``, a reserved word, a backtick) keeps plain tables. (Delta's MERGE with a change data feed
fails on a column name holding a backtick, ``packedCdc.`a`b```, a Delta limitation.)"""

from __future__ import annotations

import pytest

from lakehouse_engine.quality.dq import run_checks
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.sink.log import deltalog
from lakehouse_engine.tables import TableSpec

from .helpers import assert_silver_equals_exact_source, run_source_sql

pytestmark = pytest.mark.integration

MAPPING = "delta.columnMapping.mode"
ODD = """CREATE TABLE odd_names (
    `order id` INT NOT NULL PRIMARY KEY, `prix €` DECIMAL(8,2), `select` VARCHAR(20), `a``b` INT,
    `x=y` VARCHAR(10), `(n)` INT, `a,b;c` DATE, `{k}` VARCHAR(5))"""
PLAIN = """CREATE TABLE plain_names (
    `order€id` INT NOT NULL PRIMARY KEY, `select` VARCHAR(20), `a``b` INT, `été` INT)"""


@pytest.mark.parametrize("clustered", [False, True], ids=["arrow-merge", "delta-merge"])
def test_columns_named_as_delta_refuses_ingest_through_column_mapping(spark, config, mariadb, clustered):
    """A clustered silver is merged by Delta's MERGE, any other here in Arrow."""
    db = config.source.database
    specs = [TableSpec("odd_names", "odd_names", cluster_by=("order id",) if clustered else ()),
             TableSpec("plain_names", "plain_names", cluster_by=("order€id",) if clustered else ())]
    run_source_sql(mariadb, db, f"""
        {ODD};
        {PLAIN};
        INSERT INTO odd_names VALUES (1, 9.5, 'a', 1, 'p', 10, '2024-01-01', 'k1'),
                                     (2, 0.5, 'b', 2, 'q', 20, '2024-01-02', 'k2'),
                                     (3, 1.5, 'c', 3, 'r', 30, NULL, NULL);
        INSERT INTO plain_names VALUES (1, 'a', 1, 1), (2, 'b', 2, 2);
    """)
    first = Pipeline(config, spark, "run-1").ingest(specs)
    assert [r.status for r in first] == ["success", "success"], [r.message for r in first]
    run_source_sql(mariadb, db, """
        INSERT INTO odd_names VALUES (4, 4.25, 'd', 4, 's', 40, '2024-01-04', 'k4');
        UPDATE odd_names SET `prix €` = 7, `x=y` = 'changed', `{k}` = 'k' WHERE `order id` = 1;
        UPDATE odd_names SET `order id` = 20 WHERE `order id` = 2;
        DELETE FROM odd_names WHERE `order id` = 3;
        INSERT INTO plain_names VALUES (3, 'c', 3, 3);
        UPDATE plain_names SET `a``b` = 10 WHERE `order€id` = 1;
        DELETE FROM plain_names WHERE `order€id` = 2;
    """)
    second = Pipeline(config, spark, "run-2").ingest(specs)
    assert [r.status for r in second] == ["success", "success"], [r.message for r in second]
    assert all(r.binlog_rows > 0 and r.snapshot_rows == 0 for r in second)

    for table in ("odd_names", "plain_names"):
        assert_silver_equals_exact_source(spark, config, table)
    for layer in ("bronze", "silver"):
        assert deltalog.table_property(spark, config.table_path(layer, "odd_names"), MAPPING) == "name"
        assert deltalog.table_property(spark, config.table_path(layer, "plain_names"), MAPPING) in (None, "none")
    silver = spark.read.format("delta").load(config.table_path("silver", "odd_names"))
    assert silver.columns[:8] == ["order id", "prix €", "select", "a`b", "x=y", "(n)", "a,b;c", "{k}"]

    results = run_checks(config, spark, specs)
    failed = [(r.table, c.expectation, c.observed) for r in results for c in r.checks if not c.success]
    assert not failed, failed


def test_a_column_added_under_a_name_delta_refuses_switches_column_mapping_on(spark, config, mariadb):
    spec = TableSpec("customers", "customers")
    Pipeline(config, spark, "run-1").ingest([spec])
    run_source_sql(mariadb, config.source.database, """
        ALTER TABLE customers ADD COLUMN `loyalty points` INT NULL;
        UPDATE customers SET `loyalty points` = 5 WHERE customer_id = 1;
    """)
    (second,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert second.status == "success", second.message
    assert_silver_equals_exact_source(spark, config, "customers")
    for layer in ("bronze", "silver"):
        assert deltalog.table_property(spark, config.table_path(layer, "customers"), MAPPING) == "name"
