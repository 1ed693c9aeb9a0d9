"""Snapshot chunks written by the tasks as Parquet and committed to bronze as files: the commit is
idempotent and exact, a refused commit leaves nothing behind, and the Spark-append path used for
non-local lakes gives the same silver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from lakehouse_engine.errors import ConcurrentRunError
from lakehouse_engine.run.pipeline import Pipeline, TablesFailed
from lakehouse_engine.sink import deltafiles, silverwrite
from lakehouse_engine.sink import paths as lake
from lakehouse_engine.sink.columnmap import StaleColumns
from lakehouse_engine.sink.log import localfiles, transaction

from .helpers import assert_silver_equals_exact_source, demo_specs, source_rows

pytestmark = pytest.mark.integration


def _referenced_files(spark, path: str) -> set[str]:
    return {Path(p).name for p in spark.read.format("delta").load(path).inputFiles()}


def _parquet_files(path: str) -> set[str]:
    return {p.name for p in Path(path).glob("*.parquet")}


def test_snapshot_commits_the_tasks_files_with_exact_counts_and_one_checkpoint(spark, config):
    specs = [s for s in demo_specs() if s.name == "orders"]
    Pipeline(config, spark, "run-1").ingest(specs)
    path = config.table_path("bronze", "orders")
    bronze = spark.read.format("delta").load(path)
    expected = len(source_rows(config, "orders"))
    # count() may be answered from the files' statistics; collect() reads every row.
    assert bronze.count() == len(bronze.collect()) == expected
    assert bronze.where(F.col("_batch") == 1).count() == len(bronze.where(F.col("_batch") == 1).collect())
    assert _parquet_files(path) == _referenced_files(spark, path), "an unreferenced file was left"
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    operations = [row["operation"] for row in sorted(history, key=lambda r: r["version"])]
    assert operations[0] == "CREATE TABLE" and set(operations[1:]) == {"WRITE"}, operations
    assert_silver_equals_exact_source(spark, config, "orders")


def test_a_batch_number_another_run_committed_is_refused_and_leaves_no_files(spark, config, monkeypatch):
    specs = [s for s in demo_specs() if s.name == "customers"]
    real = deltafiles.append_files
    calls = []

    def committed_elsewhere_first(spark_, path, files, *, app_id, version, user_metadata, physical):
        calls.append(version)
        # Another run commits the same batch number (with its own files) just before us.
        real(spark_, path, [], app_id=app_id, version=version, user_metadata='{"other": "run"}',
             physical=physical)
        return real(spark_, path, files, app_id=app_id, version=version, user_metadata=user_metadata,
                    physical=physical)

    monkeypatch.setattr(deltafiles, "append_files", committed_elsewhere_first)
    with pytest.raises(TablesFailed) as failed:
        Pipeline(config, spark, "run-1").ingest(specs)
    assert calls == [1]
    result = failed.value.failed[0]
    assert "another run wrote bronze batch 1" in result.message
    assert result.category == ConcurrentRunError("x").category
    path = config.table_path("bronze", "customers")
    assert spark.read.format("delta").load(path).count() == 0, "none of our rows may land"
    assert _parquet_files(path) == _referenced_files(spark, path), "the refused batch's files must go"


def test_appending_the_same_version_twice_is_refused_and_commits_nothing(spark, tmp_path):
    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)
    names = {"id": "id"}
    deltafiles.append_files(spark, path, [], app_id="a", version=1, user_metadata="m1", physical=names)
    version = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").agg(F.max("version")).first()[0]
    with pytest.raises(transaction.AlreadyCommitted):
        deltafiles.append_files(spark, path, [], app_id="a", version=1, user_metadata="m2", physical=names)
    with pytest.raises(transaction.AlreadyCommitted):
        deltafiles.append_files(spark, path, [], app_id="a", version=0, user_metadata="m0", physical=names)
    with pytest.raises(StaleColumns):
        deltafiles.append_files(spark, path, [], app_id="a", version=2, user_metadata="m2",
                                physical={"id": "col-1"})
    assert spark.sql(f"DESCRIBE HISTORY delta.`{path}`").agg(F.max("version")).first()[0] == version


def test_a_batch_another_run_commits_while_ours_is_open_fails_our_commit(spark, tmp_path):
    # Both commits are blind appends of the same app id and version: only the app id read by our
    # transaction makes the later one a conflict instead of a second copy of the batch.
    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)
    ours = transaction.open_transaction(spark, path, "a", 1)
    spark.range(2).write.format("delta").mode("append").option("txnAppId", "a").option("txnVersion", 1).save(path)
    with pytest.raises(Exception) as conflict:
        ours.commit(ours.jvm.java.util.ArrayList(), "ours")
    assert "ConcurrentTransactionException" in type(conflict.value).__name__ + str(conflict.value)
    assert spark.read.format("delta").load(path).count() == 5
    assert spark.sql(f"DESCRIBE HISTORY delta.`{path}`").agg(F.max("version")).first()[0] == 1


def test_lakes_pyarrow_cannot_write_use_a_spark_append_with_the_same_result(spark, config, monkeypatch):
    monkeypatch.setattr(localfiles, "is_local", lambda path: False)
    specs = [s for s in demo_specs() if s.name == "orders"]
    Pipeline(config, spark, "run-1").ingest(specs)
    assert_silver_equals_exact_source(spark, config, "orders")
    lake_staging = lake.staging_folder(config.lake_root, config.target_dir, "local[2]")
    for staging in (config.target_dir / "staging", lake_staging):
        assert not any(staging.rglob("*.parquet")), "staged files must be removed after the commit"


def test_files_a_killed_snapshot_left_in_the_lakes_staging_are_removed_by_the_tables_next_snapshot(spark, config):
    staging = lake.staging_folder(config.lake_root, config.target_dir, "local[2]")
    left = staging / "orders" / "killed-run-1"  # kill -9 between the tasks' writes and the commit
    left.mkdir(parents=True)
    (left / "part-00000-x.snappy.parquet").write_bytes(b"PAR1")
    two_days_ago = time.time() - 2 * 86400
    os.utime(left, (two_days_ago, two_days_ago))
    # Staging right now for another checkout sharing the lake (its own locks): not to be touched.
    live = staging / "orders" / "other-checkout-3"
    live.mkdir(parents=True)
    other = staging / "customers" / "its-run-1"  # another table's
    other.mkdir(parents=True)
    os.utime(other, (two_days_ago, two_days_ago))
    specs = [s for s in demo_specs() if s.name == "orders"]
    Pipeline(config, spark, "run-1").ingest(specs)
    assert_silver_equals_exact_source(spark, config, "orders")
    assert not left.exists()
    assert live.is_dir() and other.is_dir()


def _one_chunk_per_commit(config):
    return replace(config, defaults=replace(config.defaults, commit_rows=config.defaults.chunk_size))


def _silver_versions(spark, config, table: str) -> list[tuple[str, str | None]]:
    history = spark.sql(f"DESCRIBE HISTORY delta.`{config.table_path('silver', table)}`").collect()
    return [(r["operation"], r["userMetadata"]) for r in sorted(history, key=lambda r: r["version"])]


def _assert_silver_is_the_source_row_for_row(spark, config, table: str) -> None:
    silver = spark.read.format("delta").load(config.table_path("silver", table))
    assert silver.count() == len(silver.collect()) == len(source_rows(config, table))
    assert_silver_equals_exact_source(spark, config, table)


def test_snapshot_batches_go_to_silver_as_files_one_commit_per_batch(spark, config):
    config = _one_chunk_per_commit(config)
    specs = [s for s in demo_specs() if s.name == "orders"]
    results = Pipeline(config, spark, "run-1").ingest(specs)
    commits = _silver_versions(spark, config, "orders")
    seeded = [meta for operation, meta in commits if operation == "WRITE" and meta]
    snapshot_batches = results[0].batch - 1  # the last batch is the binlog catch-up's
    assert snapshot_batches > 1
    assert [json.loads(m) for m in seeded[:snapshot_batches]] == [
        {"bronze_batch": b, "bronze_run": "run-1"} for b in range(1, snapshot_batches + 1)]
    _assert_silver_is_the_source_row_for_row(spark, config, "orders")
    # Created with silver's properties (deletion vectors, the checkpoint interval), so that its
    # first MERGE needs no ALTER TABLE of its own.
    creation = Path(config.table_path("silver", "orders")) / "_delta_log" / f"{0:020d}.json"
    metadata = next(json.loads(line)["metaData"] for line in creation.read_text().splitlines() if "metaData" in line)
    assert metadata["configuration"].get("delta.enableDeletionVectors") == "true"
    assert metadata["configuration"].get("delta.checkpointInterval") == str(silverwrite.SILVER_CHECKPOINT_INTERVAL)


def test_a_silver_commit_lost_after_its_bronze_commit_is_merged_later(spark, config, monkeypatch):
    real = deltafiles.append_files

    def silver_fails_at_batch_2(spark_, path, files, *, app_id, version, user_metadata, physical):
        if app_id.startswith("silver:") and version == 2:
            raise RuntimeError("killed between the bronze and the silver commit")
        return real(spark_, path, files, app_id=app_id, version=version, user_metadata=user_metadata,
                    physical=physical)

    monkeypatch.setattr(deltafiles, "append_files", silver_fails_at_batch_2)
    config = _one_chunk_per_commit(config)
    specs = [s for s in demo_specs() if s.name == "orders"]
    (result,) = Pipeline(config, spark, "run-1").ingest(specs)
    applied = [json.loads(meta)["bronze_batch"] for _, meta in _silver_versions(spark, config, "orders") if meta]
    # Batch 1 was seeded; batch 2's seed was lost, so no later batch was seeded either (silver
    # was no longer one batch behind): the end of the run applied batches 2..last at once.
    assert applied == [1, result.batch]
    _assert_silver_is_the_source_row_for_row(spark, config, "orders")


def test_snapshot_tasks_stage_their_files_in_the_lake_not_in_the_drivers_project_folder(spark, config):
    # Executors on other hosts see the (shared) lake, never the driver's target/: a file where
    # target/staging would be proves that nothing is written there.
    config.target_dir.mkdir(parents=True, exist_ok=True)
    (config.target_dir / "staging").write_text("not a folder")
    specs = [s for s in demo_specs() if s.name == "orders"]
    (result,) = Pipeline(config, spark, "run-1").ingest(specs)
    assert result.status == "success" and result.snapshot_rows > 0
    assert_silver_equals_exact_source(spark, config, "orders")
    staging = lake.staging_folder(config.lake_root, config.target_dir, "local[2]")
    assert staging.parent == Path(config.lake_root) and not any(staging.rglob("*.parquet"))


# A snapshot task in a fresh interpreter, as in a Spark worker: it reads a chunk off the wire and
# writes its files without pandas, which pyarrow would import for any conversion from Python
# objects (0.26 s and ~48 MB for each worker).
_TASK_PROBE = """
import json, sys
from lakehouse_engine.config.project import SourceProfile
from lakehouse_engine.snapshot.chunktask import ChunkTask, stage_chunk
from lakehouse_engine.source.connection import connection
from lakehouse_engine.source.introspect import describe_table
from lakehouse_engine.state.chunks import Chunk
host, port, user, password, database, table, folder = sys.argv[1:]
profile = SourceProfile(host, int(port), user, password, database)
with connection(profile) as conn:
    schema = describe_table(conn, database, table)
    staged = stage_chunk(ChunkTask(profile, schema, Chunk(0, None, None), "run-1", 1, folder, True), conn)
