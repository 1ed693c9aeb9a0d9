"""SCD type 2 silver: every version of a key, each valid for exactly the changes from the one that
made it to the next one, through snapshot rows, many updates in one batch and over several,
deletes, a key inserted again and a key change; rebuilt from bronze, the same versions."""

from __future__ import annotations

import pytest

from lakehouse_engine.quality.dq import run_checks
from lakehouse_engine.quality.expectations import VALUES_CHECK
from lakehouse_engine.quality.reconcile import KeyDifference
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.run.repair import rewrite_keys
from lakehouse_engine.sink import silver
from lakehouse_engine.sink.history import current_rows
from lakehouse_engine.tables import TableSpec

from .helpers import run_source_sql, table_schema

pytestmark = pytest.mark.integration

TABLE = "priced"
SPEC = TableSpec(TABLE, TABLE, scd_type=2)


def versions(spark, path: str) -> list[tuple]:
    frame = spark.read.format("delta").load(path)
    rows = frame.select("id", "price", "_seq", "_end_seq", "_valid_from", "_valid_to", "_is_current").collect()
    return sorted((tuple(r) for r in rows), key=lambda r: (r[0], r[2]))


def test_history_keeps_every_version_with_exact_intervals_and_a_rebuild_makes_the_same(spark, config, mariadb):
    database = config.source.database
    run_source_sql(mariadb, database, f"""
        CREATE TABLE {TABLE} (id INT NOT NULL PRIMARY KEY, price INT NOT NULL);
        INSERT INTO {TABLE} VALUES (1, 100), (2, 200), (3, 300);
    """)
    Pipeline(config, spark, "run-0").ingest([SPEC])
    prices = [100]
    for run in range(1, 4):  # ten updates of key 1: three in a batch, then four, then three
        updates = 3 if run != 2 else 4
        statements = []
        for _ in range(updates):
            prices.append(prices[-1] + 1)
            statements.append(f"UPDATE {TABLE} SET price = {prices[-1]} WHERE id = 1;")
        if run == 2:
            statements += [f"DELETE FROM {TABLE} WHERE id = 2;", f"UPDATE {TABLE} SET id = 30 WHERE id = 3;"]
        if run == 3:
            statements.append(f"INSERT INTO {TABLE} VALUES (2, 222);")  # the deleted key again
        run_source_sql(mariadb, database, "\n".join(statements))
        Pipeline(config, spark, f"run-{run}").ingest([SPEC])

    path = config.table_path("silver", TABLE)
    history = versions(spark, path)
    one = [v for v in history if v[0] == 1]
    assert [v[1] for v in one] == prices  # every version, in order
    assert all(v[3] == following[2] for v, following in zip(one, one[1:], strict=False))  # [_seq, _end_seq)
    assert [v[6] for v in one] == [False] * 10 + [True] and one[-1][3] is None and one[-1][5] is None
    assert all(v[4] is not None for v in one) and all(v[5] is not None for v in one[:-1])  # times known
    # The intervals are exactly bronze's changes of the key, in binlog order.
    bronze = spark.read.format("delta").load(config.table_path("bronze", TABLE)).where("id = 1")
    assert [v[2] for v in one] == sorted(r["_seq"] for r in bronze.select("_seq").collect())

    two = [v for v in history if v[0] == 2]
    assert [(v[1], v[6]) for v in two] == [(200, False), (222, True)]
    assert two[0][3] < two[1][2]  # closed by the delete, which came before the insert
    assert [(v[1], v[6], v[3] is None) for v in history if v[0] in (3, 30)] == [(300, False, False), (300, True, True)]

    current = {(r["id"], r["price"]) for r in current_rows(spark.read.format("delta").load(path)).collect()}
    assert current == {(1, prices[-1]), (2, 222), (30, 300)}
    (checked,) = run_checks(config, spark, [SPEC])  # dq compares the current versions
    assert checked.success, [c for c in checked.checks if not c.success]
    assert any(c.expectation == VALUES_CHECK and c.success for c in checked.checks)

    Pipeline(config, spark, "run-again").ingest([SPEC])  # nothing new: no new version
    assert versions(spark, path) == history
    rebuilt = str(config.target_dir / "rebuilt")
    silver.rebuild(spark, bronze_path=config.table_path("bronze", TABLE), silver_path=rebuilt, key=("id",),
                   table=TABLE, scd_type=2)
    assert versions(spark, rebuilt) == history


def test_changes_read_again_after_a_repair_add_no_version(spark, config, mariadb):
    database = config.source.database
    run_source_sql(mariadb, database, f"""
        CREATE TABLE {TABLE} (id INT NOT NULL PRIMARY KEY, price INT NOT NULL);
        INSERT INTO {TABLE} VALUES (1, 100), (2, 200);
    """)
    Pipeline(config, spark, "run-0").ingest([SPEC])
    run_source_sql(mariadb, database, f"UPDATE {TABLE} SET price = 101 WHERE id = 1;")
    # The repair reads key 1 after that update; the catch-up then reads the update again.
    # Key 2 is changed and then deleted before the repair reads: the repair closes its version
    # with a delete, and the update read again afterwards must not open one.
    run_source_sql(mariadb, database, f"""
        UPDATE {TABLE} SET price = 201 WHERE id = 2;
        DELETE FROM {TABLE} WHERE id = 2;
    """)
    keys = [KeyDifference("id=1", "test", (1,)), KeyDifference("id=2", "test", (2,))]
    rewrite_keys(config, spark, SPEC, table_schema(config, TABLE), keys, "repair")
    Pipeline(config, spark, "run-1").ingest([SPEC])
    history = versions(spark, config.table_path("silver", TABLE))
    assert [(v[1], v[6]) for v in history if v[0] == 1] == [(100, False), (101, True)]
    assert [(v[1], v[6]) for v in history if v[0] == 2] == [(200, False)]
