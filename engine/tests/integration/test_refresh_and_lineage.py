"""A full refresh replaces bronze and silver without ever leaving a mix that a later run accepts,
and silver never takes a bronze batch number for one it merged when bronze lost commits."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lakehouse_engine.errors import FatalError
from lakehouse_engine.run import snapshots
from lakehouse_engine.run.pipeline import Pipeline, TablesFailed
from lakehouse_engine.sink import bronze, silver

from .helpers import (
    assert_silver_equals_source,
    bronze_duplicate_changes,
    demo_specs,
    run_source_sql,
    silver_rows,
    source_rows,
)

pytestmark = pytest.mark.integration

CHANGES = """
    UPDATE orders SET total = total + 1 WHERE order_id % 5 = 0;
    DELETE FROM orders WHERE order_id % 17 = 0;
    INSERT INTO orders (order_id, customer_id, status, total, ordered_at)
        SELECT 18446744073709500000 + seq, 1, 'new', seq, '2025-01-01' FROM seq_1_to_40;
"""


def _orders(config):
    config = replace(config, defaults=replace(config.defaults, chunk_size=250, commit_rows=500))
    return config, [s for s in demo_specs() if s.name == "orders"]


def _killed_after_first_chunk_commit(monkeypatch) -> None:
    real = snapshots.snapshot_batch
    calls: list[int] = []

    def killed(*args, **kwargs):
        if calls:
            raise KeyboardInterrupt("simulated kill")
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(snapshots, "snapshot_batch", killed)


def _silver_state(spark, config) -> tuple[set, int]:
    return silver_rows(spark, config, "orders"), silver.applied_batch(spark, config.table_path("silver", "orders"))


def test_a_full_refresh_killed_mid_snapshot_leaves_silver_as_it_was_and_the_next_ingest_finishes_it(
        spark, config, mariadb, monkeypatch):
    config, spec = _orders(config)
    Pipeline(config, spark, "run-1").ingest(spec)
    run_source_sql(mariadb, config.source.database, CHANGES)  # silver is now behind the source
    before = _silver_state(spark, config)

    _killed_after_first_chunk_commit(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        Pipeline(config, spark, "refresh").ingest(spec, full_refresh=True)
    monkeypatch.undo()
    assert _silver_state(spark, config) == before, "an interrupted refresh must leave silver as it was"

    # A plain ingest (no --full-refresh) carries the refresh on from its checkpoint.
    (result,) = Pipeline(config, spark, "run-3").ingest(spec)
    assert result.snapshot_rows > 0
    assert_silver_equals_source(spark, config, "orders")
    assert bronze_duplicate_changes(spark, config, "orders") == 0
    bronze_rows = spark.read.format("delta").load(config.table_path("bronze", "orders"))
    assert bronze_rows.where("_op = 'r'").count() == len(source_rows(config, "orders")), \
        "bronze's current version holds exactly one copy of the table: the refresh's"


def test_a_full_refresh_killed_while_silver_is_replaced_leaves_silver_as_it_was(spark, config, mariadb, monkeypatch):
    config, spec = _orders(config)
    Pipeline(config, spark, "run-1").ingest(spec)
    run_source_sql(mariadb, config.source.database, CHANGES)
    before = _silver_state(spark, config)

    real = silver.rebuild
    replaced: list[str] = []

    def killed(*args, **kwargs):
        replaced.append(kwargs["table"])
        raise KeyboardInterrupt("simulated kill")

    monkeypatch.setattr(silver, "rebuild", killed)
    with pytest.raises(KeyboardInterrupt):
        Pipeline(config, spark, "refresh").ingest(spec, full_refresh=True)
    monkeypatch.setattr(silver, "rebuild", real)
    assert replaced == ["orders"], "silver is replaced by one rebuild once every chunk is read"
    assert _silver_state(spark, config) == before

    Pipeline(config, spark, "run-3").ingest(spec)
    assert_silver_equals_source(spark, config, "orders")


def test_a_full_refresh_replaces_silver_in_one_commit_and_keeps_bronze_history(spark, config, mariadb):
    config, spec = _orders(config)
    Pipeline(config, spark, "run-1").ingest(spec)
    run_source_sql(mariadb, config.source.database, CHANGES)
    silver_path = config.table_path("silver", "orders")
    versions_before = spark.sql(f"DESCRIBE HISTORY delta.`{silver_path}`").count()
    bronze_before = bronze.latest_checkpoint(spark, config.table_path("bronze", "orders"))

    Pipeline(config, spark, "refresh").ingest(spec, full_refresh=True)
    assert_silver_equals_source(spark, config, "orders")
    assert spark.sql(f"DESCRIBE HISTORY delta.`{silver_path}`").count() == versions_before + 1, \
        "silver goes from its old state to the new one in a single commit"
    after = bronze.latest_checkpoint(spark, config.table_path("bronze", "orders"))
    assert after is not None and bronze_before is not None
    assert after.generation > bronze_before.batch, "batch numbers go on: none is ever used twice"
    old = spark.read.format("delta").option("versionAsOf", 1).load(config.table_path("bronze", "orders"))
    assert old.count() > 0, "bronze's rows before the refresh stay readable by time travel"

    # The refreshed table follows the binlog as before.
    run_source_sql(mariadb, config.source.database, "UPDATE orders SET total = total + 2 WHERE order_id % 3 = 0")
    Pipeline(config, spark, "run-3").ingest(spec)
    assert_silver_equals_source(spark, config, "orders")


def _drop_newest_commit(path: str) -> None:
    log_dir = Path(path) / "_delta_log"
    newest = max(log_dir.glob("*.json"), key=lambda p: int(p.stem))
    newest.unlink()
    (log_dir / f".{newest.name}.crc").unlink(missing_ok=True)
    (log_dir / newest.with_suffix(".crc").name).unlink(missing_ok=True)


def test_a_lost_bronze_commit_that_silver_merged_stops_the_table_until_silver_is_rebuilt(
        spark, config, mariadb):
    config, spec = _orders(config)
    Pipeline(config, spark, "run-1").ingest(spec)
    run_source_sql(mariadb, config.source.database, "UPDATE orders SET total = total + 1 WHERE order_id % 5 = 0")
    Pipeline(config, spark, "run-2").ingest(spec)
    bronze_path = config.table_path("bronze", "orders")
    merged = silver.applied_batch(spark, config.table_path("silver", "orders"))
    assert bronze.latest_checkpoint(spark, bronze_path).batch == merged  # type: ignore[union-attr]
    _drop_newest_commit(bronze_path)  # the batch silver merged is gone from bronze's log

    run_source_sql(mariadb, config.source.database, "DELETE FROM orders WHERE order_id % 7 = 0")
    with pytest.raises(TablesFailed) as stopped:
        Pipeline(config, spark, "run-3").ingest(spec)
    error = stopped.value.errors["orders"]
    assert isinstance(error, FatalError)
    message = str(error)
    assert f"silver has merged bronze batch {merged}" in message and "`make rebuild TABLE=orders`" in message
    assert "\n" not in message

    # The advised repair, then a plain ingest: silver equals the source again.
    silver.rebuild(spark, bronze_path=bronze_path, silver_path=config.table_path("silver", "orders"),
                   key=("order_id",), table="orders")
    Pipeline(config, spark, "run-4").ingest(spec)
    assert_silver_equals_source(spark, config, "orders")


def test_a_lost_bronze_commit_is_found_before_any_later_batch_takes_its_number(spark, config, mariadb):
    """Without changes to read, the next run writes no batch: bronze stays behind silver, and
    the table still stops rather than reporting ok."""
    config, spec = _orders(config)
    Pipeline(config, spark, "run-1").ingest(spec)
    _drop_newest_commit(config.table_path("bronze", "orders"))
    with pytest.raises(TablesFailed) as stopped:
        Pipeline(config, spark, "run-2").ingest(spec)
    assert "silver has merged bronze batch" in str(stopped.value.errors["orders"])
