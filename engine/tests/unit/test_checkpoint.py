import datetime as dt
from decimal import Decimal

from lakehouse_engine.snapshot.chunking import chunks_from_boundaries
from lakehouse_engine.state.checkpoint import Checkpoint, Phase, SnapshotProgress
from lakehouse_engine.state.positions import BinlogPosition


def progress() -> SnapshotProgress:
    chunks = chunks_from_boundaries([(Decimal("18446744073709551615"), "Éa", b"\x00\xff", dt.date(2024, 1, 2))])
    return SnapshotProgress(("a", "b", "c", "d"), tuple(chunks))


def test_checkpoints_round_trip_exact_key_values():
    done = progress().with_done({0: BinlogPosition("b.000001", 100), 1: BinlogPosition("b.000002", 4)})
    checkpoint = Checkpoint("t", 3, Phase.SNAPSHOT, "run", snapshot=done)
    again = Checkpoint.from_json(checkpoint.to_json())
    assert again == checkpoint
    assert again.snapshot.chunks[1].start[0] == Decimal("18446744073709551615")


def test_watermarks_and_pending_chunks():
    done = progress().with_done({1: BinlogPosition("b.000002", 4)})
    assert [c.index for c in done.pending] == [0]
    assert not done.complete
    done = done.with_done({0: BinlogPosition("b.000001", 9)})
    assert done.complete
    assert done.low_watermark == BinlogPosition("b.000001", 9)
    assert done.high_watermark == BinlogPosition("b.000002", 4)


def test_the_chunk_plan_is_kept_until_the_binlog_passes_every_watermark():
    done = progress().with_done({0: BinlogPosition("b.000001", 9), 1: BinlogPosition("b.000001", 50)})
    checkpoint = Checkpoint("t", 1, Phase.SNAPSHOT, "run", snapshot=done)
    inside = checkpoint.advanced_to(BinlogPosition("b.000001", 20), "run2")
    assert inside.snapshot is not None and inside.batch == 2 and inside.phase == "binlog"
    past = inside.advanced_to(BinlogPosition("b.000001", 50), "run2")
    assert past.snapshot is None and past.position == BinlogPosition("b.000001", 50)


def test_chunks_to_read_again_keep_the_plan_and_the_snapshot_phase_past_every_watermark():
    done = progress().with_done({1: BinlogPosition("b.000001", 50)})  # chunk 0 to be read again
    checkpoint = Checkpoint("t", 4, Phase.SNAPSHOT, "run", snapshot=done, position=BinlogPosition("b.000001", 60))
    later = checkpoint.advanced_to(BinlogPosition("b.000002", 4), "run2")
    assert later.snapshot == done and later.phase == Phase.SNAPSHOT
    assert later.position == BinlogPosition("b.000002", 4)


def test_synced_at_round_trips_and_an_intermediate_commit_keeps_the_earlier_time():
    first = Checkpoint("t", 1, Phase.BINLOG, "run", position=BinlogPosition("b.000001", 9), synced_at=1_700_000_000.25)
    assert Checkpoint.from_json(first.to_json()) == first
    mid_catch_up = first.advanced_to(BinlogPosition("b.000001", 50), "run2")  # the head was not reached
    assert mid_catch_up.synced_at == 1_700_000_000.25
    at_head = mid_catch_up.advanced_to(BinlogPosition("b.000001", 90), "run2", synced_at=1_700_000_060.0)
    assert at_head.synced_at == 1_700_000_060.0


def test_a_checkpoint_written_before_synced_at_existed_still_loads():
    old = '{"batch":4,"format":1,"phase":"binlog","position":["b.000001",9],"run_id":"r","snapshot":null,"table":"t"}'
    loaded = Checkpoint.from_json(old)
    assert loaded.synced_at is None and loaded.position == BinlogPosition("b.000001", 9)


def test_a_repair_mark_round_trips_and_the_next_batch_drops_it():
    position = BinlogPosition("b.000003", 120)
    repair = Checkpoint("t", 7, Phase.BINLOG, "run", position=position, repair=True)
    assert Checkpoint.from_json(repair.to_json()).repair
    assert "repair" not in Checkpoint("t", 7, Phase.BINLOG, "run", position=position).to_json()  # old form kept
    following = repair.advanced_to(BinlogPosition("b.000003", 500), "run-2")
    assert not following.repair and following.batch == 8


def test_the_gtid_goes_with_its_position_and_is_never_carried_to_another_one():
    at_100 = Checkpoint("t", 1, Phase.BINLOG, "run", position=BinlogPosition("b.000001", 100), gtid="0-1-7")
    assert Checkpoint.from_json(at_100.to_json()).gtid == "0-1-7"
    assert at_100.advanced_to(BinlogPosition("b.000001", 200), "r", gtid="0-1-9").gtid == "0-1-9"
    assert at_100.advanced_to(BinlogPosition("b.000001", 200), "r").gtid is None  # unknown there
    assert at_100.advanced_to(BinlogPosition("b.000001", 100), "r").gtid == "0-1-7"  # same place


def test_the_generation_round_trips_and_every_later_batch_of_a_refresh_keeps_it():
    refresh = Checkpoint("t", 11, Phase.BINLOG, "run-9", position=BinlogPosition("mysql-bin.000002", 10), generation=11)
    assert Checkpoint.from_json(refresh.to_json()) == refresh
    later = refresh.advanced_to(BinlogPosition("mysql-bin.000002", 900), "run-10")
    assert (later.batch, later.generation) == (12, 11)
    assert "generation" not in Checkpoint("t", 3, Phase.BINLOG, "r").to_json()  # the first snapshot's: as before
