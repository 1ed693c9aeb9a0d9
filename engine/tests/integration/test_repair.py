"""Repair: only the rows silver holds wrongly are read again, the table keeps its binlog position,
and the changes read again afterwards (those between the position and the repair's read) cannot
undo it."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from lakehouse_engine.quality.dq import run_checks
from lakehouse_engine.quality.expectations import VALUES_CHECK
from lakehouse_engine.quality.reconcile import KeyDifference
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.run.repair import rewrite_keys
from lakehouse_engine.sink import bronze
from lakehouse_engine.sink.silver import latest_per_key

from .helpers import assert_silver_equals_exact_source, demo_specs, run_source_sql, table_schema
from .test_cli import cli, run_results

pytestmark = pytest.mark.integration


def customers() -> list:
    return [s for s in demo_specs() if s.name == "customers"]


def tamper(spark, config, changed: int = 7) -> None:
    """Three kinds of drift made directly in silver: a changed value (of ``changed``), a deleted
    row (42), an extra row (5000, a copy of 8)."""
    silver = config.table_path("silver", "customers")
    spark.sql(f"UPDATE delta.`{silver}` SET full_name = 'Wrong' WHERE customer_id = {changed}")
    spark.sql(f"DELETE FROM delta.`{silver}` WHERE customer_id = 42")
    extra = spark.read.format("delta").load(silver).where("customer_id = 8").withColumn("customer_id", F.lit(5000))
    extra.write.format("delta").mode("append").save(silver)


def bronze_replayed(spark, config) -> set[tuple]:
    """Silver as a rebuild from the whole of bronze would make it: the newest change per key."""
    frame = spark.read.format("delta").load(config.table_path("bronze", "customers"))
    latest = latest_per_key(frame, ["customer_id"]).where(F.col("_op") != "d")
    return {(r["customer_id"], r["full_name"]) for r in latest.select("customer_id", "full_name").collect()}


def silver_pairs(spark, config) -> set[tuple]:
    frame = spark.read.format("delta").load(config.table_path("silver", "customers"))
    return {(r["customer_id"], r["full_name"]) for r in frame.select("customer_id", "full_name").collect()}


def test_changes_read_again_after_a_repair_cannot_undo_it(spark, config, mariadb):
    Pipeline(config, spark, "run-1").ingest(customers())
    before = bronze.latest_checkpoint(spark, config.table_path("bronze", "customers"))
    tamper(spark, config)
    # Source changes after silver's position: the repair reads them (it reads later), and the
    # catch-up after it reads them again, older than the repair's rows.
    run_source_sql(mariadb, config.source.database, """
        UPDATE customers SET full_name = 'Later' WHERE customer_id = 7;
        DELETE FROM customers WHERE customer_id = 43;
        INSERT INTO customers (customer_id, email, full_name, country, created_at)
            VALUES (6000, 'six@example.com', 'Six', 'DE', NOW());
        DELETE FROM customers WHERE customer_id = 6000;
    """)
    keys = [KeyDifference(f"customer_id={k}", "test", (k,)) for k in (7, 42, 43, 5000, 6000)]
    batch, _, reread, deleted = rewrite_keys(config, spark, customers()[0], table_schema(config, "customers"),
                                             keys, "repair-1")
    assert (reread, deleted) == (2, 3)  # 7 and 42 are in the source; 43, 5000 and 6000 are not
    repaired = bronze.latest_checkpoint(spark, config.table_path("bronze", "customers"))
    assert repaired.batch == batch == before.batch + 1 and repaired.repair
    assert repaired.position == before.position  # the binlog is read again from where it was
    pairs = silver_pairs(spark, config)
    assert (7, "Later") in pairs and (42, "Customer 42") in pairs
    assert not {k for k, _ in pairs} & {43, 5000, 6000}

    Pipeline(config, spark, "run-2").ingest(customers())  # reads the changes above once more
    assert_silver_equals_exact_source(spark, config, "customers")
    assert bronze_replayed(spark, config) == silver_pairs(spark, config)  # bronze is still the changelog

    run_source_sql(mariadb, config.source.database, "UPDATE customers SET full_name = 'Newer' WHERE customer_id = 7;")
    Pipeline(config, spark, "run-3").ingest(customers())  # a change after the repair applies
    assert (7, "Newer") in silver_pairs(spark, config)
    assert not bronze.latest_checkpoint(spark, config.table_path("bronze", "customers")).repair


def test_make_repair_finds_and_fixes_drift_in_silver_then_dq_passes(spark, config):
    Pipeline(config, spark, "run-1").ingest(customers())
    tamper(spark, config)
    (drifted,) = run_checks(config, spark, customers())
    assert not drifted.success
    done = cli(config, "repair", "--select", "customers")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("customers "))
    assert "3 differing keys: 2 re-read, 1 deleted" in line, done.stdout
    assert "customer_id=7: other values" in done.stdout and "customer_id=5000: not in the source" in done.stdout
    assert "after:  all " in done.stdout and "hold the source's values" in done.stdout
    recorded = run_results(config)
    assert recorded["status"] == "success" and recorded["results"][0]["keys_found"] == 3
    assert_silver_equals_exact_source(spark, config, "customers")
    (checked,) = run_checks(config, spark, customers())
    assert checked.success, [c for c in checked.checks if not c.success]
    assert any(c.expectation == VALUES_CHECK for c in checked.checks)

    again = cli(config, "repair", "--select", "customers")  # nothing left to repair
    assert again.returncode == 0 and "nothing to repair" in again.stdout, again.stdout

    # Bronze, repair batch included, is still the whole changelog: silver rebuilt from it is the source.
    rebuilt = cli(config, "rebuild", "--select", "customers")
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr[-3000:]
    assert "silver rebuilt from bronze batches 0.." in rebuilt.stdout and ": 400 rows" in rebuilt.stdout
    assert_silver_equals_exact_source(spark, config, "customers")


def test_a_repair_that_only_rereads_rows_merges_them_and_never_appends_duplicates(spark, config):
    # Silver right after a snapshot, nothing changed since: snapshot rows would be appended as new
    # keys, which a repair's are not.
    Pipeline(config, spark, "run-1").ingest(customers())
    silver = config.table_path("silver", "customers")
    spark.sql(f"UPDATE delta.`{silver}` SET full_name = 'Wrong' WHERE customer_id = 7")
    spark.sql(f"DELETE FROM delta.`{silver}` WHERE customer_id = 42")
    keys = [KeyDifference(f"customer_id={k}", "test", (k,)) for k in (7, 42)]
    _, _, reread, deleted = rewrite_keys(config, spark, customers()[0], table_schema(config, "customers"),
                                         keys, "repair-1")
    assert (reread, deleted) == (2, 0)
    frame = spark.read.format("delta").load(silver)
    assert frame.where("customer_id = 7").count() == 1
    assert_silver_equals_exact_source(spark, config, "customers")


@pytest.mark.parametrize(("table", "copied"), [
    ("customers", "customer_id = 9"),  # the same row twice
    ("products", "sku LIKE 'ab-%'"),  # another spelling of one _ci key (ab- as AB-)
])
def test_a_key_silver_holds_twice_is_fixed_by_the_command_dq_advises_without_a_full_refresh(
        spark, config, table, copied):
    specs = [s for s in demo_specs() if s.name == table]
    Pipeline(config, spark, "run-1").ingest(specs)
    silver = config.table_path("silver", table)
    extra = spark.read.format("delta").load(silver).where(copied).limit(1)
    if table == "products":
        extra = extra.withColumn("sku", F.upper("sku"))
    extra.write.format("delta").mode("append").save(silver)
    (before,) = run_checks(config, spark, specs)
    assert not before.success
    # The command the checks advise: repair for another spelling, rebuild for a row held twice.
    advice = "\n".join(c.observed for c in before.checks if not c.success)
    command = "rebuild" if table == "customers" else "repair"
    assert f"`make {command} TABLE={table}`" in advice.split("; ")[-1] or f"with `make {command}" in advice, advice
    done = cli(config, command, "--select", table)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    (after,) = run_checks(config, spark, specs)
    assert after.success, [c for c in after.checks if not c.success]
