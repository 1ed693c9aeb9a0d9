"""A catch-up's flushes in mid-range commit bronze on a thread of their own while it routes on:
the table moves on at once, the next flush waits for the commit in flight, and a commit that
failed puts its table back at its last landed checkpoint and stops it."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine.cdc import commits as commits_module
from lakehouse_engine.cdc.binlog import RowChange, row_images
from lakehouse_engine.cdc.commits import Commits, GtidTrail
from lakehouse_engine.cdc.routing import bronze_rows
from lakehouse_engine.cdc.tablecapture import TableCapture
from lakehouse_engine.errors import FatalError
from lakehouse_engine.ops import Op
from lakehouse_engine.sink.bronze import META_COLUMNS as META
from lakehouse_engine.source.introspect import ColumnInfo, TableSchema
from lakehouse_engine.source.typemap import row_converter
from lakehouse_engine.state.checkpoint import Checkpoint, Phase
from lakehouse_engine.state.positions import BinlogPosition
from lakehouse_engine.tables import TableSpec

SCHEMA = TableSchema("db", "t", (ColumnInfo("id", "int", "int(11)", False),), ("id",))
FIRST = BinlogPosition("mysql-bin.000001", 100)


@dataclass(frozen=True)
class _Config:
    lake_root: str = "/lake"

    def table_path(self, layer: Any, name: str) -> str:
        return f"/lake/{name}"


class _Bronze:
    """append_batch's stand-in: records each commit; a commit waits for ``release`` when told to,
    and fails for the batches in ``failing``."""

    def __init__(self) -> None:
        self.landed: list[tuple[int, int]] = []  # (batch, rows)
        self.release = threading.Event()
        self.release.set()
        self.failing: set[int] = set()
        self.running = 0
        self.overlapped = False

    def append_batch(self, spark: Any, path: str, rows: pa.Table, source: Any, checkpoint: Checkpoint) -> pa.Table:
        self.running += 1
        self.overlapped |= self.running > 1
        try:
            self.release.wait(10)
            if checkpoint.batch in self.failing:
                raise OSError("disk full")
            self.landed.append((checkpoint.batch, rows.num_rows))
            return rows
        finally:
            self.running -= 1


@pytest.fixture
def lake(monkeypatch) -> _Bronze:
    fake = _Bronze()
    monkeypatch.setattr(commits_module.bronze, "append_batch", fake.append_batch)
    return fake


def _table() -> TableCapture:
    return TableCapture(TableSpec("t", "t"), SCHEMA, Checkpoint("t", 1, Phase.BINLOG, "r0", position=FIRST),
                        FIRST, None, row_converter(SCHEMA, "image"))


def _route(capture: TableCapture, at: BinlogPosition, *ids: int) -> None:
    changes = [RowChange("t", Op.INSERT, {"id": i}, at, n, 1_700_000_000) for n, i in enumerate(ids)]
    capture.rows.extend(bronze_rows(capture, row_images(changes), "run"))


def _commits() -> Commits:
    return Commits(_Config(), None, "run", GtidTrail(None))  # type: ignore[arg-type]


def test_a_flush_ahead_moves_the_table_on_at_once_and_settling_records_the_landed_batch(lake):
    commits, table = _commits(), _table()
    lake.release.clear()  # the commit is held in flight
    _route(table, BinlogPosition("mysql-bin.000001", 200), 1, 2)
    commits.flush({"t": table}, BinlogPosition("mysql-bin.000001", 200), ahead=True)
    assert lake.landed == [] and not table.rows
    assert (table.checkpoint.batch, table.start) == (2, BinlogPosition("mysql-bin.000001", 200))
    _route(table, BinlogPosition("mysql-bin.000001", 300), 3)  # the next rows are of the next batch
    assert [row[:1] + row[1 + META.index("_batch"):][:1] for row in table.rows] == [(3, 3)]
    lake.release.set()
    commits.settle()
    assert lake.landed == [(2, 2)] and table.binlog_rows == 2 and sorted(table.recent) == [2]
    commits.close()


def test_the_next_flush_waits_for_the_commit_in_flight_so_a_table_commits_in_batch_order(lake):
    commits, table = _commits(), _table()
    for n in range(2, 6):
        _route(table, BinlogPosition("mysql-bin.000001", n * 100), n)
        commits.flush({"t": table}, BinlogPosition("mysql-bin.000001", n * 100), ahead=True)
    commits.close()
    assert lake.landed == [(2, 1), (3, 1), (4, 1), (5, 1)] and not lake.overlapped
    assert table.binlog_rows == 4 and table.failure is None


def test_a_failed_commit_in_flight_puts_the_table_back_at_its_last_landed_checkpoint_and_stops_it(lake):
    commits, table = _commits(), _table()
    lake.failing = {3}
    _route(table, BinlogPosition("mysql-bin.000001", 200), 1)
    commits.flush({"t": table}, BinlogPosition("mysql-bin.000001", 200), ahead=True)  # batch 2 lands
    _route(table, BinlogPosition("mysql-bin.000001", 300), 2)
    commits.flush({"t": table}, BinlogPosition("mysql-bin.000001", 300), ahead=True)  # batch 3 fails
    _route(table, BinlogPosition("mysql-bin.000001", 400), 3)
    commits.flush({"t": table}, BinlogPosition("mysql-bin.000001", 400), ahead=True)  # settles, then skips it
    commits.close()
    assert lake.landed == [(2, 1)]
    assert isinstance(table.failure, FatalError) and "disk full" in str(table.failure)
    assert (table.checkpoint.batch, table.start) == (2, BinlogPosition("mysql-bin.000001", 200))
    assert not table.rows and table.binlog_rows == 1


def test_the_final_flush_commits_in_the_foreground(lake):
    commits, table = _commits(), _table()
    _route(table, BinlogPosition("mysql-bin.000001", 200), 1)
    commits.flush({"t": table}, BinlogPosition("mysql-bin.000001", 200), final=True, ahead=True)
    assert lake.landed == [(2, 1)] and table.binlog_rows == 1
