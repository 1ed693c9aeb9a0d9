"""Startup modes without a snapshot: silver holds exactly the rows changed after the start."""

from __future__ import annotations

import pytest

from {{ cookiecutter.package_name }}.engine.quality.dq import run_checks
from {{ cookiecutter.package_name }}.engine.run.pipeline import Pipeline, TablesFailed
from {{ cookiecutter.package_name }}.engine.source import embedded
from {{ cookiecutter.package_name }}.engine.state.positions import BinlogPosition
from {{ cookiecutter.package_name }}.engine.tables import TableSpec

from .helpers import run_source_sql, silver_rows, source_rows

CHANGES = """
UPDATE customers SET tier = 'bronze' WHERE customer_id = 5;
INSERT INTO customers (customer_id, email, full_name, country, tier, created_at)
    VALUES (9001, 'new@example.com', 'New Customer', 'DE', 'silver', NOW());
DELETE FROM customers WHERE customer_id = 7;
UPDATE customers SET full_name = 'Renamed' WHERE customer_id = 8;
DELETE FROM customers WHERE customer_id = 8;
"""


def _head(mariadb) -> BinlogPosition:
    with embedded.root_connection(mariadb) as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, offset = cur.fetchone()[:2]
    return BinlogPosition(str(file), int(offset))


def _changed_since_start(config) -> set[tuple]:
    """The source rows the changes above leave behind: customer 5 and the new 9001."""
    return {row for row in source_rows(config, "customers") if row[0] in (5, 9001)}


def test_latest_copies_nothing_then_exactly_the_rows_changed_after_the_first_run(spark, config, mariadb):
    spec = TableSpec("customers", "customers", startup="latest")
    (first,) = Pipeline(config, spark, "run-1").ingest([spec])
    assert first.status == "success" and first.snapshot_rows == 0
    assert silver_rows(spark, config, "customers") == set()
    run_source_sql(mariadb, config.source.database, CHANGES)
    (second,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert second.binlog_rows == 5  # 5 updated, 9001 inserted, 7 deleted, 8 updated then deleted
    assert silver_rows(spark, config, "customers") == _changed_since_start(config)
    # dq checks the keys; the row count (2 in silver, 399 in the source) is not a defect here.
    (checked,) = run_checks(config, spark, [spec])
    assert checked.success, checked.checks
    names = [c.expectation for c in checked.checks]
    assert any("unique" in n for n in names) and not any("row_count" in n for n in names)


def test_position_starts_after_a_given_binlog_position(spark, config, mariadb):
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET tier = 'gold' WHERE customer_id = 3;")
    start = _head(mariadb)  # the change to customer 3 is before it: not in silver
    run_source_sql(mariadb, config.source.database, CHANGES)
    spec = TableSpec("customers", "customers", startup="position", start_position=str(start))
    (result,) = Pipeline(config, spark, "run-1").ingest([spec])
    assert result.snapshot_rows == 0 and result.binlog_rows == 5
    assert silver_rows(spark, config, "customers") == _changed_since_start(config)


@pytest.mark.parametrize("position", ["mysql-bin.999999:4", "{file}:999999999"])
def test_a_start_position_the_source_does_not_hold_stops_the_table_naming_the_setting(
    spark, config, mariadb, position
):
    spec = TableSpec("customers", "customers", startup="position",
                     start_position=position.format(file=_head(mariadb).file))
    with pytest.raises(TablesFailed) as failed:
        Pipeline(config, spark, "run-1").ingest([spec])
    error = failed.value.errors["customers"]
    assert error.setting == "start_position" and "start_position" in str(error) and "SHOW MASTER STATUS" in str(error)