print(json.dumps({"rows": staged.rows, "pandas": "pandas" in sys.modules}))
"""


def test_a_snapshot_task_reads_and_writes_its_chunk_without_importing_pandas(config, tmp_path):
    source = config.source
    probe = subprocess.run([sys.executable, "-c", _TASK_PROBE, source.host, str(source.port), source.user,
                            source.password, source.database, "customers", str(tmp_path)],
                           capture_output=True, text=True, check=True)
    found = json.loads(probe.stdout)
    assert found == {"rows": len(source_rows(config, "customers")), "pandas": False}


def test_a_local_masters_snapshot_reads_in_the_drivers_own_workers_with_the_same_result(spark, config):
    from lakehouse_engine.snapshot import localtasks

    localtasks.stop_workers()
    specs = [s for s in demo_specs() if s.name == "orders"]
    Pipeline(config, spark, "run-1").ingest(specs)
    workers = localtasks._shared
    assert workers is not None and workers._pool is not None, "the chunks were read by a Spark job"
    assert workers.cores == spark.sparkContext.defaultParallelism
    path = config.table_path("bronze", "orders")
    assert _parquet_files(path) == _referenced_files(spark, path), "an unreferenced file was left"
    assert_silver_equals_exact_source(spark, config, "orders")
    localtasks.stop_workers()
    assert localtasks._shared is None
