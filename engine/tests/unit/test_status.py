"""``status`` reads each table's progress from the Delta commit files, without Spark, and the
last run from target/run_results.json."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

from lakehouse_engine.run import status
from lakehouse_engine.snapshot.chunking import Chunk
from lakehouse_engine.state.checkpoint import Checkpoint, Phase, SnapshotProgress
from lakehouse_engine.state.positions import BinlogPosition

NOW = dt.datetime(2026, 1, 2, 12, 0, tzinfo=dt.UTC)
P1 = BinlogPosition("mysql-bin.000001", 400)
P2 = BinlogPosition("mysql-bin.000002", 900)


def commit(table: Path, version: int, operation: str, metadata: str | None, at: dt.datetime = NOW) -> None:
    """A Delta commit file as Delta writes it: commitInfo, then data file actions."""
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    info = {"timestamp": int(at.timestamp() * 1000), "operation": operation}
    if metadata is not None:
        info["userMetadata"] = metadata
    add = {"add": {"path": f"part-{version}.parquet", "stats": json.dumps({"numRecords": 3})}}
    (log / f"{version:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n" + json.dumps(add) + "\n")


def snapshot_checkpoint(batch: int, done: dict[int, BinlogPosition]) -> Checkpoint:
    chunks = (Chunk(0, None, (Decimal(10),)), Chunk(1, (Decimal(10),), (Decimal(20),)), Chunk(2, (Decimal(20),), None))
    return Checkpoint("orders", batch, Phase.SNAPSHOT, "run-1", snapshot=SnapshotProgress(("id",), chunks, done))


def test_a_snapshot_in_progress_shows_its_chunks_and_lowest_watermark(tmp_path):
    bronze = tmp_path / "bronze" / "orders"
    commit(bronze, 0, "CREATE TABLE", None)
    commit(bronze, 1, "WRITE", snapshot_checkpoint(1, {2: P2}).to_json())
    commit(bronze, 2, "WRITE", snapshot_checkpoint(2, {2: P2, 0: P1}).to_json(), NOW - dt.timedelta(minutes=5))
    commit(bronze, 3, "OPTIMIZE", None)  # maintenance commits carry no checkpoint
    state = status.read_local("orders", str(bronze), str(tmp_path / "silver" / "orders"))
    assert state.phase == "snapshot 2/3 chunks"
    assert state.checkpoint is not None and state.checkpoint.batch == 2
    assert state.position == P1
    assert state.silver_batch is None
    assert state.committed_at == NOW - dt.timedelta(minutes=5)


def test_the_binlog_phase_shows_the_position_and_the_batch_silver_applied(tmp_path):
    bronze, silver = tmp_path / "bronze" / "orders", tmp_path / "silver" / "orders"
    commit(bronze, 0, "WRITE", Checkpoint("orders", 7, Phase.BINLOG, "run-2", position=P2).to_json())
    commit(silver, 0, "WRITE", json.dumps({"bronze_batch": 5}))
    commit(silver, 1, "MERGE", json.dumps({"bronze_batch": 6}))
    commit(silver, 2, "OPTIMIZE", None)
    state = status.read_local("orders", f"file:{bronze}", f"file:{silver}")
    assert (state.phase, state.position, state.silver_batch) == ("binlog", P2, 6)
    lines = status.table_lines([state, status.TableState("customers")],
                               {"orders": status.lag(state, P2, {}, NOW)}, None, NOW)
    assert lines[1].split() == ["orders", "binlog", "7", "6", str(P2), "0", "bytes,", "0s", "0s", "ago", "-"]
    assert lines[2].split() == ["customers", "not", "ingested", "yet"]


def test_a_table_never_ingested_or_with_its_commits_cleaned_up(tmp_path):
    assert status.read_local("t", str(tmp_path / "none"), str(tmp_path / "none-s")).phase == "not ingested yet"
    bronze = tmp_path / "bronze"
    (bronze / "_delta_log").mkdir(parents=True)
    (bronze / "_delta_log" / "00000000000000000010.checkpoint.parquet").write_bytes(b"")
    state = status.read_local("t", str(bronze), str(tmp_path / "silver"))
    assert state.checkpoint is None and state.phase == status.LOG_CLEANED


def test_lag_in_bytes_across_binlog_files_and_in_time_since_the_table_was_last_complete():
    sizes = {"mysql-bin.000001": 1000, "mysql-bin.000002": 5000}
    synced = (NOW - dt.timedelta(seconds=42)).timestamp()
    at_p1 = status.TableState("orders", Checkpoint("orders", 3, Phase.BINLOG, "run-1", position=P1, synced_at=synced))
    assert status.lag(at_p1, P2, sizes, NOW) == "1,500 bytes, 42s"  # 600 left in file 1, 900 into file 2
    assert status.lag(at_p1, P1, sizes, NOW) == "0 bytes, 0s"  # at the head: fresh however old synced_at is
    # written before synced_at existed
    unknown = status.TableState("orders", Checkpoint("orders", 3, Phase.BINLOG, "run-1", position=P1))
    assert status.lag(unknown, P2, sizes, NOW) == "1,500 bytes, ?"
    assert status.lag(status.TableState("orders"), P2, sizes, NOW) == "-"


def test_the_last_run_and_each_tables_result(tmp_path):
    assert status.last_run(tmp_path) is None
    assert status.run_line(None, NOW) == "last run: none recorded (target/run_results.json)"
    (tmp_path / "run_results.json").write_text(json.dumps({
        "metadata": {"command": "ingest", "finished_at": (NOW - dt.timedelta(hours=2)).isoformat()},
        "status": "error", "message": "1 of 2 table(s) failed",
        "results": [{"table": "orders", "status": "success"}, {"table": "refunds", "status": "error"}],
    }))
    run = status.last_run(tmp_path)
    assert run is not None and run.tables == {"orders": "success", "refunds": "error"}
    assert status.run_line(run, NOW) == "last run: ingest error, finished 2h ago: 1 of 2 table(s) failed"
    (tmp_path / "run_results.json").write_text(json.dumps({
        "metadata": {"command": "dq"}, "status": "fail",
        "results": [{"table": "orders", "success": True}, {"table": "refunds", "success": False}]}))
    assert status.last_run(tmp_path).tables == {"orders": "pass", "refunds": "fail"}


def test_an_unreadable_run_results_file_is_no_last_run(tmp_path):
    (tmp_path / "run_results.json").write_text("{not json")
    assert status.last_run(tmp_path) is None


def test_a_full_refresh_under_way_is_shown_as_such_with_the_command_that_finishes_it(tmp_path):
    bronze, silver = tmp_path / "bronze" / "orders", tmp_path / "silver" / "orders"
    refresh = snapshot_checkpoint(12, {2: P2})
    commit(bronze, 0, "WRITE", Checkpoint("orders", 10, Phase.BINLOG, "run-1", position=P1).to_json())
    commit(bronze, 1, "WRITE", Checkpoint(**{**refresh.__dict__, "generation": 11}).to_json())
    commit(silver, 0, "WRITE", json.dumps({"bronze_batch": 10, "bronze_run": "run-1"}))
    state = status.read_local("orders", str(bronze), str(silver))
    assert state.phase == "refresh 1/3 chunks"
    lines = status.table_lines([state], None, None, NOW)
    assert lines[-1] == ("WARNING orders: a full refresh is under way: silver holds the table as it was before it; "
                         "`make ingest TABLE=orders` finishes it")


def test_silver_ahead_of_bronze_is_flagged_with_the_rebuild_command(tmp_path):
    bronze, silver = tmp_path / "bronze" / "orders", tmp_path / "silver" / "orders"
    commit(bronze, 0, "WRITE", Checkpoint("orders", 6, Phase.BINLOG, "run-1", position=P1).to_json())
    commit(silver, 0, "MERGE", json.dumps({"bronze_batch": 7, "bronze_run": "run-2"}))
    state = status.read_local("orders", str(bronze), str(silver))
    assert state.phase == "binlog" and "`make rebuild TABLE=orders`" in state.warning()
    warning = status.table_lines([state], None, None, NOW)[-1]
    assert warning.startswith("WARNING orders: silver has merged bronze batch 7")


def test_a_table_in_step_has_no_warning(tmp_path):
    bronze, silver = tmp_path / "bronze" / "orders", tmp_path / "silver" / "orders"
    commit(bronze, 0, "WRITE", Checkpoint("orders", 7, Phase.BINLOG, "run-1", position=P1, generation=3).to_json())
    commit(silver, 0, "MERGE", json.dumps({"bronze_batch": 7, "bronze_run": "run-1", "generation": 3}))
    state = status.read_local("orders", str(bronze), str(silver))
    assert state.warning() == "" and len(status.table_lines([state], None, None, NOW)) == 2
