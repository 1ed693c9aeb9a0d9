"""Foreign-key cascades: InnoDB applies them below the binlog, so a followed child of a cascading
key is refused (or, with on_cascade='ignore', ingested with a warning), never silently stale."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from lakehouse_engine.config.project import Layer, SnapshotMode
from lakehouse_engine.errors import ConfigError
from lakehouse_engine.run.pipeline import Pipeline, TablesFailed
from lakehouse_engine.source import embedded
from lakehouse_engine.source.cascades import CascadeCheck, find_cascades
from lakehouse_engine.source.connection import connection, query
from lakehouse_engine.source.introspect import describe_table
from lakehouse_engine.tables import TableSpec

from .helpers import assert_silver_equals_source, bronze_duplicate_changes, run_source_sql, silver_rows, source_rows
from .test_cli import cli, error_lines, run_results

pytestmark = pytest.mark.integration

PARENT_AND_CHILD = """
    CREATE TABLE parent (id INT NOT NULL PRIMARY KEY, code CHAR(2) NOT NULL, UNIQUE KEY uq_code (code));
    CREATE TABLE child (id INT NOT NULL PRIMARY KEY, parent_id INT NULL, note VARCHAR(20) NOT NULL);
    INSERT INTO parent VALUES (1, 'aa'), (2, 'bb'), (3, 'cc');
    INSERT INTO child VALUES (10, 1, 'x'), (11, 1, 'y'), (20, 2, 'z'), (30, 3, 'w');
