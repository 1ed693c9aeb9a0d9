"""`maintain` compacts bronze and silver without touching what ingestion reads back (checkpoints,
applied batches), and skips a table an ingest is running on."""

from __future__ import annotations

import pytest

from lakehouse_engine.run.locks import table_locks
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.sink import bronze, silver
from lakehouse_engine.sink.maintenance import active_files

from .helpers import demo_specs, run_source_sql, silver_rows, source_rows
from .test_cli import cli, error_lines, project_dir, run_results

pytestmark = pytest.mark.integration


def test_maintain_compacts_small_batches_and_ingestion_goes_on_from_the_same_checkpoint(spark, config, mariadb):
    specs = [s for s in demo_specs() if s.name == "customers"]
    db = config.source.database
    pipeline = Pipeline(config, spark, "before-maintenance")
    pipeline.ingest(specs)
    for round_ in range(3):  # small batches: each adds files to bronze and silver
        run_source_sql(mariadb, db, f"UPDATE customers SET full_name = 'round {round_}' "
                                    f"WHERE customer_id % 7 = {round_};")
        pipeline.ingest(specs)
    paths = {layer: config.table_path(layer, "customers") for layer in ("bronze", "silver")}
    before = {layer: active_files(spark, path) for layer, path in paths.items()}
    checkpoint = bronze.latest_checkpoint(spark, paths["bronze"])
    applied = silver.applied_batch(spark, paths["silver"])
    assert min(before.values()) > 1

    # products is being ingested by another run: skipped with one line, customers still done.
    with table_locks(project_dir(config) / "target" / "locks", ["products"]):
        done = cli(config, "maintain", "--select", "customers", "products")

    assert done.returncode == 1, done.stderr[-3000:]
    (line,) = error_lines(done.stderr)
    assert "table products is being ingested by another run" in line
    for layer, path in paths.items():
        assert active_files(spark, path) == 1 < before[layer]
        assert f"{layer:<7} files {before[layer]:>6} -> 1" in done.stdout
    results = {r["table"]: r for r in run_results(config)["results"]}
    assert results["customers"]["status"] == "success" and results["products"]["status"] == "error"
    assert [r["layer"] for r in results["customers"]["layers"]] == ["bronze", "silver"]
    # The OPTIMIZE commits carry no checkpoint: ingestion reads back what it left.
    assert bronze.latest_checkpoint(spark, paths["bronze"]) == checkpoint
    assert silver.applied_batch(spark, paths["silver"]) == applied
    assert silver_rows(spark, config, "customers") == source_rows(config, "customers")

    run_source_sql(mariadb, db, "DELETE FROM customers WHERE customer_id IN (1, 2);\n"
                                "UPDATE customers SET tier = 'gold' WHERE customer_id = 3;")
    (result,) = Pipeline(config, spark, "after-maintenance").ingest(specs)
    assert result.snapshot_rows == 0 and result.binlog_rows == 3
    assert silver_rows(spark, config, "customers") == source_rows(config, "customers")


def test_a_vacuum_retention_below_seven_days_is_refused_before_anything_runs(config):
    done = cli(config, "maintain", "--retain-hours", "24")
    assert done.returncode == 2
    (line,) = error_lines(done.stderr)
    assert "--retain-hours 24 is below 168" in line
