"""An ingest with nothing to do is told from the lake's commit files and the source's binlog
head, without Spark, and only when every table is certainly idle: anything else takes the
ordinary path."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from lakehouse_engine.config.project import ProjectConfig
from lakehouse_engine.run import idle
from lakehouse_engine.state.checkpoint import Checkpoint, Phase
from lakehouse_engine.state.positions import BinlogPosition
from lakehouse_engine.tables import TableSpec

from .test_status import commit, snapshot_checkpoint

AT = BinlogPosition("mysql-bin.000002", 900)
LATER = BinlogPosition("mysql-bin.000002", 1200)


class Lake:
    """A local lake of commit files, and the config pointing at it."""

    def __init__(self, root: Path):
        self.root = root

    def table(self, name: str, checkpoint: Checkpoint, silver_batch: int | None) -> None:
        commit(self.root / "bronze" / name, 0, "WRITE", checkpoint.to_json())
        if silver_batch is not None:
            commit(self.root / "silver" / name, 0, "MERGE", json.dumps({"bronze_batch": silver_batch}))

    def config(self) -> ProjectConfig:
        return _Config(f"file:{self.root}")  # type: ignore[return-value]


class _Config:
    def __init__(self, lake_root: str):
        self.lake_root = lake_root

    def table_path(self, layer: str, table: str) -> str:
        return f"{self.lake_root}/{layer}/{table}"


@pytest.fixture
def lake(tmp_path, monkeypatch):
    monkeypatch.setattr(idle, "current_position", lambda conn: AT)  # the source's head
    return Lake(tmp_path)


def binlog(table: str, position: BinlogPosition = AT, batch: int = 4) -> Checkpoint:
    return Checkpoint(table, batch, Phase.BINLOG, "run-1", position=position)


def test_tables_at_the_head_with_silver_merged_are_reported_without_spark(lake):
    lake.table("orders", binlog("orders"), 4)
    lake.table("countries", binlog("countries", BinlogPosition("mysql-bin.000001", 5)), 4)
    specs = [TableSpec("orders", "orders"), TableSpec("countries", "countries", startup="snapshot")]
    results = idle.idle_results(lake.config(), specs, conn=None)
    assert [(r.table, r.batch, r.position, r.snapshot_rows + r.binlog_rows) for r in results] == [
        ("orders", 4, str(AT), 0), ("countries", 4, "mysql-bin.000001:5", 0)]
    assert results[1].copied  # a snapshot-only table stays copied, wherever the head is


@pytest.mark.parametrize("case", ["behind the head", "past the head", "silver behind", "snapshot", "never ingested",
                                  "refresh", "one of two"])
def test_any_table_that_may_have_work_sends_the_run_the_ordinary_way(lake, case):
    specs = [TableSpec("orders", "orders")]
    if case == "behind the head":
        lake.table("orders", binlog("orders", BinlogPosition("mysql-bin.000001", 4)), 4)
    elif case == "past the head":  # the source's binlog was reset: the ordinary path says so
        lake.table("orders", binlog("orders", LATER), 4)
    elif case == "silver behind":
        lake.table("orders", binlog("orders"), 3)
    elif case == "snapshot":
        lake.table("orders", replace(snapshot_checkpoint(4, {}), table="orders"), 4)
    elif case == "refresh":  # bronze began a new generation silver does not hold
        lake.table("orders", replace(binlog("orders"), generation=4), 4)
    elif case == "one of two":
        lake.table("orders", binlog("orders"), 4)
        specs.append(TableSpec("customers", "customers"))
    assert idle.idle_results(lake.config(), specs, conn=None) is None


def test_a_lake_only_spark_reads_is_never_idle(monkeypatch):
    monkeypatch.setattr(idle, "current_position", lambda conn: LATER)
    assert idle.idle_results(_Config("s3a://bucket/lake"), [TableSpec("orders", "orders")], conn=None) is None  # type: ignore[arg-type]
