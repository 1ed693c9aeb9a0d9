"""A seeded random changelog (inserts, updates, deletes, key changes, multi-row updates, a key
deleted and inserted again) applied in transactions and ingested in batches of varying size:
silver equals an independently kept model of the table after every ingest, and silver rebuilt
from the whole of bronze equals the incremental one, both before and after incremental merges
go on on top of a rebuild."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from lakehouse_engine.quality.dq import run_checks
from lakehouse_engine.quality.expectations import VALUES_CHECK
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.sink import bronze, silver
from lakehouse_engine.source import embedded
from lakehouse_engine.tables import TableSpec

pytestmark = pytest.mark.integration

TABLE = "random_changes"
SEED = 20261123
Row = tuple[str, int | None]  # name, amount


class Changelog:
    """Random statements, each applied to a Python model of the table as it is generated."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.model: dict[int, Row] = {}
        self.next_id = 1

    def value(self) -> Row:
        name = "".join(self.rng.choice("abcxyzÄé") for _ in range(self.rng.randint(0, 8)))
        return name, None if self.rng.random() < 0.2 else self.rng.randint(-1000, 1000)

    def insert(self, key: int | None = None) -> tuple[str, list]:
        if key is None:
            key, self.next_id = self.next_id, self.next_id + 1
        self.model[key] = self.value()
        return f"INSERT INTO {TABLE} (id, name, amount) VALUES (%s, %s, %s)", [key, *self.model[key]]

    def statement(self) -> tuple[str, list]:
        kind = self.rng.choice(["insert", "insert", "update", "update", "delete", "rekey", "range", "again"])
        if kind == "insert" or not self.model:
            return self.insert()
        key = self.rng.choice(sorted(self.model))
        if kind == "update":
            self.model[key] = self.value()
            return f"UPDATE {TABLE} SET name = %s, amount = %s WHERE id = %s", [*self.model[key], key]
        if kind == "delete":
            del self.model[key]
            return f"DELETE FROM {TABLE} WHERE id = %s", [key]
        if kind == "rekey":  # the key itself changes: a delete and an insert in one row event
            new, self.next_id = self.next_id, self.next_id + 1
            self.model[new] = self.model.pop(key)
            return f"UPDATE {TABLE} SET id = %s WHERE id = %s", [new, key]
        if kind == "range":  # one statement, many rows; NULL + 1 stays NULL
            high = key + self.rng.randint(0, 30)
            for k in [k for k in self.model if key <= k <= high]:
                name, amount = self.model[k]
                self.model[k] = (name, None if amount is None else amount + 1)
            return f"UPDATE {TABLE} SET amount = amount + 1 WHERE id BETWEEN %s AND %s", [key, high]
        del self.model[key]  # "again": deleted, then inserted again with other values
        return (f"DELETE FROM {TABLE} WHERE id = %s", [key])

    def transactions(self, count: int) -> Iterator[list[tuple[str, list]]]:
        for _ in range(count):
            statements = [self.statement() for _ in range(self.rng.randint(1, 6))]
            if statements[-1][0].startswith("DELETE") and self.rng.random() < 0.5:
                statements.append(self.insert(statements[-1][1][0]))  # the same key comes back
            yield statements


def run(server: embedded.EmbeddedServer, database: str, transactions) -> None:
    with embedded.root_connection(server, database) as conn, conn.cursor() as cur:
        for statements in transactions:
            conn.begin()
            for sql, args in statements:
                cur.execute(sql, args)
            conn.commit()


def rows_of(spark, path: str) -> dict[int, Row]:
    frame = spark.read.format("delta").load(path).select("id", "name", "amount")
    return {r["id"]: (r["name"], r["amount"]) for r in frame.collect()}


