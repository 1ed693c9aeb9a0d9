"""Silver's table options from its table module: Delta's change data feed and liquid clustering."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.sink import maintenance
from lakehouse_engine.sink.layout import CHANGE_DATA_FEED, clustering_columns
from lakehouse_engine.sink.log import deltalog
from lakehouse_engine.tables import TableSpec

from .helpers import assert_silver_equals_exact_source, run_source_sql

pytestmark = pytest.mark.integration


def test_silver_gets_a_change_feed_and_clustering_and_the_feed_records_each_merge(spark, config, mariadb):
    spec = TableSpec("customers", "customers", change_data_feed=True, cluster_by=("country",))
    Pipeline(config, spark, "run-1").ingest([spec])
    path = config.table_path("silver", "customers")
    assert deltalog.table_property(spark, path, CHANGE_DATA_FEED) == "true"
    assert clustering_columns(spark, path) == ("country",)
    feed_from = deltalog.newest_version(spark, path) + 1

    run_source_sql(mariadb, config.source.database, """
        UPDATE customers SET full_name = 'Changed' WHERE customer_id = 5;
        DELETE FROM customers WHERE customer_id = 6;
    """)
    Pipeline(config, spark, "run-2").ingest([spec])
    feed = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", feed_from)
            .load(path).select("customer_id", "full_name", "_change_type").collect())
    changes = sorted((r["customer_id"], r["_change_type"], r["full_name"]) for r in feed)
    assert changes == [(5, "update_postimage", "Changed"), (5, "update_preimage", "Customer 5"),
                       (6, "delete", "Customer 6")]

    report = maintenance.maintain_layer(lambda: spark, path, "silver", maintenance.MaintenanceOptions(vacuum=False))
    # OPTIMIZE of a clustered table clusters it, and keeps every row
    assert report is not None and report.compacted and report.files_after >= 1
    assert_silver_equals_exact_source(spark, config, "customers")


def test_a_silver_with_a_change_feed_is_rewritten_at_a_rename_and_its_feed_stays_readable(spark, config, mariadb):
    config = replace(config, defaults=replace(config.defaults, table_features=frozenset({"column_mapping"})))
    spec = TableSpec("customers", "customers", change_data_feed=True)
    Pipeline(config, spark, "run-1").ingest([spec])
    path = config.table_path("silver", "customers")
    feed_from = deltalog.newest_version(spark, path) + 1
    run_source_sql(mariadb, config.source.database, """
        ALTER TABLE customers RENAME COLUMN full_name TO name, DROP COLUMN birth_date;
        UPDATE customers SET name = 'Renamed' WHERE customer_id = 5;
    """)
    (result,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert result.status == "success", result.message
    assert_silver_equals_exact_source(spark, config, "customers")
    # Bronze renames in its metadata; silver, whose feed Delta would refuse across such a
    # rename, keeps no column mapping and shows the rename as rows rewritten.
    mapping = "delta.columnMapping.mode"
    assert deltalog.table_property(spark, config.table_path("bronze", "customers"), mapping) == "name"
    assert deltalog.table_property(spark, path, mapping) in (None, "none")
    feed = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", feed_from)
            .load(path).where("customer_id = 5").select("name", "_change_type").collect())
    assert ("Renamed", "update_postimage") in {(r["name"], r["_change_type"]) for r in feed}