"""
ON_DELETE_CASCADE = ("ALTER TABLE child ADD CONSTRAINT fk_child_parent FOREIGN KEY (parent_id) "
                     "REFERENCES parent (id) ON DELETE CASCADE;")
SPECS = [TableSpec("parent", "parent"), TableSpec("child", "child")]


def _exists(path: str) -> bool:
    return Path(path).exists()


def test_a_child_of_an_on_delete_cascade_is_refused_in_one_line_and_the_other_tables_go_on(config, mariadb):
    # The demo's order_items, made a cascading child of orders (the demo itself has no foreign keys).
    run_source_sql(mariadb, config.source.database, """
        SET foreign_key_checks = 0;
        ALTER TABLE order_items ADD CONSTRAINT fk_items_order FOREIGN KEY (order_id)
            REFERENCES orders (order_id) ON DELETE CASCADE;
    """)
    done = cli(config, "ingest", "--select", "orders", "order_items")
    assert done.returncode == 1, done.stderr[-3000:]
    assert error_lines(done.stderr) == [
        "ERROR [configuration]: table order_items: foreign key fk_items_order ON DELETE CASCADE from orders: "
        "the binlog does not carry cascaded changes, so silver would keep deleted rows; set on_cascade='apply' in "
        "its table module to derive them from the parent's changes, or drop the cascade on the source (then "
        "re-snapshot with `make ingest TABLE=order_items FULL_REFRESH=1` if it may have fired since the table was "
        "first ingested), or set on_cascade='ignore' to accept stale rows"
    ]
    results = {r["table"]: r for r in run_results(config)["results"]}
    assert (results["order_items"]["status"], results["order_items"]["category"]) == ("error", "configuration")
    assert results["orders"]["status"] == "success" and results["orders"]["snapshot_rows"] > 0
    assert not _exists(config.table_path(Layer.BRONZE, "order_items"))  # refused before any write


def test_a_table_that_gains_a_cascade_after_its_first_run_is_refused_and_full_refresh_keeps_its_lake(
        spark, config, mariadb):
    run_source_sql(mariadb, config.source.database, PARENT_AND_CHILD)
    Pipeline(config, spark, "run-1").ingest(SPECS)
    run_source_sql(mariadb, config.source.database, """
        ALTER TABLE child ADD COLUMN parent_code CHAR(2) NULL;
        ALTER TABLE child ADD CONSTRAINT fk_child_code FOREIGN KEY (parent_code)
            REFERENCES parent (code) ON UPDATE SET NULL;
    """)
    for run, full_refresh in (("run-2", False), ("run-3", True)):
        with pytest.raises(TablesFailed) as failed:
            Pipeline(config, spark, run).ingest(SPECS, full_refresh=full_refresh)
        error = failed.value.errors["child"]
        assert isinstance(error, ConfigError) and error.setting == "on_cascade"
        assert str(error).startswith("table child: foreign key fk_child_code ON UPDATE SET NULL from parent: the "
                                     "binlog does not carry cascaded changes, so silver would keep old key values;")
        assert set(failed.value.errors) == {"child"}
    # The refused table's lake is left as it was: a refusal drops nothing, even at a full refresh.
    assert spark.read.format("delta").load(config.table_path(Layer.SILVER, "child")).count() == 4
    assert_silver_equals_source(spark, config, "parent")


def test_ignore_ingests_the_child_with_one_warning_per_run_and_silver_keeps_the_cascaded_rows(
        spark, config, mariadb, caplog):
    run_source_sql(mariadb, config.source.database, PARENT_AND_CHILD + ON_DELETE_CASCADE)
    specs = [SPECS[0], TableSpec("child", "child", on_cascade="ignore")]
    pipeline = Pipeline(config, spark, "run-1")

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING and "fk_child_parent" in r.getMessage()]

    with caplog.at_level(logging.WARNING):
        pipeline.ingest(specs)
        assert warnings() == [
            "table child: foreign key fk_child_parent ON DELETE CASCADE from parent: the binlog does not carry "
            "cascaded changes, so silver keeps the rows and values the cascade changes (on_cascade='ignore')"
        ]
        run_source_sql(mariadb, config.source.database, "DELETE FROM parent WHERE id = 1;")
        pipeline.ingest(specs)  # the same pipeline (a follow process) does not warn again
        assert len(warnings()) == 1
        Pipeline(config, spark, "run-3").ingest(specs)  # a new run does
        assert len(warnings()) == 2
    assert_silver_equals_source(spark, config, "parent")
    # What 'ignore' accepts: the source's cascade deleted children 10 and 11, silver keeps them.
    assert len(source_rows(config, "child")) == 2
    assert {row[0] for row in silver_rows(spark, config, "child")} == {10, 11, 20, 30}


def test_detection_reads_the_rules_whether_or_not_the_user_may_see_referential_constraints(config, mariadb):
    """MariaDB shows REFERENTIAL_CONSTRAINTS only to a user with more than SELECT on the table:
    the ingest user's rules come from SHOW CREATE TABLE, root's from information_schema."""
    run_source_sql(mariadb, config.source.database, """
        CREATE TABLE region (country CHAR(2) NOT NULL, city VARCHAR(20) NOT NULL, PRIMARY KEY (country, city));
        CREATE TABLE owner (id INT NOT NULL PRIMARY KEY);
        CREATE TABLE `shop ``1``` (
            id INT NOT NULL PRIMARY KEY, city VARCHAR(20) NULL, country CHAR(2) NULL, owner_id INT NULL,
            CONSTRAINT `fk) ON DELETE CASCADE` FOREIGN KEY (owner_id) REFERENCES owner (id) ON DELETE RESTRICT,
            CONSTRAINT fk_shop_region FOREIGN KEY (country, city) REFERENCES region (country, city)
                ON DELETE SET NULL ON UPDATE CASCADE);
    """)
    database = config.source.database
    with connection(config.source) as conn:
        assert query(conn, "SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS "
                     "WHERE CONSTRAINT_SCHEMA = %s", (database,))[0][0] == 0  # hidden from the ingest user
        as_ingest = find_cascades(conn, database, "shop `1`")
        assert find_cascades(conn, database, "region") == ()
    with embedded.root_connection(mariadb, database) as conn:
        as_root = find_cascades(conn, database, "shop `1`")
    expected = [("fk_shop_region", ("country", "city"), ("country", "city"), "ON DELETE SET NULL ON UPDATE CASCADE")]
    for found in (as_ingest, as_root):
        assert [(c.constraint, c.columns, c.parent_columns, c.rules) for c in found] == expected


# on_cascade='apply': a parent and a child with two cascading keys to it, one by id and one by a
# binary-collated code, and a DATETIME the derived updates must write back unchanged.
APPLIED = """
    CREATE TABLE parent (id INT NOT NULL PRIMARY KEY, code CHAR(2) COLLATE utf8mb4_bin NOT NULL,
                         UNIQUE KEY uq_code (code));
    CREATE TABLE child (
        id INT NOT NULL PRIMARY KEY, parent_id INT NULL, parent_code CHAR(2) COLLATE utf8mb4_bin NULL,
        note VARCHAR(20) NOT NULL, seen DATETIME(3) NOT NULL DEFAULT '2024-01-02 03:04:05.678',
        CONSTRAINT fk_child_parent FOREIGN KEY (parent_id) REFERENCES parent (id) ON DELETE CASCADE,
        CONSTRAINT fk_child_code FOREIGN KEY (parent_code) REFERENCES parent (code)
            ON DELETE SET NULL ON UPDATE CASCADE);
    INSERT INTO parent VALUES (1, 'aa'), (2, 'bb'), (3, 'cc');
    INSERT INTO child (id, parent_id, parent_code, note) VALUES
        (10, 1, NULL, 'x'), (11, 1, NULL, 'y'), (20, 2, NULL, 'z'), (30, NULL, 'cc', 'w'), (40, NULL, 'bb', 'v');
