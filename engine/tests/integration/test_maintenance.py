"""`maintain` compacts bronze and silver without touching what ingestion reads back (checkpoints,
applied batches), and skips a table an ingest is running on."""

from __future__ import annotations

import os
import time

import pytest

from lakehouse_engine.run.locks import table_locks
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.sink import bronze, silver
from lakehouse_engine.sink.maintenance import active_files

from .helpers import demo_specs, run_source_sql, silver_rows, source_rows
from .test_cli import cli, cli_without_java, error_lines, project_dir, run_results

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


def test_a_second_maintain_finds_nothing_to_do_without_spark_and_vacuums_only_an_old_unused_file(
        config, tmp_path):
    assert cli(config, "ingest", "--select", "products").returncode == 0
    first = cli(config, "maintain", "--select", "products")
    assert first.returncode == 0, first.stderr[-3000:]

    idle, _ = cli_without_java(config, tmp_path, "maintain", "--select", "products")
    assert idle.returncode == 0, idle.stderr[-3000:]
    for layer in ("bronze", "silver"):
        assert f"{layer:<7} files      1 -> 1" in idle.stdout and "nothing to do" in idle.stdout, idle.stdout
    assert [r["layer"] for r in run_results(config)["results"][0]["layers"]] == ["bronze", "silver"]

    # A file no version uses, last written eight days ago (a crashed writer's leftover): VACUUM's.
    bronze_dir = config.table_path("bronze", "products")
    orphan = os.path.join(bronze_dir, "part-00000-orphan.snappy.parquet")
    with open(orphan, "wb") as file:
        file.write(b"not read by any version")
    eight_days_ago = time.time() - 8 * 24 * 3600
    os.utime(orphan, (eight_days_ago, eight_days_ago))
    vacuum = cli(config, "maintain", "--select", "products")
    assert vacuum.returncode == 0, vacuum.stderr[-3000:]
    assert not os.path.exists(orphan)
    lines = {line.split()[1]: line for line in vacuum.stdout.splitlines() if line.startswith("products ")}
    assert lines["bronze"].endswith("vacuumed") and lines["silver"].endswith("nothing to do"), vacuum.stdout
