"""The whole path on the real components: MariaDB binlog, Spark tasks, Delta bronze/silver."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lakehouse_engine.run import snapshots
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.sink import bronze

from .conftest import PROJECT_ROOT
from .helpers import (
    DEMO_TABLES,
    assert_silver_equals_source,
    bronze_duplicate_changes,
    demo_specs,
    run_source_sql,
    source_rows,
)

pytestmark = pytest.mark.integration


def test_changes_between_two_runs_leave_silver_equal_to_the_source_for_every_table(spark, config, mariadb):
    first = Pipeline(config, spark, "run-1").ingest(demo_specs())
    for result in first:
        assert result.snapshot_rows == len(source_rows(config, result.table))
        assert_silver_equals_source(spark, config, result.table)

    changes = (PROJECT_ROOT / "demo" / "changes.sql").read_text()
    run_source_sql(mariadb, config.source.database, changes)
    second = Pipeline(config, spark, "run-2").ingest(demo_specs())
    assert all(r.snapshot_rows == 0 for r in second), "a second run must continue, not re-snapshot"
    assert all(r.binlog_rows > 0 for r in second), [(r.table, r.binlog_rows) for r in second]
    for table in DEMO_TABLES:
        assert_silver_equals_source(spark, config, table)
        assert bronze_duplicate_changes(spark, config, table) == 0

    third = Pipeline(config, spark, "run-3").ingest(demo_specs())
    assert [(r.snapshot_rows, r.binlog_rows) for r in third] == [(0, 0)] * len(DEMO_TABLES)
    for table in DEMO_TABLES:
        assert_silver_equals_source(spark, config, table)


def test_key_changing_updates_move_the_row_in_silver(spark, config, mariadb):
    specs = [s for s in demo_specs() if s.name in {"products", "order_items"}]
    Pipeline(config, spark, "run-1").ingest(specs)
    run_source_sql(mariadb, config.source.database, """
        UPDATE products SET sku = CONCAT('moved-', sku) WHERE sku LIKE 'ab-%1';
        UPDATE order_items SET line_no = line_no + 50 WHERE order_id % 11 = 0;
    """)
    results = Pipeline(config, spark, "run-2").ingest(specs)
    assert all(r.binlog_rows > 0 for r in results)
    for spec in specs:
        assert_silver_equals_source(spark, config, spec.name)
    changes = spark.read.format("delta").load(config.table_path("bronze", "products")).where("_op = 'd'")
    assert changes.count() > 0, "the old key of a moved row must be deleted in bronze"


def test_a_run_killed_mid_snapshot_resumes_with_the_unfinished_chunks_only(spark, config, mariadb, monkeypatch):
    config = replace(config, defaults=replace(config.defaults, chunk_size=250, commit_rows=500))
    spec = [s for s in demo_specs() if s.name == "orders"]
    real = snapshots.snapshot_batch
    batches: list[int] = []

    def killed_after_first_commit(*args, **kwargs):
        if batches:
            raise KeyboardInterrupt("simulated kill")
        result = real(*args, **kwargs)
        batches.append(len(result[0]))
        return result

    monkeypatch.setattr(snapshots, "snapshot_batch", killed_after_first_commit)
    with pytest.raises(KeyboardInterrupt):
        Pipeline(config, spark, "run-1").ingest(spec)
    monkeypatch.undo()

    checkpoint = bronze.latest_checkpoint(spark, config.table_path("bronze", "orders"))
    assert checkpoint is not None and checkpoint.phase == "snapshot"
    done_rows = spark.read.format("delta").load(config.table_path("bronze", "orders")).count()
    assert 0 < done_rows < 2000
    # Rows change in chunks already copied and in chunks not read yet.
    run_source_sql(mariadb, config.source.database, """
        UPDATE orders SET total = total + 1 WHERE order_id % 5 = 0;
        DELETE FROM orders WHERE order_id % 17 = 0;
    """)
    (result,) = Pipeline(config, spark, "run-2").ingest(spec)
    assert result.snapshot_rows > 0
    assert done_rows + result.snapshot_rows <= 2000, "finished chunks must not be read again"
    assert_silver_equals_source(spark, config, "orders")
    assert bronze_duplicate_changes(spark, config, "orders") == 0


def test_full_refresh_rebuilds_bronze_and_silver_from_a_new_snapshot(spark, config):
    spec = [s for s in demo_specs() if s.name == "customers"]
    Pipeline(config, spark, "run-1").ingest(spec)
    (result,) = Pipeline(config, spark, "run-2").ingest(spec, full_refresh=True)
    assert result.snapshot_rows == len(source_rows(config, "customers"))
    assert spark.read.format("delta").load(config.table_path("bronze", "customers")).count() == result.snapshot_rows
    assert_silver_equals_source(spark, config, "customers")
