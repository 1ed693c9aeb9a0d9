"""dq's value check never reports a difference that is not there: for table shapes whose silver
holds the source's rows exactly, every key bucket reconciles and repair finds nothing to do.

Two causes made correct tables fail: the source's bucket query grouped by an alias (``b``) that
MariaDB resolves to a column of that name first (the reported tables with generated columns and
with 8 MiB LONGBLOBs both had one), and ZEROFILL numbers, whose text in SQL keeps the padding."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from lakehouse_engine.quality.dq import run_checks
from lakehouse_engine.quality.expectations import VALUES_CHECK
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.run.repair import repair_table
from lakehouse_engine.run.results import RunStatus
from lakehouse_engine.tables import TableSpec

from .helpers import assert_silver_equals_exact_source, run_source_sql

pytestmark = pytest.mark.integration


def failed_checks(result) -> list:
    return [c for c in result.checks if not c.success]


def values_observed(result) -> str:
    return next(c.observed for c in result.checks if c.expectation == VALUES_CHECK)


def ingest_twice(spark, config, mariadb, table: str, after_snapshot: str) -> Pipeline:
    """Snapshot ``table``, run ``after_snapshot`` on the source, catch up through the binlog;
    silver then holds the source's rows exactly (checked here, independently of dq)."""
    specs = [TableSpec(table, table)]
    Pipeline(config, spark, "run-1").ingest(specs)
    run_source_sql(mariadb, config.source.database, after_snapshot)
    pipeline = Pipeline(config, spark, "run-2")
    pipeline.ingest(specs)
    assert_silver_equals_exact_source(spark, config, table)
    return pipeline


def assert_values_pass_and_nothing_to_repair(spark, config, pipeline: Pipeline, table: str) -> None:
    spec = TableSpec(table, table)
    (result,) = run_checks(config, spark, [spec])
    assert result.success, failed_checks(result)
    assert values_observed(result).endswith("the source's values"), values_observed(result)
    repaired = repair_table(config, spark, pipeline.ingest, spec, "repair-1")
    assert (repaired.status, repaired.keys_found, repaired.rows_reread) == (RunStatus.SUCCESS, 0, 0), repaired


def test_generated_and_invisible_columns_pass_the_value_check_and_leave_nothing_to_repair(spark, config, mariadb):
    # The reported shape: VIRTUAL and STORED generated columns (one named b) and an INVISIBLE one.
    run_source_sql(mariadb, config.source.database, """
        CREATE TABLE gen (id INT NOT NULL PRIMARY KEY, a INT, b INT AS (a * 2) VIRTUAL,
            s VARCHAR(20) AS (CONCAT('s', a)) STORED, hid INT INVISIBLE DEFAULT 7);
        INSERT INTO gen (id, a, hid) VALUES (1, 10, 1), (2, 10, 2), (3, NULL, 3);
    """)
    pipeline = ingest_twice(spark, config, mariadb, "gen", """
        INSERT INTO gen (id, a) VALUES (4, 40);
        UPDATE gen SET a = 11, hid = 9 WHERE id = 1;
    """)
    assert_values_pass_and_nothing_to_repair(spark, config, pipeline, "gen")


def test_8mib_longblobs_pass_the_value_check(spark, config, mariadb):
    # The reported shape: a LONGBLOB column b of 8 MiB values, from the snapshot and the binlog.
    run_source_sql(mariadb, config.source.database, """
        CREATE TABLE blobs (id INT NOT NULL PRIMARY KEY, b LONGBLOB);
        INSERT INTO blobs VALUES (1, REPEAT(x'01', 8388608)), (2, REPEAT(x'0102', 4194304)),
            (3, REPEAT(x'02', 8388608));
    """)
    pipeline = ingest_twice(spark, config, mariadb, "blobs", "INSERT INTO blobs VALUES (4, REPEAT(x'03', 8388608));")
    assert_values_pass_and_nothing_to_repair(spark, config, pipeline, "blobs")