"""
APPLY_SPECS = [TableSpec("parent", "parent"), TableSpec("child", "child", on_cascade="apply")]


def _derived(spark, config, run_id: str) -> list[tuple]:
    """The child's bronze changes written by ``run_id`` at a parent's event: (id, _op, note)."""
    bronze = spark.read.format("delta").load(config.table_path(Layer.BRONZE, "child"))
    rows = bronze.where(f"_run_id = '{run_id}' AND _op IN ('d', 'u')").orderBy("_seq").collect()
    return [(r["id"], r["_op"], r["parent_code"]) for r in rows]


def test_apply_derives_each_cascade_at_the_parent_change_so_silver_equals_the_source_row_for_row(
        spark, config, mariadb):
    run_source_sql(mariadb, config.source.database, APPLIED)
    Pipeline(config, spark, "run-1").ingest(APPLY_SPECS)
    # Child 20 moves under parent 1 and 11 away from it, 12 is added under it; the delete of parent 1
    # (ON DELETE CASCADE) then deletes 10, 12 and 20. Parent 3's new code cascades into 30; the
    # delete of parent 2 deletes 11 and sets 40's code NULL. 13 comes after parent 1 is back, and a
    # delete without foreign key checks cascades nothing (30 keeps 'cx').
    run_source_sql(mariadb, config.source.database, """
        UPDATE child SET parent_id = 1 WHERE id = 20;
        UPDATE child SET parent_id = 2 WHERE id = 11;
        INSERT INTO child (id, parent_id, note) VALUES (12, 1, 'new');
        DELETE FROM parent WHERE id = 1;
        UPDATE parent SET code = 'cx' WHERE id = 3;
        DELETE FROM parent WHERE id = 2;
        INSERT INTO parent VALUES (1, 'aa');
        INSERT INTO child (id, parent_id, note) VALUES (13, 1, 'again');
        SET SESSION foreign_key_checks = 0;
        DELETE FROM parent WHERE id = 3;
    """)
    results = Pipeline(config, spark, "run-2").ingest(APPLY_SPECS)
    assert [r.status for r in results] == ["success", "success"], [r.message for r in results]
    assert {row[0] for row in source_rows(config, "child")} == {13, 30, 40}
    assert_silver_equals_source(spark, config, "child")
    assert_silver_equals_source(spark, config, "parent")
    # Bronze holds each derived change as the child's own, at its parent's position.
    assert _derived(spark, config, "run-2") == [
        (20, "u", None), (11, "u", None),  # the child's own updates
        (10, "d", None), (12, "d", None), (20, "d", None),
        (30, "u", "cx"), (40, "u", None), (11, "d", None),  # one parent delete, its keys by name
    ]
    # Nothing is derived twice: a run with no changes leaves bronze and silver as they are.
    Pipeline(config, spark, "run-3").ingest(APPLY_SPECS)
    assert _derived(spark, config, "run-3") == []
    assert_silver_equals_source(spark, config, "child")


def test_apply_during_the_snapshot_derives_only_what_the_chunks_already_read_do_not_hold(
        spark, config, mariadb, monkeypatch):
    from .test_schema_evolution import source_sql_at_batch

    run_source_sql(mariadb, config.source.database, """
        CREATE TABLE parent (id INT NOT NULL PRIMARY KEY);
        CREATE TABLE child (id INT NOT NULL PRIMARY KEY, parent_id INT NOT NULL, note VARCHAR(8) NOT NULL,
            CONSTRAINT fk_child_parent FOREIGN KEY (parent_id) REFERENCES parent (id) ON DELETE CASCADE);
        INSERT INTO parent SELECT seq FROM seq_1_to_20;
        INSERT INTO child SELECT seq, seq % 20 + 1, 'n' FROM seq_1_to_400;
    """)
    # 8 chunks of 50, 2 per batch: after the second batch half the chunks are read, half not.
    config = replace(config, defaults=replace(config.defaults, chunk_size=50, commit_rows=100))
    source_sql_at_batch(monkeypatch, mariadb, config, 2, """
        DELETE FROM parent WHERE id IN (1, 2);
        UPDATE child SET parent_id = 5 WHERE id = 399;
        DELETE FROM parent WHERE id = 5;
        INSERT INTO parent VALUES (1);
        UPDATE child SET parent_id = 1 WHERE id = 299;
    """, after=True)
    # 299's chunk is read after all this: bronze then holds it under parent 1, which the cascade at
    # the delete of parent 1 must not touch (its chunk's read is newer than the delete).
    # Only the child is captured: the parent's events are read for its cascades alone.
    (result,) = Pipeline(config, spark, "run-1").ingest([TableSpec("child", "child", on_cascade="apply")])
    assert result.status == "success", result.message
    assert len(source_rows(config, "child")) == 400 - 60 - 1
    assert_silver_equals_source(spark, config, "child")
    assert bronze_duplicate_changes(spark, config, "child") == 0


def test_apply_refuses_in_one_line_the_cascades_it_cannot_derive_exactly(config, mariadb):
    run_source_sql(mariadb, config.source.database, """
        CREATE TABLE top (id INT NOT NULL PRIMARY KEY);
        CREATE TABLE mid (id INT NOT NULL PRIMARY KEY, top_id INT NOT NULL,
            FOREIGN KEY fk_mid_top (top_id) REFERENCES top (id) ON DELETE CASCADE);
        CREATE TABLE leaf (id INT NOT NULL PRIMARY KEY, mid_id INT NOT NULL,
            CONSTRAINT fk_leaf_mid FOREIGN KEY (mid_id) REFERENCES mid (id) ON DELETE CASCADE);
        CREATE TABLE node (id INT NOT NULL PRIMARY KEY, up INT NULL,
            CONSTRAINT fk_node_up FOREIGN KEY (up) REFERENCES node (id) ON DELETE CASCADE);
        CREATE TABLE tag (name VARCHAR(8) NOT NULL PRIMARY KEY);
        CREATE TABLE tagged (id INT NOT NULL PRIMARY KEY, tag VARCHAR(8) NULL,
            CONSTRAINT fk_tagged_tag FOREIGN KEY (tag) REFERENCES tag (name) ON UPDATE CASCADE);
    """)
    reasons = {
        "leaf": "its parent mid is itself the child of foreign key fk_mid_top ON DELETE CASCADE from top",
        "node": "it references its own table",
        "tagged": "column tag (varchar(8) utf8mb4_general_ci) compares by a collation",
        "mid": None,  # one level: applied
    }
    with connection(config.source) as conn:
        for table, reason in reasons.items():
            schema = describe_table(conn, config.source.database, table, None)
            spec = TableSpec(table, table, on_cascade="apply")
            if reason is None:
                assert [c.constraint for c in CascadeCheck().check(conn, schema, spec)] == ["fk_mid_top"]
                continue
            with pytest.raises(ConfigError) as refused:
                CascadeCheck().check(conn, schema, spec)
            assert str(refused.value).startswith(f"table {table}: on_cascade='apply' cannot derive the changes of "
                                                 "foreign key fk_"), str(refused.value)
            assert reason in str(refused.value) and "\n" not in str(refused.value)


def test_apply_stops_the_child_at_a_ddl_on_its_foreign_keys_and_at_a_parent_change_logged_as_a_statement(
        spark, config, mariadb):
    run_source_sql(mariadb, config.source.database, APPLIED)
    Pipeline(config, spark, "run-1").ingest(APPLY_SPECS)
    run_source_sql(mariadb, config.source.database, """
        DELETE FROM parent WHERE id = 1;
        ALTER TABLE child DROP FOREIGN KEY fk_child_code;
    """)
    with pytest.raises(TablesFailed) as failed:
        Pipeline(config, spark, "run-2").ingest(APPLY_SPECS)
    assert set(failed.value.errors) == {"child"}
    assert "may change the foreign keys whose cascades it applies (on_cascade='apply')" in str(
        failed.value.errors["child"])
    assert "FULL_REFRESH=1" in str(failed.value.errors["child"])
    # The fix it names: a full refresh copies the child as it is now.
    Pipeline(config, spark, "run-3").ingest(APPLY_SPECS, full_refresh=True)
    assert_silver_equals_source(spark, config, "child")
    run_source_sql(mariadb, config.source.database, """
        SET SESSION binlog_format = 'STATEMENT';
        DELETE FROM parent WHERE id = 2;
    """)
    with pytest.raises(TablesFailed) as failed:
        Pipeline(config, spark, "run-4").ingest(APPLY_SPECS)
    assert "its cascades cannot be derived: parent parent: a change was logged as a statement" in str(
        failed.value.errors["child"])


def test_apply_refuses_a_window_snapshot_before_any_write_and_follows_a_table_already_copied(
        spark, config, mariadb):
    """A window snapshot replays each chunk's window from the binlog, which lacks the cascades."""
    run_source_sql(mariadb, config.source.database, APPLIED)
    window = replace(config, defaults=replace(config.defaults, snapshot_mode=SnapshotMode.WINDOW))
    with pytest.raises(TablesFailed) as failed:
        Pipeline(window, spark, "run-1").ingest(APPLY_SPECS)
    assert set(failed.value.errors) == {"child"}
    assert "cannot derive cascades inside the windows of a window snapshot" in str(failed.value.errors["child"])
    assert not _exists(config.table_path(Layer.BRONZE, "child"))
    Pipeline(config, spark, "run-2").ingest(APPLY_SPECS)  # copied with the read view's position
    run_source_sql(mariadb, config.source.database, "DELETE FROM parent WHERE id = 1;")
    Pipeline(window, spark, "run-3").ingest(APPLY_SPECS)  # past its snapshot: no window is read
    assert_silver_equals_source(spark, config, "child")