def test_incremental_silver_rebuilt_silver_and_an_independent_model_agree(spark, config, mariadb, tmp_path):
    database = config.source.database
    log = Changelog(SEED)
    with embedded.root_connection(mariadb, database) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {TABLE} (id INT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL, amount INT NULL)")
    run(mariadb, database, [[log.insert() for _ in range(150)]])
    spec = TableSpec(TABLE, TABLE, chunk_size=40)  # a few snapshot chunks
    silver_path = config.table_path("silver", TABLE)
    bronze_path = config.table_path("bronze", TABLE)

    Pipeline(config, spark, "run-0").ingest([spec])
    assert rows_of(spark, silver_path) == log.model
    for round_ in range(1, 9):
        run(mariadb, database, log.transactions(log.rng.randint(5, 25)))
        if round_ % 3 == 0:
            continue  # two rounds of changes in one ingest
        Pipeline(config, spark, f"run-{round_}").ingest([spec])
        assert rows_of(spark, silver_path) == log.model, f"after round {round_}"
    Pipeline(config, spark, "run-again").ingest([spec])  # nothing new: nothing changes
    Pipeline(config, spark, "run-again-2").ingest([spec])
    assert rows_of(spark, silver_path) == log.model

    rebuilt = str(tmp_path / "rebuilt")
    silver.rebuild(spark, bronze_path=bronze_path, silver_path=rebuilt, key=("id",), table=TABLE)
    assert rows_of(spark, rebuilt) == rows_of(spark, silver_path) == log.model

    # Rebuild the real silver, then merge more changes on top: still the model.
    silver.rebuild(spark, bronze_path=bronze_path, silver_path=silver_path, key=("id",), table=TABLE)
    run(mariadb, database, log.transactions(15))
    Pipeline(config, spark, "run-after-rebuild").ingest([spec])
    assert rows_of(spark, silver_path) == log.model
    # The checkpoint's GTID is the server's own GTID position at the checkpoint's file/offset.
    checkpoint = bronze.latest_checkpoint(spark, bronze_path)
    with embedded.root_connection(mariadb, database) as conn, conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (checkpoint.position.file, checkpoint.position.offset))
        assert checkpoint.gtid is not None and checkpoint.gtid == cur.fetchone()[0]
    (checked,) = run_checks(config, spark, [spec])
    assert checked.success, [c for c in checked.checks if not c.success]
    assert any(c.expectation == VALUES_CHECK for c in checked.checks)


def test_a_long_catch_up_merges_silver_midway_and_still_equals_the_model(spark, config, mariadb, monkeypatch):
    from dataclasses import replace

    from delta.tables import DeltaTable

    from lakehouse_engine.cdc import commits

    table = "random_midway"
    database = config.source.database
    log = Changelog(SEED + 1)
    with embedded.root_connection(mariadb, database) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id INT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL, amount INT NULL)")
    statements = [[(sql.replace(TABLE, table), args) for sql, args in t] for t in [[log.insert() for _ in range(60)]]]
    run(mariadb, database, statements)
    spec = TableSpec(table, table, chunk_size=25)
    silver_path = config.table_path("silver", table)
    Pipeline(config, spark, "midway-0").ingest([spec])
    # Small budgets: bronze batches of about 7 rows, silver takes them every 20 held rows.
    monkeypatch.setattr(commits, "HELD_ROWS", 20)
    config = replace(config, defaults=replace(config.defaults, flush_rows=7))
    before = DeltaTable.forPath(spark, silver_path).history().count()
    run(mariadb, database, [[(sql.replace(TABLE, table), args) for sql, args in t] for t in log.transactions(40)])
    Pipeline(config, spark, "midway-1").ingest([spec])
    assert rows_of(spark, silver_path) == log.model
    history = DeltaTable.forPath(spark, silver_path).history().limit(
        DeltaTable.forPath(spark, silver_path).history().count() - before).collect()
    merges = [h for h in history if h["operation"] == "MERGE"]
    assert len(merges) >= 3, [h["operation"] for h in history]  # midway merges, then the last one
