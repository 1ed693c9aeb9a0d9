"""Which bronze batches a catch-up holds for silver, and when silver takes them midway."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse_engine.cdc import commits as commits_module
from lakehouse_engine.cdc.commits import Commits, GtidTrail
from lakehouse_engine.cdc.tablecapture import TableCapture
from lakehouse_engine.state.checkpoint import Checkpoint, Phase, SnapshotProgress
from lakehouse_engine.state.positions import BinlogPosition
from lakehouse_engine.tables import TableSpec

AT = BinlogPosition("mysql-bin.000001", 500)


def _rows(n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64())})


def _capture(checkpoint: Checkpoint) -> TableCapture:
    return TableCapture(TableSpec("t", "t"), None, checkpoint, AT, None)  # type: ignore[arg-type]


def _commits(merged: list[dict[int, int]]) -> Commits:
    def merge(capture: TableCapture) -> None:  # what silver would take: batch -> rows
        merged.append({batch: rows.num_rows for batch, rows in capture.recent.items()})

    return Commits(None, None, "run", GtidTrail(None), merge_silver=merge)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def small_budget(monkeypatch):
    monkeypatch.setattr(commits_module, "HELD_ROWS", 10)


def test_batches_are_held_until_they_reach_the_budget_then_silver_takes_them_all_and_they_are_released():
    merged: list[dict[int, int]] = []
    commits, table = _commits(merged), _capture(Checkpoint("t", 1, Phase.BINLOG, "run", position=AT))
    commits._hold(table, 2, _rows(4))
    commits._hold(table, 3, _rows(5))
    assert merged == [] and sorted(table.recent) == [2, 3]
    commits._hold(table, 4, _rows(1))  # 10 rows held: silver takes batches 2-4
    assert merged == [{2: 4, 3: 5, 4: 1}] and table.recent == {}
    commits._hold(table, 5, _rows(3))  # held anew: the batches after the midway merge are complete
    assert sorted(table.recent) == [5]


def test_during_the_snapshot_silver_takes_no_binlog_batch_midway_and_the_held_ones_are_dropped():
    merged: list[dict[int, int]] = []
    snapshot = Checkpoint("t", 1, Phase.SNAPSHOT, "run", snapshot=SnapshotProgress(("id",), ()))
    commits, table = _commits(merged), _capture(snapshot)
    commits._hold(table, 2, _rows(12))
    assert merged == [] and table.recent == {}


def test_without_a_silver_merge_batches_beyond_the_budget_are_dropped_for_silver_to_read_from_bronze():
    table = _capture(Checkpoint("t", 1, Phase.BINLOG, "run", position=AT))
    commits = Commits(None, None, "run", GtidTrail(None))  # type: ignore[arg-type]
    commits._hold(table, 2, _rows(11))
    assert table.recent == {}
