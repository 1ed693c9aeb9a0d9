"""Startup modes without a snapshot: silver holds exactly the rows changed after the start."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from lakehouse_engine.quality.dq import run_checks
from lakehouse_engine.quality.expectations import VALUES_CHECK
from lakehouse_engine.run.pipeline import Pipeline, TablesFailed
from lakehouse_engine.source import embedded
from lakehouse_engine.state.positions import BinlogPosition
from lakehouse_engine.tables import TableSpec

from .helpers import run_source_sql, silver_rows, source_rows

pytestmark = pytest.mark.integration

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


def _root_value(mariadb, sql: str):
    with embedded.root_connection(mariadb) as conn, conn.cursor() as cur:
        cur.execute(sql)
        row = cur.fetchone()
        return row[0] if row else None


def test_gtid_starts_after_that_transaction_even_in_an_older_binlog_file(spark, config, mariadb):
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET tier = 'gold' WHERE customer_id = 3;")
    gtid = _root_value(mariadb, "SELECT @@gtid_binlog_pos")  # the update above: not in silver
    # A rotation: the GTID's file is no longer the newest, and the changes span two files.
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET full_name = 'Next' WHERE customer_id = 6;")
    _root_value(mariadb, "FLUSH BINARY LOGS")
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET full_name = 'Later' WHERE customer_id = 4;")
    run_source_sql(mariadb, config.source.database, CHANGES)
    spec = TableSpec("customers", "customers", startup="gtid", start_gtid=gtid)
    (result,) = Pipeline(config, spark, "run-1").ingest([spec])
    assert result.snapshot_rows == 0 and result.binlog_rows == 7  # 6 (right after the GTID), 4, then CHANGES
    expected = {row for row in source_rows(config, "customers") if row[0] in (4, 5, 6, 9001)}
    assert silver_rows(spark, config, "customers") == expected


def test_timestamp_starts_at_the_first_transaction_dated_at_or_after_it(spark, config, mariadb):
    run_source_sql(mariadb, config.source.database, "UPDATE customers SET tier = 'gold' WHERE customer_id = 3;")
    # Binlog times are whole seconds: the start lies in a later second than the update above,
    # and the changes after it in a later second still.
    time.sleep(1.1)
    start = dt.datetime.now(dt.UTC)
    time.sleep(1.1)
    _root_value(mariadb, "FLUSH BINARY LOGS")  # the newest file opens after the start: the search goes back
    run_source_sql(mariadb, config.source.database, CHANGES)
    spec = TableSpec("customers", "customers", startup="timestamp", start_timestamp=start.isoformat())
    (result,) = Pipeline(config, spark, "run-1").ingest([spec])
    assert result.snapshot_rows == 0 and result.binlog_rows == 5
    assert silver_rows(spark, config, "customers") == _changed_since_start(config)


def test_a_gtid_the_source_never_logged_stops_the_table_naming_the_setting(spark, config, mariadb):
    logged = _root_value(mariadb, "SELECT @@gtid_binlog_pos")
    domain, server, seq = logged.split(",")[0].split("-")
    spec = TableSpec("customers", "customers", startup="gtid", start_gtid=f"{domain}-{server}-{int(seq) + 1000}")
    with pytest.raises(TablesFailed) as failed:
        Pipeline(config, spark, "run-1").ingest([spec])
    error = failed.value.errors["customers"]
    assert error.setting == "start_gtid" and "is not in the source's binlog" in str(error), str(error)
    assert "@@gtid_binlog_pos" in str(error)


def test_snapshot_only_copies_the_table_once_then_leaves_it_and_dq_compares_it_there(spark, config, mariadb):
    spec = TableSpec("customers", "customers", startup="snapshot", chunk_size=50)
    (first,) = Pipeline(config, spark, "run-1").ingest([spec])
    assert first.copied and first.snapshot_rows == 400
    copied = source_rows(config, "customers")
    assert silver_rows(spark, config, "customers") == copied
    run_source_sql(mariadb, config.source.database, CHANGES)
    (second,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert second.copied and (second.snapshot_rows, second.binlog_rows) == (0, 0)
    assert silver_rows(spark, config, "customers") == copied  # left as it was
    # Count and values are compared at the snapshot's end (the changes since carried back through
    # the binlog); no freshness check, silver stays there on purpose.
    (checked,) = run_checks(config, spark, [spec])
    assert checked.success, [c for c in checked.checks if not c.success]
    names = [c.expectation for c in checked.checks]
    assert VALUES_CHECK in names and any("row_count" in n for n in names) and not any("lag" in n for n in names)


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


def _gtid_position_at(mariadb, position: BinlogPosition) -> set[str]:
    with embedded.root_connection(mariadb) as conn, conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (position.file, position.offset))
        return set(cur.fetchone()[0].split(","))


def test_every_checkpoint_records_the_gtid_position_at_its_binlog_position_in_every_domain(
        spark, config, mariadb, monkeypatch):
    """A snapshot-phase checkpoint, a binlog one and a DDL one each carry the server's GTID
    position at their file/offset, with the writes of two replication domains interleaved."""
    from dataclasses import replace

    from lakehouse_engine.run import snapshots
    from lakehouse_engine.sink import bronze
    from lakehouse_engine.sink.log import deltalog
    from lakehouse_engine.state.checkpoint import Checkpoint

    run_source_sql(mariadb, config.source.database, """
        SET SESSION gtid_domain_id = 7;
        UPDATE customers SET tier = 'gold' WHERE customer_id = 3;
    """)
    config = replace(config, defaults=replace(config.defaults, chunk_size=50, commit_rows=100))
    real = snapshots.snapshot_batch
    batches: list[int] = []

    def killed_after_one_batch(*args, **kwargs):
        if batches:
            raise KeyboardInterrupt
        batches.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(snapshots, "snapshot_batch", killed_after_one_batch)
    spec = TableSpec("customers", "customers")
    with pytest.raises(KeyboardInterrupt):
        Pipeline(config, spark, "run-1").ingest([spec])
    path = config.table_path("bronze", "customers")
    during = bronze.latest_checkpoint(spark, path)
    assert during.phase == "snapshot" and during.position is not None
    assert set(during.gtid.split(",")) == _gtid_position_at(mariadb, during.position)
    assert {g.split("-")[0] for g in during.gtid.split(",")} >= {"0", "7"}

    monkeypatch.setattr(snapshots, "snapshot_batch", real)
    run_source_sql(mariadb, config.source.database, """
        UPDATE customers SET tier = 'silver' WHERE customer_id = 4;
        SET SESSION gtid_domain_id = 7;
        UPDATE customers SET tier = 'silver' WHERE customer_id = 5;
        ALTER TABLE customers ADD COLUMN nick VARCHAR(20) NULL;
        SET SESSION gtid_domain_id = 0;
        UPDATE customers SET nick = 'x' WHERE customer_id = 6;
    """)
    (result,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert result.status == "success", result.message
    after = bronze.latest_checkpoint(spark, path)
    assert after.phase == "binlog"
    assert set(after.gtid.split(",")) == _gtid_position_at(mariadb, after.position)
    ddl = [Checkpoint.from_json(c.user_metadata) for c in deltalog.commits_back(spark, path)
           if c.user_metadata is not None and '"ddl"' in c.user_metadata]
    assert len(ddl) == 1 and set(ddl[0].gtid.split(",")) == _gtid_position_at(mariadb, ddl[0].position)


def test_a_gtid_position_of_two_domains_starts_where_the_source_was_at_exactly_that_position(
        spark, config, mariadb):
    run_source_sql(mariadb, config.source.database, """
        UPDATE customers SET tier = 'gold' WHERE customer_id = 3;
        SET SESSION gtid_domain_id = 7;
        UPDATE customers SET tier = 'gold' WHERE customer_id = 4;
    """)
    position = _root_value(mariadb, "SELECT @@gtid_binlog_pos")  # both updates above: not in silver
    assert len(position.split(",")) >= 2
    run_source_sql(mariadb, config.source.database, """
        SET SESSION gtid_domain_id = 7;
        UPDATE customers SET tier = 'bronze' WHERE customer_id = 5;
        SET SESSION gtid_domain_id = 0;
        INSERT INTO customers (customer_id, email, full_name, country, tier, created_at)
            VALUES (9001, 'new@example.com', 'New Customer', 'DE', 'silver', NOW());
    """)
    spec = TableSpec("customers", "customers", startup="gtid", start_gtid=position)
    (result,) = Pipeline(config, spark, "run-1").ingest([spec])
    assert result.status == "success" and result.binlog_rows == 2, result.message
    assert silver_rows(spark, config, "customers") == _changed_since_start(config)
    # Domain 0 moved on after domain 7's transaction: that pair was never the source's position.
    domains = dict(g.split("-", 1) for g in position.split(","))
    later_0 = _root_value(mariadb, "SELECT @@gtid_binlog_pos")
    never = ",".join(g for g in later_0.split(",") if g.startswith("0-")) + f",7-{domains['7']}"
    bad = TableSpec("customers2", "customers", startup="gtid", start_gtid=never)
    with pytest.raises(TablesFailed) as excinfo:
        Pipeline(config, spark, "run-2").ingest([bad])
    (failed,) = excinfo.value.results
    assert failed.setting == "start_gtid" and "was never the source's GTID position" in failed.message
