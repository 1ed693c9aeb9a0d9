"""Silver's MERGE in Arrow (``dvmerge``) against Delta's own, on real Delta tables read by Spark:
the same silver batch after batch, deletion vectors Spark reads, writes and compacts, tables left
to Delta's MERGE, and a commit landing meanwhile refused."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest
from delta.tables import DeltaTable
from pyspark.sql import types as T

from lakehouse_engine.errors import ConcurrentRunError
from lakehouse_engine.sink import bronze, dvmerge, silver, silverwrite
from lakehouse_engine.state.checkpoint import Checkpoint, Phase

pytestmark = pytest.mark.integration

SOURCE = T.StructType([T.StructField("id", T.IntegerType(), False), T.StructField("name", T.StringType(), True)])
COLUMNS = ["id", "name", "_op", "_seq"]


def _append(spark, path: str, batch: int, rows: list[tuple[int, str | None, str]], *, files: int = 1) -> None:
    """Bronze batch ``batch`` of (id, name, op) rows, in order, in ``files`` Parquet files."""
    now = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    data = [(i, name, op, Decimal(batch * 1_000_000 + n), "binlog.000001", 4, now, now, "run", batch)
            for n, (i, name, op) in enumerate(rows)]
    frame = spark.createDataFrame(data, bronze.bronze_schema(SOURCE)).repartition(files)
    bronze.append(frame, path, Checkpoint("t", batch, Phase.BINLOG, "run"))


def _random_batch(rng: random.Random, batch: int) -> list[tuple[int, str | None, str]]:
    """Changes of keys 0..399, several of one key in a batch, re-inserts of deleted keys too."""
    return [(rng.randrange(400), f"v{batch}-{n}", rng.choice("cuud")) for n in range(80)]


def _apply(spark, bronze_path: str, silver_path: str, upto: int) -> int:
    return silver.apply(spark, bronze_path=bronze_path, silver_path=silver_path, key=["id"], upto_batch=upto,
                        table="t")


def _rows(spark, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).select(*COLUMNS).collect())


@pytest.fixture
def counted(monkeypatch):
    """Counts the batches ``dvmerge`` committed (and those it left to Delta's MERGE)."""
    calls = {"arrow": 0, "delta": 0}
    real = dvmerge.merge

    def merge(*args, **kwargs):
        try:
            done = real(*args, **kwargs)
        except dvmerge.Unsupported:
            calls["delta"] += 1
            raise
        calls["arrow"] += done
        return done

    monkeypatch.setattr(dvmerge, "merge", merge)
    return calls


def test_the_arrow_merge_leaves_the_same_silver_as_deltas_merge_batch_after_batch(spark, tmp_path, monkeypatch,
                                                                                  counted):
    bronze_path = str(tmp_path / "bronze")
    ours, theirs = str(tmp_path / "silver-arrow"), str(tmp_path / "silver-delta")
    _append(spark, bronze_path, 1, [(i, f"s{i}", "r") for i in range(300)], files=3)
    _apply(spark, bronze_path, ours, 1)
    _apply(spark, bronze_path, theirs, 1)
    rng = random.Random(7)
    for batch in range(2, 9):
        _append(spark, bronze_path, batch, _random_batch(rng, batch))
        _apply(spark, bronze_path, ours, batch)
        with monkeypatch.context() as delta_only:
            delta_only.setattr(silverwrite, "merge_in_arrow", lambda *args, **kwargs: False)
            _apply(spark, bronze_path, theirs, batch)
        assert _rows(spark, ours) == _rows(spark, theirs), f"batch {batch}"
        assert silver.applied_batch(spark, ours) == batch
    assert counted == {"arrow": 7, "delta": 0}
    history = DeltaTable.forPath(spark, ours).history(1).select("operation", "operationMetrics").first()
    assert history[0] == "MERGE" and int(history[1]["numTargetRowsCopied"]) == 0
    assert int(history[1]["numTargetDeletionVectorsAdded"]) + int(history[1]["numTargetDeletionVectorsUpdated"]) > 0
    # The batch again, as a run that crashed after the commit would: the transaction id skips it.
    changes = spark.read.format("delta").load(bronze_path).where("_batch = 8").toArrow()
    version = DeltaTable.forPath(spark, ours).history(1).select("version").first()[0]
    assert not dvmerge.merge(spark, ours, changes, ["id"], [], [*SOURCE.fieldNames(), *silver.SILVER_META],
                             app_id="silver:t", batch=8)
    assert DeltaTable.forPath(spark, ours).history(1).select("version").first()[0] == version


def test_spark_merges_into_compacts_and_counts_a_silver_the_arrow_merge_marked(spark, tmp_path, monkeypatch):
    bronze_path, silver_path = str(tmp_path / "bronze"), str(tmp_path / "silver")
    _append(spark, bronze_path, 1, [(i, f"s{i}", "r") for i in range(200)])
    _apply(spark, bronze_path, silver_path, 1)
    _append(spark, bronze_path, 2, [(i, "arrow", "u") for i in range(0, 200, 3)] + [(5, None, "d")])
    _apply(spark, bronze_path, silver_path, 2)
    # Delta's MERGE then adds its own rows to the deletion vector the Arrow MERGE wrote ...
    _append(spark, bronze_path, 3, [(i, "delta", "u") for i in range(1, 200, 3)])
    with monkeypatch.context() as delta_only:
        delta_only.setattr(silverwrite, "merge_in_arrow", lambda *args, **kwargs: False)
        _apply(spark, bronze_path, silver_path, 3)
    # ... and the Arrow MERGE to the one Delta's wrote.
    _append(spark, bronze_path, 4, [(i, "again", "u") for i in range(2, 200, 3)] + [(7, None, "d"), (900, "n", "c")])
    _apply(spark, bronze_path, silver_path, 4)

    # 5, deleted in batch 2, is back by batch 4's update (an update of a missing key inserts it)
    expected = {i: "arrow" if i % 3 == 0 else "delta" if i % 3 == 1 else "again" for i in range(200) if i != 7}
    expected[900] = "n"
    table = spark.read.format("delta").load(silver_path)
    assert dict(table.select("id", "name").collect()) == expected
    assert table.count() == len(expected)  # answered from statistics and deletion vector cardinalities
    DeltaTable.forPath(spark, silver_path).optimize().executeCompaction()
    assert dict(spark.read.format("delta").load(silver_path).select("id", "name").collect()) == expected


def test_a_table_with_change_data_feed_is_merged_by_delta(spark, tmp_path, counted):
    bronze_path, silver_path = str(tmp_path / "bronze"), str(tmp_path / "silver")
    _append(spark, bronze_path, 1, [(i, f"s{i}", "r") for i in range(50)])
    _apply(spark, bronze_path, silver_path, 1)
    spark.sql(f"ALTER TABLE delta.`{silver_path}` SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    _append(spark, bronze_path, 2, [(3, "x", "u"), (4, None, "d")])
    enabled = DeltaTable.forPath(spark, silver_path).history(1).select("version").first()[0]

    _apply(spark, bronze_path, silver_path, 2)

    assert counted == {"arrow": 0, "delta": 1}
    changes = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", enabled + 1)
               .load(silver_path).where("_change_type != 'insert'").select("id", "_change_type").collect())
    assert sorted(tuple(r) for r in changes) == [(3, "update_postimage"), (3, "update_preimage"), (4, "delete")]


def _silver_one_batch_behind(spark, tmp_path, change: tuple[int, str, str]) -> tuple[str, str]:
    """Bronze batch 1 (50 snapshot rows) merged into silver, and batch 2 (``change``) not yet."""
    bronze_path, silver_path = str(tmp_path / "bronze"), str(tmp_path / "silver")
    _append(spark, bronze_path, 1, [(i, f"s{i}", "r") for i in range(50)])
    _apply(spark, bronze_path, silver_path, 1)
    _append(spark, bronze_path, 2, [change])
    return bronze_path, silver_path


def test_a_commit_landing_while_the_arrow_merge_works_fails_it_and_nothing_of_it_lands(spark, tmp_path,
                                                                                      monkeypatch):
    bronze_path, silver_path = _silver_one_batch_behind(spark, tmp_path, (3, "x", "u"))
    real = dvmerge._live_rows

    def other_run_commits_meanwhile(*args, **kwargs):
        DeltaTable.forPath(spark.newSession(), silver_path).delete("id = 40")  # its own session conf
        return real(*args, **kwargs)

    monkeypatch.setattr(dvmerge, "_live_rows", other_run_commits_meanwhile)
    with pytest.raises(ConcurrentRunError, match="another run changed silver"):
        _apply(spark, bronze_path, silver_path, 2)
    assert silver.applied_batch(spark, silver_path) == 1
    assert dict(spark.read.format("delta").load(silver_path).select("id", "name").collect())[3] == "s3"
    assert DeltaTable.forPath(spark, silver_path).history(1).select("operation").first()[0] == "DELETE"


def test_a_blind_append_of_the_same_batch_by_another_run_fails_the_arrow_merge(spark, tmp_path, monkeypatch):
    # Another run commits the same silver batch as an append (snapshot rows) while this run merges
    # it: Delta lets blind appends through a transaction that only read the table, so the app id
    # must count as read, or both commits land and the batch's keys are in silver twice.
    bronze_path, silver_path = _silver_one_batch_behind(spark, tmp_path, (60, "new", "c"))
    real = dvmerge._live_rows

    def other_run_appends_meanwhile(*args, **kwargs):
        rows = spark.read.format("delta").load(silver_path).limit(0)
        (rows.write.format("delta").mode("append").option("txnAppId", "silver:t").option("txnVersion", 2)
         .option("userMetadata", '{"bronze_batch": 2}').save(silver_path))
        return real(*args, **kwargs)

    monkeypatch.setattr(dvmerge, "_live_rows", other_run_appends_meanwhile)
    with pytest.raises(ConcurrentRunError, match="another run changed silver"):
        _apply(spark, bronze_path, silver_path, 2)
    history = DeltaTable.forPath(spark, silver_path).history().select("operation").collect()
    assert [r[0] for r in history][:2] == ["WRITE", "WRITE"]  # the other run's append, then batch 1's
