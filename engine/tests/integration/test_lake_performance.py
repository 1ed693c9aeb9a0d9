"""Silver MERGEs touch only what a batch changes (deletion vectors, key bounds), snapshot rows
skip the per-key window and the MERGE, and the bronze commit check reads the newest commits."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse_engine.sink import bronze, silver, silverwrite
from lakehouse_engine.sink.log import deltalog
from lakehouse_engine.state.checkpoint import Checkpoint, Phase

pytestmark = pytest.mark.integration

SOURCE = T.StructType([T.StructField("id", T.IntegerType(), False), T.StructField("name", T.StringType(), True)])
COLUMNS = ["id", "name", "_op", "_seq"]


def _append(spark, path: str, batch: int, rows: list[tuple[int, str, str]], *, files: int = 1) -> None:
    """Bronze batch ``batch`` of (id, name, op) rows, in ``files`` Parquet files."""
    now = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    data = [(i, name, op, Decimal(batch * 1_000_000 + n), "binlog.000001", 4, now, now, "run", batch)
            for n, (i, name, op) in enumerate(rows)]
    frame = spark.createDataFrame(data, bronze.bronze_schema(SOURCE)).repartition(files)
    bronze.append(frame, path, Checkpoint("t", batch, Phase.BINLOG, "run"))


def _snapshot_batch(spark, path: str, batch: int) -> None:
    """Snapshot rows of ids ``100 * batch ..`` + 99, one file: like one snapshot chunk."""
    _append(spark, path, batch, [(i, f"n{i}", "r") for i in range(100 * batch, 100 * batch + 100)])


def _apply(spark, tmp_path: Path, upto: int) -> int:
    return silver.apply(spark, bronze_path=str(tmp_path / "bronze"), silver_path=str(tmp_path / "silver"),
                        key=["id"], upto_batch=upto, table="t")


def _expected(spark, tmp_path: Path) -> set[tuple]:
    """Silver by definition: the newest change of every key, deletes dropped."""
    changes = spark.read.format("delta").load(str(tmp_path / "bronze"))
    latest = silver.latest_per_key(changes, ["id"]).where("_op != 'd'")
    return {tuple(r) for r in latest.select(*COLUMNS).collect()}


def _silver(spark, tmp_path: Path) -> list[tuple]:
    return [tuple(r) for r in spark.read.format("delta").load(str(tmp_path / "silver")).select(*COLUMNS).collect()]


def _last_commit(spark, path: str) -> tuple[str, dict[str, str]]:
    row = DeltaTable.forPath(spark, path).history(1).select("operation", "operationMetrics").first()
    return row[0], dict(row[1] or {})


def _properties(spark, path: str) -> dict[str, str]:
    return dict(DeltaTable.forPath(spark, path).detail().select("properties").first()[0])


def test_a_merge_into_silver_marks_changed_rows_with_deletion_vectors_instead_of_rewriting_files(spark, tmp_path):
    bronze_path = str(tmp_path / "bronze")
    for batch in (1, 2, 3):
        _snapshot_batch(spark, bronze_path, batch)
    _apply(spark, tmp_path, 3)
    silver_path = str(tmp_path / "silver")
    files = len(spark.read.format("delta").load(silver_path).inputFiles())
    assert _properties(spark, silver_path)["delta.enableDeletionVectors"] == "true"

    _append(spark, bronze_path, 4, [(105, "new", "u"), (205, "new", "u"), (305, None, "d"), (999, "ins", "c")])
    assert _apply(spark, tmp_path, 4) == 1

    operation, metrics = _last_commit(spark, silver_path)
    assert operation == "MERGE"
    assert int(metrics["numTargetRowsUpdated"]) == 2 and int(metrics["numTargetRowsDeleted"]) == 1
    # Without deletion vectors the MERGE removes every touched file and copies its other rows.
    assert int(metrics["numTargetDeletionVectorsAdded"]) >= 1
    assert int(metrics["numTargetFilesRemoved"]) == 0 < files
    assert int(metrics["numTargetRowsCopied"]) == 0
    assert sorted(_silver(spark, tmp_path)) == sorted(_expected(spark, tmp_path))


def test_a_merge_into_silver_lists_each_delta_log_no_more_than_it_must(spark, tmp_path, monkeypatch):
    # A listing reads the whole _delta_log folder (Hadoop stats every file of a local or HDFS log:
    # about 1.8 s at 50,000 files), and a follow merges every cycle. Silver's and bronze's logs
    # are listed once each (the deletion vector property was seen by this process's first
    # merge); it was 4 and 2.
    bronze_path, silver_path = str(tmp_path / "bronze"), str(tmp_path / "silver")
    _snapshot_batch(spark, bronze_path, 1)
    _apply(spark, tmp_path, 1)
    _binlog_batch(spark, bronze_path, 2)
    _apply(spark, tmp_path, 2)  # a follow's earlier cycle
    _binlog_batch(spark, bronze_path, 3)
    listed: list[str] = []
    real = deltalog.snapshot

    def counted(session, path):
        listed.append(path)
        return real(session, path)

    monkeypatch.setattr(deltalog, "snapshot", counted)
    assert _apply(spark, tmp_path, 3) == 1

    assert listed.count(silver_path) == 1 and listed.count(bronze_path) == 1
    assert sorted(_silver(spark, tmp_path)) == sorted(_expected(spark, tmp_path))


def test_silver_whose_deletion_vectors_were_turned_off_after_this_process_saw_them_is_still_merged_right(
        spark, tmp_path):
    bronze_path, silver_path = str(tmp_path / "bronze"), str(tmp_path / "silver")
    for batch in (1, 2):
        _snapshot_batch(spark, bronze_path, batch)
    _apply(spark, tmp_path, 2)
    _binlog_batch(spark, bronze_path, 3)
    _apply(spark, tmp_path, 3)  # a merge: this process has seen the property set
    spark.sql(f"ALTER TABLE delta.`{silver_path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')")

    _append(spark, bronze_path, 4, [(105, "new", "u"), (205, None, "d")])
    assert _apply(spark, tmp_path, 4) == 1

    assert _properties(spark, silver_path)["delta.enableDeletionVectors"] == "false"
    operation, metrics = _last_commit(spark, silver_path)
    assert operation == "MERGE" and int(metrics["numTargetFilesRemoved"]) >= 1  # files rewritten
    assert sorted(_silver(spark, tmp_path)) == sorted(_expected(spark, tmp_path))


def test_a_silver_table_created_without_its_properties_gets_them_at_its_next_merge(spark, tmp_path):
    bronze_path, silver_path = str(tmp_path / "bronze"), str(tmp_path / "silver")
    _snapshot_batch(spark, bronze_path, 1)
    # Silver as an older version (or the snapshot's file commits) made it: no table property.
    rows = spark.read.format("delta").load(bronze_path).select("id", "name", *silver.SILVER_META)
    rows.write.format("delta").option("userMetadata", json.dumps({"bronze_batch": 1})).save(silver_path)
    assert "delta.enableDeletionVectors" not in _properties(spark, silver_path)

    _append(spark, bronze_path, 2, [(105, "new", "u"), (106, None, "d")])
    _apply(spark, tmp_path, 2)

    assert _properties(spark, silver_path)["delta.enableDeletionVectors"] == "true"
    assert _properties(spark, silver_path)[bronze.CHECKPOINT_INTERVAL] == str(silverwrite.SILVER_CHECKPOINT_INTERVAL)
    operation, metrics = _last_commit(spark, silver_path)
    assert operation == "MERGE" and int(metrics["numTargetDeletionVectorsAdded"]) >= 1
    assert int(metrics["numTargetFilesRemoved"]) == 0
    assert sorted(_silver(spark, tmp_path)) == sorted(_expected(spark, tmp_path))


def test_a_merge_reads_no_silver_file_outside_the_key_range_of_its_batch(spark, tmp_path):
    bronze_path, silver_path = str(tmp_path / "bronze"), str(tmp_path / "silver")
    for batch in (1, 2, 3, 4):
        _snapshot_batch(spark, bronze_path, batch)
    _apply(spark, tmp_path, 4)
    by_low_key = (spark.read.format("delta").load(silver_path).groupBy(F.input_file_name().alias("file"))
                  .agg(F.min("id").alias("low")).orderBy("low").collect())
    assert [r["low"] for r in by_low_key] == [100, 200, 300, 400]  # one file per snapshot chunk
    # A file the MERGE must not open: reading it would fail the MERGE.
    Path(by_low_key[0]["file"].removeprefix("file:")).unlink()

    _append(spark, bronze_path, 5, [(301, "new", "u"), (402, None, "d"), (500, "x", "c")])
    _apply(spark, tmp_path, 5)

    operation, metrics = _last_commit(spark, silver_path)
    assert operation == "MERGE"
    assert [metrics[f"numTargetRows{m}"] for m in ("Updated", "Deleted", "Inserted")] == ["1", "1", "1"]


def test_snapshot_batches_give_silver_the_same_rows_as_the_merge_would_and_keep_the_chunk_files(spark, tmp_path):
    bronze_path, silver_path = str(tmp_path / "bronze"), str(tmp_path / "silver")
    for batch in range(1, 7):
        _snapshot_batch(spark, bronze_path, batch)
    _apply(spark, tmp_path, 4)  # creates silver
    _apply(spark, tmp_path, 6)  # snapshot rows into an existing silver

    operations = [r[0] for r in DeltaTable.forPath(spark, silver_path).history().select("operation").collect()]
    assert operations == ["WRITE", "WRITE"]  # no MERGE
    # The per-key window would shuffle the rows into a few files; rows copied as they are keep
    # bronze's files, one per snapshot chunk, which the MERGE's key bounds then skip.
    assert len(spark.read.format("delta").load(silver_path).inputFiles()) == 6
    assert sorted(_silver(spark, tmp_path)) == sorted(_expected(spark, tmp_path))
    assert len(_silver(spark, tmp_path)) == 600

    _append(spark, bronze_path, 7, [(105, "new", "u"), (106, None, "d"), (700, "x", "c"), (700, "y", "u")])
    _apply(spark, tmp_path, 7)
    assert sorted(_silver(spark, tmp_path)) == sorted(_expected(spark, tmp_path))


def test_snapshot_rows_after_binlog_changes_are_merged_not_appended(spark, tmp_path):
    bronze_path = str(tmp_path / "bronze")
    _snapshot_batch(spark, bronze_path, 1)
    _append(spark, bronze_path, 2, [(105, "changed", "u"), (106, None, "d")])
    _apply(spark, tmp_path, 2)
    # Snapshot rows of keys silver already holds (a re-read): appending them would duplicate keys.
    _append(spark, bronze_path, 3, [(105, "reread", "r"), (107, "reread", "r")])

    _apply(spark, tmp_path, 3)

    assert _last_commit(spark, str(tmp_path / "silver"))[0] == "MERGE"
    rows = _silver(spark, tmp_path)
    assert len(rows) == len({r[0] for r in rows}) == 99
    assert sorted(rows) == sorted(_expected(spark, tmp_path))


def test_the_checkpoint_is_found_past_commits_that_carry_none(spark, tmp_path):
    bronze_path = str(tmp_path / "bronze")
    _snapshot_batch(spark, bronze_path, 1)
    _append(spark, bronze_path, 2, [(105, "x", "u")])
    DeltaTable.forPath(spark, bronze_path).optimize().executeCompaction()  # a commit without one

    checkpoint = bronze.latest_checkpoint(spark, bronze_path)

    assert checkpoint is not None and checkpoint.batch == 2
    assert silver.applied_batch(spark, str(tmp_path / "silver")) == -1
    assert bronze.latest_checkpoint(spark, str(tmp_path / "nothing")) is None


def _binlog_batch(spark, path: str, batch: int) -> None:
    """Bronze batch ``batch`` as a catch-up commits it: one update of id 1 through append_batch."""
    now = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    row = (1, f"v{batch}", "u", Decimal(batch * 1_000_000), "binlog.000001", 4, now, now, "run", batch)
    bronze.append_batch(spark, path, [row], SOURCE, Checkpoint("t", batch, Phase.BINLOG, "run"))


def test_bronze_commits_reach_version_ten_without_writing_a_delta_checkpoint(spark, tmp_path):
    # Delta's default writes a checkpoint (a Spark job, seconds) inside every 10th commit;
    # bronze is given an interval of 100, so a catch-up's commits do not pay for one.
    path = str(tmp_path / "bronze")
    _snapshot_batch(spark, path, 1)
    assert _properties(spark, path)[bronze.CHECKPOINT_INTERVAL] == str(bronze.BRONZE_CHECKPOINT_INTERVAL)
    # A table made before bronze was created with the interval gets it at its next binlog batch.
    spark.sql(f"ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES ('{bronze.CHECKPOINT_INTERVAL}')")
    for batch in range(2, 12):
        _binlog_batch(spark, path, batch)

    log = tmp_path / "bronze" / "_delta_log"
    assert len(list(log.glob("*.json"))) >= 11  # versions 0..10 at least: version 10 was committed
    assert _properties(spark, path)[bronze.CHECKPOINT_INTERVAL] == str(bronze.BRONZE_CHECKPOINT_INTERVAL)
    assert not list(log.glob("*.checkpoint*.parquet"))


def test_a_checkpoint_interval_set_on_bronze_by_the_team_stands(spark, tmp_path):
    path = str(tmp_path / "bronze")
    _snapshot_batch(spark, path, 1)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{bronze.CHECKPOINT_INTERVAL}' = '5')")

    _binlog_batch(spark, path, 2)

    assert _properties(spark, path)[bronze.CHECKPOINT_INTERVAL] == "5"


def test_silver_merges_reach_version_ten_without_writing_a_delta_checkpoint(spark, tmp_path):
    # A follow commits silver every cycle: Delta's default interval of 10 made every tenth
    # cycle pay a checkpoint (a Spark job, seconds) on the committing thread.
    bronze_path, silver_path = str(tmp_path / "bronze"), str(tmp_path / "silver")
    _snapshot_batch(spark, bronze_path, 1)
    _apply(spark, tmp_path, 1)
    assert _properties(spark, silver_path)[bronze.CHECKPOINT_INTERVAL] == str(silverwrite.SILVER_CHECKPOINT_INTERVAL)
    for batch in range(2, 13):
        _binlog_batch(spark, bronze_path, batch)
        assert _apply(spark, tmp_path, batch) == 1

    log = tmp_path / "silver" / "_delta_log"
    assert len(list(log.glob("*.json"))) >= 11  # versions 0..10 at least: version 10 was committed
    assert not list(log.glob("*.checkpoint*.parquet"))
    assert sorted(_silver(spark, tmp_path)) == sorted(_expected(spark, tmp_path))


def test_a_checkpoint_interval_set_on_silver_by_the_team_stands(spark, tmp_path):
    bronze_path, silver_path = str(tmp_path / "bronze"), str(tmp_path / "silver")
    _snapshot_batch(spark, bronze_path, 1)
    _apply(spark, tmp_path, 1)
    spark.sql(f"ALTER TABLE delta.`{silver_path}` UNSET TBLPROPERTIES ('delta.enableDeletionVectors')")
    spark.sql(f"ALTER TABLE delta.`{silver_path}` SET TBLPROPERTIES ('{bronze.CHECKPOINT_INTERVAL}' = '5')")

    _binlog_batch(spark, bronze_path, 2)
    _apply(spark, tmp_path, 2)  # this path is new to the process: the merge looks at its properties

    assert _properties(spark, silver_path)[bronze.CHECKPOINT_INTERVAL] == "5"
    assert _properties(spark, silver_path)["delta.enableDeletionVectors"] == "true"
