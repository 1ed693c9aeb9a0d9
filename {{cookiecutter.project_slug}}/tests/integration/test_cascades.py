"""Foreign-key cascades: InnoDB applies them below the binlog, so a followed child of a cascading
key is refused (or, with on_cascade='ignore', ingested with a warning), never silently stale."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }}.engine.config.project import Layer
from {{ cookiecutter.package_name }}.engine.errors import ConfigError
from {{ cookiecutter.package_name }}.engine.run.pipeline import Pipeline, TablesFailed
from {{ cookiecutter.package_name }}.engine.source import embedded
from {{ cookiecutter.package_name }}.engine.source.cascades import find_cascades
from {{ cookiecutter.package_name }}.engine.source.connection import connection, query
from {{ cookiecutter.package_name }}.engine.tables import TableSpec

from .helpers import assert_silver_equals_source, run_source_sql, silver_rows, source_rows
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
        "the binlog does not carry cascaded changes, so silver would keep deleted rows; drop the cascade on the "
        "source (then re-snapshot with `make ingest TABLE=order_items FULL_REFRESH=1` if it may have fired since "
        "the table was first ingested), or set on_cascade='ignore' in its table module to accept stale rows"
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
