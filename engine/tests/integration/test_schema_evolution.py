"""DDL on a followed table: applied to bronze and silver at its binlog position, or the table stops
with one line; silver ends equal to the source row for row, and bronze folds to the same."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from lakehouse_engine.quality.dq import run_checks
from lakehouse_engine.run import snapshots
from lakehouse_engine.run.pipeline import Pipeline, TablesFailed
from lakehouse_engine.sink import silver
from lakehouse_engine.sink.log import deltalog
from lakehouse_engine.source.connection import quote_ident
from lakehouse_engine.tables import TableSpec

from .helpers import (
    _normal_row,
    assert_silver_equals_source,
    bronze_duplicate_changes,
    run_source_sql,
    source_rows,
    table_schema,
)

pytestmark = pytest.mark.integration

# Rows change before, between and after the DDLs, all read by one catch-up.
EVOLVING = """
UPDATE customers SET tier = 'gold' WHERE customer_id = 2;
ALTER TABLE customers ADD COLUMN nick VARCHAR(20) NOT NULL DEFAULT 'none', ADD INDEX (tier);
UPDATE customers SET nick = 'three' WHERE customer_id = 3;
ALTER TABLE customers ADD COLUMN score INT NULL AFTER email;
UPDATE customers SET score = 5 WHERE customer_id = 4;
ALTER TABLE customers RENAME COLUMN full_name TO name;
UPDATE customers SET name = 'Renamed Six' WHERE customer_id = 6;
ALTER TABLE customers MODIFY score BIGINT NULL;
UPDATE customers SET score = 1099511627776 WHERE customer_id = 4;
ALTER TABLE customers MODIFY credit_limit DECIMAL(14,3) NULL;
ALTER TABLE customers DROP COLUMN country;
INSERT INTO customers (customer_id, email, name, tier, created_at, nick)
    VALUES (9001, 'new@example.com', 'New', 'silver', NOW(3), 'newbie');
