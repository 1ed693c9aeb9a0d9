"""When a catch-up that found none of a table's rows may keep the table's checkpoint in place."""

from __future__ import annotations

from lakehouse_engine.cdc.commits import idle_advance_held
from lakehouse_engine.cdc.tablecapture import TableCapture
from lakehouse_engine.state.checkpoint import Checkpoint, Phase, SnapshotProgress
from lakehouse_engine.state.positions import BinlogPosition
from lakehouse_engine.tables import TableSpec


def at(file: int, offset: int) -> BinlogPosition:
    return BinlogPosition(f"mysql-bin.{file:06d}", offset)


def capture(checkpoint: Checkpoint, hold_idle: bool = True) -> TableCapture:
    start = checkpoint.position or at(1, 4)
    return TableCapture(TableSpec("t", "t"), None, checkpoint, start, None,  # type: ignore[arg-type]
                        hold_idle=hold_idle)


BINLOG = Checkpoint("t", 7, Phase.BINLOG, "run", position=at(1, 500))


def test_an_idle_advance_in_the_same_binlog_file_is_held_in_follow_mode():
    assert idle_advance_held(capture(BINLOG), at(1, 900))


def test_an_idle_advance_is_committed_outside_follow_mode():
    assert not idle_advance_held(capture(BINLOG, hold_idle=False), at(1, 900))


def test_an_idle_advance_into_a_new_binlog_file_is_committed_so_old_files_can_be_purged():
    assert not idle_advance_held(capture(BINLOG), at(2, 4))


def test_the_first_advance_after_a_snapshot_is_committed():
    progress = SnapshotProgress(("id",), ())
    snapshot = Checkpoint("t", 3, Phase.SNAPSHOT, "run", snapshot=progress)
    assert not idle_advance_held(capture(snapshot), at(1, 900))
