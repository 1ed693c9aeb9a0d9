"""The row fingerprint's two halves agree value by value: the source's SQL on literal rows, and
Spark on the same rows as silver holds them (after a snapshot and after the binlog), for the
values each type's spelling is most likely to get wrong: NULL, zero and negative zero, the
largest and smallest doubles and floats, subnormals, decimals with their scale, text beyond
ASCII, empty strings, bytes, times with and without fractions, dates and timestamps."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse_engine.quality.arrowprint import row_hashes
from lakehouse_engine.quality.arrowsilver import silver_parts
from lakehouse_engine.quality.dq import LocalLog
from lakehouse_engine.quality.fingerprint import spark_row_hash, sql_row_hash
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.source.connection import connection, query
from lakehouse_engine.source.introspect import describe_table
from lakehouse_engine.tables import TableSpec

from .helpers import run_source_sql

pytestmark = pytest.mark.integration

LITERALS = """
    CREATE TABLE lit (
        id INT NOT NULL PRIMARY KEY, i BIGINT NULL, u BIGINT UNSIGNED NULL, d DECIMAL(30,10) NULL,
        f FLOAT NULL, g DOUBLE NULL, s VARCHAR(20) NULL, t TEXT NULL, b VARBINARY(8) NULL,
        dt DATETIME(6) NULL, ts TIMESTAMP(3) NULL, dd DATE NULL, tm TIME(3) NULL, y YEAR NULL,
        e ENUM('a', 'B') NULL, bits BIT(3) NULL, flag BIT(1) NULL);
    INSERT INTO lit VALUES
        (1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
        (2, 0, 0, 0, 0, 0, '', '', '', '2024-02-29 00:00:00', '2024-02-29 00:00:00', '2024-02-29', '00:00:00',
            2000, 'a', b'000', b'0'),
        (3, -9223372036854775808, 18446744073709551615, -12345678901234567890.0123456789, -3.40282e38,
            -1.7976931348623157e308, 'Grüße €', 'ünïcødé ✓', x'00ff10', '1999-12-31 23:59:59.999999',
            '2038-01-18 03:14:07.999', '1000-01-01', '-838:59:59.000', 1901, 'B', b'111', b'1'),
        (4, 9223372036854775807, 1, 0.0000000001, 1.17549435e-38, 5e-324, ' lead', 'x', x'7f',
            '2024-01-02 03:04:05.678900', '1971-01-01 00:00:01.5', '9999-12-31', '12:34:56.789', 2155,
            'a', b'101', b'0'),
        (5, 1, 2, 1.5, 0.1, 0.1, 'a''b', REPEAT('long ', 50), x'', NULL, NULL, NULL, '01:02:03', NULL,
            NULL, NULL, NULL),
        (6, -1, 3, -0.5, -0.0, -0.0, 'trail ', '', NULL, '2000-01-01 00:00:00.000001', NULL, NULL,
            '-00:00:01.500', NULL, NULL, NULL, NULL),
        (7, 2, 4, 1e-10, 1e20, 1e20, 'x', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
        (8, 3, 5, 3, 3.40282e38, 2.2250738585072014e-308, 'y', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
            NULL, NULL, NULL);
"""


# The SQL half's shortcuts: a NOT NULL column has no NULL guard, a utf8mb4 text is CRC'd as it
# is (no CONVERT), a latin1 one is converted first; Spark's half guards and converts as always.
SHORTCUTS = """
    CREATE TABLE lit_nn (
        id INT NOT NULL PRIMARY KEY, i BIGINT NOT NULL, u BIGINT UNSIGNED NOT NULL, n SMALLINT NOT NULL,
        s VARCHAR(20) CHARACTER SET utf8mb4 NOT NULL, c CHAR(5) CHARACTER SET utf8mb4 NOT NULL,
        l VARCHAR(20) CHARACTER SET latin1 NOT NULL, ln VARCHAR(20) CHARACTER SET latin1 NULL,
        e ENUM('a', 'B') NOT NULL, j JSON NOT NULL, y YEAR NOT NULL, flag BIT(1) NOT NULL,
        t TEXT CHARACTER SET utf8mb4 NOT NULL);
    INSERT INTO lit_nn VALUES
        (1, -9223372036854775808, 18446744073709551615, -32768, 'Grüße €', 'ab ', 'café', NULL, 'B',
            '{"a": 1}', 2000, b'1', 'ünïcødé ✓'),
        (2, 9223372036854775807, 0, 32767, '', '', '', 'é', 'a', '[]', 1901, b'0', ''),
        (3, 0, 1, 0, ' lead', 'x', 'ÿ', '', 'a', '"s"', 2155, b'1', REPEAT('long ', 50));
"""


def fingerprints(spark, config, table: str = "lit") -> tuple[dict[int, int], dict[int, int]]:
    """Each row's fingerprint in the source (SQL) and in silver, where Spark's and the one
    computed over Arrow without a JVM (``arrowprint``, as local ``dq`` does) must agree."""
    with connection(config.source) as conn:
        schema = describe_table(conn, config.source.database, table, None)
        source = {int(i): int(h) for i, h in query(conn, f"SELECT id, {sql_row_hash(schema.columns)} FROM {table}")}
    path = config.table_path("silver", table)
    silver = spark.read.format("delta").load(path)
    lake = {r["id"]: r["h"] for r in silver.select("id", spark_row_hash(schema.columns).alias("h")).collect()}
    rows = pa.concat_tables(silver_parts(path, LocalLog().newest_version(path), schema.column_names))
    in_arrow = dict(zip(rows.column("id").to_pylist(), row_hashes(schema.columns, rows).tolist(), strict=True))
    assert in_arrow == lake, {k: (v, lake.get(k)) for k, v in in_arrow.items() if lake.get(k) != v}
    return source, lake


def test_not_null_columns_and_utf8mb4_text_give_the_same_fingerprint_without_the_sql_guards(spark, config, mariadb):
    run_source_sql(mariadb, config.source.database, SHORTCUTS)
    with connection(config.source) as conn:
        sql = sql_row_hash(describe_table(conn, config.source.database, "lit_nn", None).columns)
    assert "CONVERT(`s` USING" not in sql and "CONVERT(`l` USING utf8mb4)" in sql and "COALESCE(`id`" not in sql
    specs = [TableSpec("lit_nn", "lit_nn")]
    Pipeline(config, spark, "run-1").ingest(specs)
    source, lake = fingerprints(spark, config, "lit_nn")
    assert len(source) == 3 and lake == source
    run_source_sql(mariadb, config.source.database, "UPDATE lit_nn SET id = id + 100;")
    Pipeline(config, spark, "run-2").ingest(specs)
    source, lake = fingerprints(spark, config, "lit_nn")
    assert set(source) == {101, 102, 103} and lake == source


def test_both_halves_give_each_literal_row_the_same_fingerprint_after_a_snapshot_and_after_the_binlog(
        spark, config, mariadb):
    run_source_sql(mariadb, config.source.database, LITERALS)
    specs = [TableSpec("lit", "lit")]
    Pipeline(config, spark, "run-1").ingest(specs)  # silver from the snapshot's SELECT
    source, lake = fingerprints(spark, config)
    assert len(source) == 8 and lake == source
    # The same values arriving from the binlog (decoded from row images, not read by SELECT).
    run_source_sql(mariadb, config.source.database, "UPDATE lit SET id = id + 100;")
    Pipeline(config, spark, "run-2").ingest(specs)
    source, lake = fingerprints(spark, config)
    assert set(source) == set(range(101, 109)) and lake == source