DELETE FROM customers WHERE customer_id = 7;
"""


def _columns(spark, config, layer: str) -> dict[str, str]:
    frame = spark.read.format("delta").load(config.table_path(layer, "customers"))
    return {f.name: f.dataType.simpleString() for f in frame.schema.fields if not f.name.startswith("_")}


def _rows(spark, path: str, columns) -> set[tuple]:
    return {tuple(r) for r in spark.read.format("delta").load(path).select(*map(quote_ident, columns)).collect()}


def test_added_renamed_widened_and_dropped_columns_reach_bronze_and_silver_at_their_position(
        spark, config, mariadb, tmp_path):
    spec = TableSpec("customers", "customers")
    Pipeline(config, spark, "run-1").ingest([spec])
    run_source_sql(mariadb, config.source.database, EVOLVING)
    (result,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert result.status == "success", result.message
    assert_silver_equals_source(spark, config, "customers")
    for layer in ("bronze", "silver"):
        columns = _columns(spark, config, layer)
        assert columns["nick"] == "string" and columns["score"] == "bigint" and "name" in columns, layer
        assert columns["credit_limit"] == "decimal(14,3)", layer
        assert "full_name" not in columns and "country" not in columns, layer
    # Rows that existed before ADD COLUMN hold its default, as in the source.
    names = table_schema(config, "customers").column_names
    nick = {row[names.index("nick")] for row in source_rows(config, "customers")}
    assert nick == {"none", "three", "newbie"}
    # Bronze folds into the same table: silver rebuilt from it equals the evolved silver.
    rebuilt = str(tmp_path / "rebuilt")
    silver.rebuild(spark, bronze_path=config.table_path("bronze", "customers"), silver_path=rebuilt,
                   key=("customer_id",), table="customers")
    assert _rows(spark, rebuilt, names) == _rows(spark, config.table_path("silver", "customers"), names)
    # Later runs start from the evolved lake: no DDL left, the same columns.
    run_source_sql(mariadb, config.source.database,
                   "UPDATE customers SET nick = 'later', score = 7 WHERE customer_id = 5;")
    (later,) = Pipeline(config, spark, "run-3").ingest([spec])
    assert later.status == "success" and later.binlog_rows == 1
    assert_silver_equals_source(spark, config, "customers")
    (checked,) = run_checks(config, spark, [spec])
    assert checked.success, [c for c in checked.checks if not c.success]


METADATA_ONLY = """
ALTER TABLE customers RENAME COLUMN full_name TO name;
UPDATE customers SET name = 'Renamed Six' WHERE customer_id = 6;
ALTER TABLE customers MODIFY credit_limit DECIMAL(14,3) NULL;
UPDATE customers SET credit_limit = 12345678901.125 WHERE customer_id = 8;
ALTER TABLE customers DROP COLUMN country, ADD COLUMN score INT NULL;
UPDATE customers SET score = 5 WHERE customer_id = 4;
ALTER TABLE customers MODIFY score BIGINT NULL;
ALTER TABLE customers ADD COLUMN country CHAR(2) NULL;
UPDATE customers SET score = 1099511627776, country = 'XX' WHERE customer_id = 9;
"""


def _delta_schema(spark, path: str) -> dict:
    return json.loads(deltalog.snapshot(spark, path).metadata().schemaString())


def _files(spark, config, layer: str) -> set[str]:
    return set(spark.read.format("delta").load(config.table_path(layer, "customers")).inputFiles())


def test_rename_drop_and_widening_change_no_file_and_a_later_rewrite_still_reads_every_column(
        spark, config, mariadb):
    # Both features are opt-in (the default is none: not every reader outside Spark reads them).
    features = frozenset({"column_mapping", "type_widening"})
    config = replace(config, defaults=replace(config.defaults, table_features=features))
    spec = TableSpec("customers", "customers")
    Pipeline(config, spark, "run-1").ingest([spec])
    before = {layer: _files(spark, config, layer) for layer in ("bronze", "silver")}
    run_source_sql(mariadb, config.source.database, METADATA_ONLY)
    (result,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert result.status == "success", result.message
    assert_silver_equals_source(spark, config, "customers")
    # Every file written before the DDLs is still the table's: none was rewritten.
    assert before["bronze"] <= _files(spark, config, "bronze")
    assert before["silver"] <= _files(spark, config, "silver")
    for layer in ("bronze", "silver"):
        path = config.table_path(layer, "customers")
        properties = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()}
        assert properties.get("delta.columnMapping.mode") == "name", layer
        assert properties.get("delta.enableTypeWidening") == "true", layer
        columns = _columns(spark, config, layer)
        assert columns["score"] == "bigint" and columns["credit_limit"] == "decimal(14,3)", layer
        assert "full_name" not in columns and columns["country"] == "string", layer
        # Each widening is recorded as Delta's ALTER TABLE records it.
        fields = {f["name"]: f["metadata"] for f in _delta_schema(spark, path)["fields"]}
        assert fields["score"]["delta.typeChanges"] == [{"toType": "long", "fromType": "integer"}], layer
        assert fields["credit_limit"]["delta.typeChanges"] == [
            {"toType": "decimal(14,3)", "fromType": "decimal(12,2)"}], layer
        assert fields["name"]["delta.columnMapping.physicalName"] == "full_name", layer
    # The re-added country must not show the dropped column's values.
    silver_rows = spark.read.format("delta").load(config.table_path("silver", "customers"))
    assert {r["country"] for r in silver_rows.select("country").collect()} == {None, "XX"}
    # A DDL that gives existing rows a value still rewrites, now on a column-mapped table.
    run_source_sql(mariadb, config.source.database, """
        ALTER TABLE customers ADD COLUMN nick VARCHAR(20) NOT NULL DEFAULT 'none';
        UPDATE customers SET nick = 'later', name = 'Later' WHERE customer_id = 5;
    """)
    (later,) = Pipeline(config, spark, "run-3").ingest([spec])
    assert later.status == "success", later.message
    assert_silver_equals_source(spark, config, "customers")
    assert bronze_duplicate_changes(spark, config, "customers") == 0
    (checked,) = run_checks(config, spark, [spec])
    assert checked.success, [c for c in checked.checks if not c.success]


def test_without_table_features_a_rename_and_widening_rewrite_and_keep_the_tables_protocol(spark, config, mariadb):
    config = replace(config, defaults=replace(config.defaults, table_features=frozenset()))
    spec = TableSpec("customers", "customers")
    Pipeline(config, spark, "run-1").ingest([spec])
    run_source_sql(mariadb, config.source.database, """
        ALTER TABLE customers RENAME COLUMN full_name TO name, MODIFY credit_limit DECIMAL(14,3) NULL;
        UPDATE customers SET name = 'Renamed', credit_limit = 12345678901.125 WHERE customer_id = 5;
    """)
    (result,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert result.status == "success", result.message
    assert_silver_equals_source(spark, config, "customers")
    for layer in ("bronze", "silver"):
        path = config.table_path(layer, "customers")
        assert deltalog.table_property(spark, path, "delta.columnMapping.mode") in (None, "none"), layer
        assert deltalog.table_property(spark, path, "delta.enableTypeWidening") is None, layer
        assert _columns(spark, config, layer)["credit_limit"] == "decimal(14,3)", layer


def test_truncate_empties_silver_at_its_position_and_the_rows_after_it_arrive(spark, config, mariadb):
    spec = TableSpec("customers", "customers")
    (first,) = Pipeline(config, spark, "run-1").ingest([spec])
    run_source_sql(mariadb, config.source.database, """
        UPDATE customers SET tier = 'gold' WHERE customer_id = 3;
        TRUNCATE TABLE customers;
        INSERT INTO customers (customer_id, email, full_name, country, tier, created_at)
            VALUES (1, 'again@example.com', 'Again', 'FR', 'silver', NOW(3)),
                   (9002, 'fresh@example.com', 'Fresh', 'DE', 'gold', NOW(3));
    """)
    (result,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert result.status == "success", result.message
    assert_silver_equals_source(spark, config, "customers")
    assert len(source_rows(config, "customers")) == 2
    bronze = spark.read.format("delta").load(config.table_path("bronze", "customers"))
    assert bronze.where("_op = 'd'").count() == first.snapshot_rows  # one delete per key, at the TRUNCATE


def test_a_ddl_that_cannot_be_applied_exactly_stops_that_table_alone(spark, config, mariadb):
    specs = [TableSpec("customers", "customers"), TableSpec("products", "products")]
    Pipeline(config, spark, "run-1").ingest(specs)
    before = spark.read.format("delta").load(config.table_path("silver", "customers")).collect()
    run_source_sql(mariadb, config.source.database, """
        UPDATE customers SET tier = 'gold' WHERE customer_id = 3;
        ALTER TABLE customers ADD COLUMN seen_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP;
        UPDATE products SET stock = stock + 1 WHERE price > 10;
    """)
    with pytest.raises(TablesFailed) as excinfo:
        Pipeline(config, spark, "run-2").ingest(specs)
    by_table = {r.table: r for r in excinfo.value.results}
    message = by_table["customers"].message
    assert "CURRENT_TIMESTAMP" in message and "FULL_REFRESH=1" in message and "\n" not in message
    assert by_table["products"].status == "success" and by_table["products"].binlog_rows > 0
    # Nothing past the table's last checkpoint was written.
    after = spark.read.format("delta").load(config.table_path("silver", "customers")).collect()
    assert len(after) == len(before) and "seen_at" not in _columns(spark, config, "silver")


def test_on_schema_change_ignore_keeps_the_lake_columns_and_goes_on(spark, config, mariadb):
    spec = TableSpec("customers", "customers", on_schema_change="ignore")
    Pipeline(config, spark, "run-1").ingest([spec])
    columns = list(_columns(spark, config, "silver"))
    run_source_sql(mariadb, config.source.database, """
        ALTER TABLE customers ADD COLUMN nick VARCHAR(20) NULL;
        UPDATE customers SET nick = 'three', tier = 'gold' WHERE customer_id = 3;
    """)
    (result,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert result.status == "success" and result.binlog_rows == 1
    assert list(_columns(spark, config, "silver")) == columns
    silver_tier = spark.read.format("delta").load(config.table_path("silver", "customers")).where(
        "customer_id = 3").first()["tier"]
    assert silver_tier == "gold"
    # The next run starts with the source wider than the lake, and still goes on.
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET tier = 'silver' WHERE customer_id = 3;")
    (again,) = Pipeline(config, spark, "run-3").ingest([spec])
    assert again.status == "success" and again.binlog_rows == 1
    assert list(_columns(spark, config, "silver")) == columns


def test_a_history_silver_is_rebuilt_from_the_evolved_bronze(spark, config, mariadb):
    spec = TableSpec("customers", "customers", scd_type=2)
    Pipeline(config, spark, "run-1").ingest([spec])
    run_source_sql(mariadb, config.source.database, """
        UPDATE customers SET tier = 'gold' WHERE customer_id = 2;
        ALTER TABLE customers ADD COLUMN nick VARCHAR(20) NOT NULL DEFAULT 'none';
        UPDATE customers SET nick = 'three' WHERE customer_id = 3;
    """)
    (result,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert result.status == "success", result.message
    names = table_schema(config, "customers").column_names
    history = spark.read.format("delta").load(config.table_path("silver", "customers"))
    current = history.where("_is_current").select(*map(quote_ident, names))
    assert {_normal_row(tuple(r), table_schema(config, "customers")) for r in current.collect()} == source_rows(
        config, "customers")
    # Customer 3's versions: the snapshot's and the update's, both with the new column.
    versions = history.where("customer_id = 3").orderBy("_seq").select("nick").collect()
    assert [r["nick"] for r in versions] == ["none", "three"]


def source_sql_at_batch(monkeypatch, mariadb, config, batch: int, sql: str, *, after: bool = False) -> None:
    """Run ``sql`` on the source as snapshot batch ``batch`` starts (or once it is committed).
    With 8 chunks of 50 customers, 2 per batch, the first two batches read ids 1-150 and 351-400."""
    real = snapshots.snapshot_batch
    started: list[int] = []

    def with_sql(*args, **kwargs):
        started.append(1)
        if len(started) == batch and not after:
            run_source_sql(mariadb, config.source.database, sql)
        done = real(*args, **kwargs)
        if len(started) == batch and after:
            run_source_sql(mariadb, config.source.database, sql)
        return done

    monkeypatch.setattr(snapshots, "snapshot_batch", with_sql)


def test_a_ddl_while_the_snapshot_reads_chunks_has_the_chunks_read_after_it_read_again(
        spark, config, mariadb, monkeypatch, caplog):
    # 8 chunks of 50 customers, 2 per commit: the last (unbounded) chunk and ids 1-50 first.
    config = replace(config, defaults=replace(config.defaults, chunk_size=50, commit_rows=100))
    # As the third batch starts, after the pipeline's check for changed columns: that batch is
    # read with the old ones (the next batches are left to be read after the catch-up).
    source_sql_at_batch(monkeypatch, mariadb, config, 3, """
        UPDATE customers SET tier = 'gold' WHERE customer_id IN (3, 390);
        ALTER TABLE customers ADD COLUMN nick VARCHAR(20) NOT NULL DEFAULT 'none';
        UPDATE customers SET nick = 'early' WHERE customer_id = 5;
        UPDATE customers SET nick = 'late', tier = 'silver' WHERE customer_id = 200;
        DELETE FROM customers WHERE customer_id = 250;
    """)
    spec = TableSpec("customers", "customers")
    with caplog.at_level("INFO"):
        (result,) = Pipeline(config, spark, "run-1").ingest([spec])
    assert result.status == "success", result.message
    assert "read after it are read again" in caplog.text
    assert result.snapshot_rows > 400  # the chunks read after the DDL, twice
    assert_silver_equals_source(spark, config, "customers")
    assert bronze_duplicate_changes(spark, config, "customers") == 0
    bronze = spark.read.format("delta").load(config.table_path("bronze", "customers"))
    assert bronze.where("_op = 'r'").count() == len(source_rows(config, "customers"))  # one read per key
    # Later changes flow as usual.
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET nick = 'after' WHERE customer_id = 300;")
    (later,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert later.status == "success" and later.binlog_rows == 1
    assert_silver_equals_source(spark, config, "customers")


DURING_SNAPSHOT = {
    "add": """
        UPDATE customers SET tier = 'gold' WHERE customer_id IN (3, 390);
        ALTER TABLE customers ADD COLUMN nick VARCHAR(20) NOT NULL DEFAULT 'none';
        UPDATE customers SET nick = 'late' WHERE customer_id IN (5, 200);
    """,
    "drop": """
        UPDATE customers SET tier = 'gold' WHERE customer_id IN (3, 390);
        ALTER TABLE customers DROP COLUMN birth_date;
        UPDATE customers SET tier = 'silver' WHERE customer_id = 200;
    """,
    "rename": """
        UPDATE customers SET tier = 'gold' WHERE customer_id IN (3, 390);
        ALTER TABLE customers RENAME COLUMN full_name TO name;
        UPDATE customers SET name = 'Renamed' WHERE customer_id IN (5, 200);
    """,
    "widen": """
        UPDATE customers SET tier = 'gold' WHERE customer_id IN (3, 390);
        ALTER TABLE customers MODIFY credit_limit DECIMAL(16,3) NULL;
        UPDATE customers SET credit_limit = 1234567890.125 WHERE customer_id IN (5, 200);
    """,
    "truncate": """
        UPDATE customers SET tier = 'gold' WHERE customer_id IN (3, 390);
        TRUNCATE TABLE customers;
        INSERT INTO customers (customer_id, email, full_name, country, tier, created_at)
            VALUES (5, 'five@example.com', 'Five', 'FR', 'silver', NOW(3)),
                   (200, 'two-hundred@example.com', 'Two Hundred', 'DE', 'gold', NOW(3));
    """,
}


@pytest.mark.parametrize("kind", sorted(DURING_SNAPSHOT))
@pytest.mark.parametrize("as_batch_starts", [False, True], ids=["between-batches", "as-a-batch-starts"])
def test_each_ddl_kind_during_the_snapshot_ends_with_silver_equal_to_the_source_in_the_same_run(
        spark, config, mariadb, monkeypatch, kind, as_batch_starts):
    """Between two batches, the next batch's check for changed columns leaves its chunks to be
    read after the catch-up. As a batch starts (after that check), its chunks are read with the
    columns described before the DDL: a SELECT of a dropped or renamed column fails, the others
    read rows of the old shape. Either way the run applies the DDL and reads those chunks
    (again), without failing and without keeping rows of the old shape."""
    config = replace(config, defaults=replace(config.defaults, chunk_size=50, commit_rows=100))
    if as_batch_starts:
        source_sql_at_batch(monkeypatch, mariadb, config, 3, DURING_SNAPSHOT[kind])
    else:
        source_sql_at_batch(monkeypatch, mariadb, config, 2, DURING_SNAPSHOT[kind], after=True)
    spec = TableSpec("customers", "customers")
    (result,) = Pipeline(config, spark, "run-1").ingest([spec])
    assert result.status == "success", result.message
    assert_silver_equals_source(spark, config, "customers")
    assert bronze_duplicate_changes(spark, config, "customers") == 0
    assert _columns(spark, config, "bronze") == _columns(spark, config, "silver")
    if kind != "truncate":  # TRUNCATE deletes keys already read: their reads stay in bronze
        bronze = spark.read.format("delta").load(config.table_path("bronze", "customers"))
        assert bronze.where("_op = 'r'").count() == len(source_rows(config, "customers"))  # one read per key
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET tier = 'bronze' WHERE customer_id = 5;")
    (later,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert later.status == "success" and later.binlog_rows == 1
    assert_silver_equals_source(spark, config, "customers")


def test_a_ddl_after_an_interrupted_snapshot_is_applied_before_the_remaining_chunks_are_read(
        spark, config, mariadb, monkeypatch):
    config = replace(config, defaults=replace(config.defaults, chunk_size=50, commit_rows=100))
    real = snapshots.snapshot_batch
    batches: list[int] = []

    def killed_after_two_batches(*args, **kwargs):
        if len(batches) == 2:
            raise KeyboardInterrupt  # the run dies here; two batches (four chunks) are in bronze
        batches.append(1)
        return real(*args, **kwargs)

    spec = TableSpec("customers", "customers")
    monkeypatch.setattr(snapshots, "snapshot_batch", killed_after_two_batches)
    with pytest.raises(KeyboardInterrupt):
        Pipeline(config, spark, "run-1").ingest([spec])
    monkeypatch.setattr(snapshots, "snapshot_batch", real)
    run_source_sql(mariadb, config.source.database, """
        UPDATE customers SET tier = 'gold' WHERE customer_id = 3;
        ALTER TABLE customers ADD COLUMN nick VARCHAR(20) NOT NULL DEFAULT 'none';
        UPDATE customers SET nick = 'early' WHERE customer_id = 5;
        UPDATE customers SET nick = 'late' WHERE customer_id = 200;
    """)
    (result,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert result.status == "success", result.message
    assert_silver_equals_source(spark, config, "customers")
    assert bronze_duplicate_changes(spark, config, "customers") == 0