def test_zerofill_numbers_of_a_full_types_table_pass_the_value_check(spark, config, mariadb):
    # The shape of the public full_types fixtures: a SERIAL key, ZEROFILL integers, decimals and
    # floats, REAL, BOOLEAN, BIT, DECIMAL(65,1), JSON, ENUM, SET, VARCHAR(0).
    run_source_sql(mariadb, config.source.database, """
        CREATE TABLE zf (id SERIAL, tz TINYINT UNSIGNED ZEROFILL, iz INT(11) ZEROFILL,
            bz BIGINT UNSIGNED ZEROFILL, dz DECIMAL(8,4) UNSIGNED ZEROFILL, d0z DECIMAL(6,0) ZEROFILL,
            fz FLOAT UNSIGNED ZEROFILL, wz DOUBLE UNSIGNED ZEROFILL, r REAL, bl BOOLEAN, t1 TINYINT(1), bt BIT,
            d65 DECIMAL(65,1), js JSON, e ENUM('red','white') DEFAULT 'red', st SET('a','b'), v0 VARCHAR(0));
        INSERT INTO zf VALUES (DEFAULT, 5, 3, 18446744073709551615, 12.5, 7, 123.104, 404.4445, 123.102, TRUE, 1,
            0, 34567892.1, '{\\n "key1": "value1"\\n}', 'red', 'a,b,a', '');
    """)
    pipeline = ingest_twice(spark, config, mariadb, "zf", """
        INSERT INTO zf VALUES (DEFAULT, 0, 4, 1, 0.5, 0, 1.5, 2.5, 3.5, FALSE, 0, 1, -1.5, '[]', 'white', 'b', '');
        UPDATE zf SET tz = 255, dz = 9999.9999 WHERE id = 1;
    """)
    assert_values_pass_and_nothing_to_repair(spark, config, pipeline, "zf")


# Every name the checks' own queries give a column (source and Spark side, buckets, drilled
# keys, key uniqueness): as column names, none may change what is compared.
ALIAS_COLUMNS = ("h", "k", "n", "x", "g", "v0", "count", "_g0", "_k0", "_rows", "_group", "_n", "_s0", "_c0")


def test_columns_named_like_the_checks_aliases_neither_fail_a_correct_table_nor_hide_a_wrong_row(
        spark, config, mariadb):
    def columns(names) -> str:
        return ", ".join(f"`{name}` INT" for name in names)

    def row(names) -> str:
        return ", ".join(str(i) for i, _ in enumerate(names))

    beside_k = [name for name in ALIAS_COLUMNS if name != "k"]
    # An integer key named b (range buckets); a _ci string key beside a column b (hash buckets).
    run_source_sql(mariadb, config.source.database, f"""
        CREATE TABLE ranged (b INT NOT NULL PRIMARY KEY, {columns(ALIAS_COLUMNS)});
        INSERT INTO ranged VALUES (1, {row(ALIAS_COLUMNS)}), (2, {row(ALIAS_COLUMNS)}), (7, {row(ALIAS_COLUMNS)}),
            (8, {row(ALIAS_COLUMNS)});
        CREATE TABLE hashed (k VARCHAR(20) COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, b INT, {columns(beside_k)});
        INSERT INTO hashed VALUES ('abc', 1, {row(beside_k)}), ('xyz', 1, {row(beside_k)}), ('q', 2, {row(beside_k)});
    """)
    specs = [TableSpec("ranged", "ranged"), TableSpec("hashed", "hashed")]
    pipeline = Pipeline(config, spark, "run-1")
    pipeline.ingest(specs)
    results = run_checks(config, spark, specs)
    assert all(r.success for r in results), [(r.table, failed_checks(r)) for r in results]

    ranged, hashed = config.table_path("silver", "ranged"), config.table_path("silver", "hashed")
    spark.sql(f"UPDATE delta.`{ranged}` SET h = -1 WHERE b = 7")
    silver = spark.read.format("delta").load(hashed)
    silver.where("k = 'abc'").withColumn("k", F.lit("ABC")).write.format("delta").mode("append").save(hashed)
    wrong_ranged, wrong_hashed = run_checks(config, spark, specs)
    assert [c.expectation for c in failed_checks(wrong_ranged)] == [VALUES_CHECK], failed_checks(wrong_ranged)
    assert "b=7: other values" in values_observed(wrong_ranged), values_observed(wrong_ranged)
    assert "make repair TABLE=ranged" in values_observed(wrong_ranged)
    assert "k=ABC: not in the source" in values_observed(wrong_hashed), values_observed(wrong_hashed)
    unique = next(c for c in failed_checks(wrong_hashed) if "unique" in c.expectation)
    assert "'ABC' and 'abc' are one key" in unique.observed or "'abc' and 'ABC' are one key" in unique.observed, unique