def test_apply_moves_a_child_whose_key_holds_the_foreign_key_to_its_new_key(spark, config, mariadb):
    """An association table keyed by (order_code, line): ON UPDATE CASCADE changes its key."""
    run_source_sql(mariadb, config.source.database, """
        CREATE TABLE parent (code INT NOT NULL PRIMARY KEY);
        CREATE TABLE line (order_code INT NOT NULL, line INT NOT NULL, qty INT NOT NULL,
            PRIMARY KEY (order_code, line),
            CONSTRAINT fk_line_parent FOREIGN KEY (order_code) REFERENCES parent (code) ON UPDATE CASCADE);
        INSERT INTO parent VALUES (1), (2);
        INSERT INTO line VALUES (1, 1, 5), (1, 2, 6), (2, 1, 7);
    """)
    specs = [TableSpec("line", "line", on_cascade="apply")]
    Pipeline(config, spark, "run-1").ingest(specs)
    run_source_sql(mariadb, config.source.database, "UPDATE parent SET code = 10 WHERE code = 1;")
    (result,) = Pipeline(config, spark, "run-2").ingest(specs)
    assert result.status == "success", result.message
    assert {(r[0], r[1]) for r in source_rows(config, "line")} == {(10, 1), (10, 2), (2, 1)}
    assert_silver_equals_source(spark, config, "line")
