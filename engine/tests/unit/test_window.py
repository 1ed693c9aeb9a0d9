"""Window-watermark reads: the replay that makes a chunk's rows the state at its high watermark,
the window's changes, the readers' server ids and the mode a run picks."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine.cdc import capture as capture_module
from lakehouse_engine.cdc import passes as passes_module
from lakehouse_engine.cdc.binlog import RowChange, SchemaChange, TableProblem, Transaction
from lakehouse_engine.config.project import SnapshotMode
from lakehouse_engine.errors import FatalError, SourceUnavailableError
from lakehouse_engine.ops import Op
from lakehouse_engine.snapshot import window as window_module
from lakehouse_engine.snapshot.window import LowWatermarks, TaskWindows, Window, changes_in, replay, resolve
from lakehouse_engine.state.positions import BinlogPosition

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
KEY = ("id",)


def at(offset: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000001", offset)


def change(op: Op, key: int, value: str | None = None, offset: int = 100, table: str = "t") -> RowChange:
    return RowChange(table, op, {"id": key, "v": value}, at(offset), 1, 0)


def images(values: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(values, schema=SCHEMA)


def below_100(keys: list[tuple[Any, ...]]) -> list[bool]:
    return [key[0] < 100 for key in keys]


def selected(*rows: tuple[int, str]) -> pa.Table:
    return images([{"id": k, "v": v} for k, v in rows])


def as_dict(table: pa.Table) -> dict[int, str]:
    rows = table.to_pylist()
    assert len(rows) == len({r["id"] for r in rows}), f"a key twice: {rows}"
    return {r["id"]: r["v"] for r in rows}


def test_a_change_the_select_missed_is_put_into_the_chunk():
    rows = replay(selected((1, "a"), (2, "b"), (3, "c")), KEY,
                  [change(Op.UPDATE, 2, "b2"), change(Op.DELETE, 3, "c"), change(Op.INSERT, 4, "d")],
                  images, below_100)
    assert as_dict(rows) == {1: "a", 2: "b2", 4: "d"}


def test_a_change_the_select_already_saw_is_applied_again_without_a_second_row():
    rows = replay(selected((1, "a"), (2, "b2"), (4, "d")), KEY,
                  [change(Op.UPDATE, 2, "b2"), change(Op.INSERT, 4, "d"), change(Op.DELETE, 3, "c")],
                  images, below_100)
    assert as_dict(rows) == {1: "a", 2: "b2", 4: "d"}


def test_the_last_change_of_a_key_wins():
    rows = replay(selected((1, "a"), (2, "b")), KEY,
                  [change(Op.INSERT, 5, "e"), change(Op.DELETE, 5, "e"),
                   change(Op.DELETE, 2, "b"), change(Op.INSERT, 2, "b-again"),
                   change(Op.UPDATE, 1, "a1"), change(Op.UPDATE, 1, "a2")],
                  images, below_100)
    assert as_dict(rows) == {1: "a2", 2: "b-again"}


def test_keys_outside_the_chunk_are_left_to_their_own_chunks():
    rows = replay(selected((1, "a")), KEY,
                  [change(Op.INSERT, 150, "x"), change(Op.UPDATE, 200, "y"), change(Op.DELETE, 300, "z")],
                  images, below_100)
    assert as_dict(rows) == {1: "a"}


def test_a_key_changing_update_leaves_the_old_key_and_puts_the_new_one_where_it_belongs():
    # The binlog adapter turns it into a delete of the old key and an update of the new one.
    moved_in = replay(selected((1, "a"), (2, "b")), KEY,
                      [change(Op.DELETE, 2, "b"), change(Op.UPDATE, 7, "b")], images, below_100)
    assert as_dict(moved_in) == {1: "a", 7: "b"}
    moved_out = replay(selected((1, "a"), (2, "b")), KEY,
                       [change(Op.DELETE, 2, "b"), change(Op.UPDATE, 700, "b")], images, below_100)
    assert as_dict(moved_out) == {1: "a"}


def test_keys_are_matched_on_every_key_column():
    schema = pa.schema([("a", pa.int64()), ("b", pa.int64()), ("v", pa.string())])
    rows = pa.Table.from_pylist([{"a": 1, "b": 1, "v": "x"}, {"a": 1, "b": 2, "v": "y"}], schema=schema)
    update = RowChange("t", Op.UPDATE, {"a": 1, "b": 2, "v": "y2"}, at(100), 1, 0)
    result = replay(rows, ("a", "b"), [update],
                    lambda values: pa.Table.from_pylist(values, schema=schema), lambda keys: [True] * len(keys))
    assert sorted((r["a"], r["b"], r["v"]) for r in result.to_pylist()) == [(1, 1, "x"), (1, 2, "y2")]


def test_no_change_keeps_the_rows_as_selected():
    rows = selected((1, "a"))
    assert replay(rows, KEY, [], images, below_100) is rows


def test_the_window_keeps_its_tables_changes_in_binlog_order():
    first = Transaction.of_changes((change(Op.INSERT, 1, "a", 10), change(Op.INSERT, 9, "o", 10, table="other")),
                                   at(20))
    second = Transaction.of_changes((change(Op.DELETE, 1, "a", 30),), at(40))
    assert [(c.op, c.position) for c in changes_in([first, second], "t", 3)] == [
        (Op.INSERT, at(10)), (Op.DELETE, at(30))]


def test_a_ddl_in_the_window_makes_the_chunk_be_read_again_in_a_later_run():
    ddl = Transaction((), at(50), schema_changes=(SchemaChange("t", "ALTER TABLE t ADD c INT", at(50)),))
    other = Transaction((), at(60), schema_changes=(SchemaChange("other", "ALTER TABLE other ADD c INT", at(60)),))
    assert list(changes_in([other], "t", 3)) == []
    with pytest.raises(SourceUnavailableError, match="chunk 3 was read; run again"):
        list(changes_in([ddl], "t", 3))


def test_an_incomplete_row_image_in_the_window_stops_the_table():
    problem = Transaction((), at(50), problems=(TableProblem("t", "a row image lacks columns", at(50)),))
    with pytest.raises(FatalError, match="row image lacks columns"):
        list(changes_in([problem], "t", 3))


def test_each_task_of_a_batch_reads_the_binlog_with_its_own_server_id():
    window = Window(at(4), server_id=5410, read_timeout_s=60)
    ids = [window.for_task(slot, (5400, 5499)).server_id for slot in range(99)]
    assert len(set(ids)) == 99 and 5410 not in ids  # never the run's own reader's id
    assert all(5400 <= i <= 5499 for i in ids)
    assert window.for_task(0, (5400, 5499)).low == at(4)


def test_auto_mode_reads_in_a_window_only_where_the_source_has_no_read_view_positions():
    assert resolve(SnapshotMode.AUTO, lambda: True) is SnapshotMode.CONSISTENT
    assert resolve(SnapshotMode.AUTO, lambda: False) is SnapshotMode.WINDOW

    def never() -> bool:
        raise AssertionError("asked the source for a mode that was chosen")

    assert resolve(SnapshotMode.WINDOW, never) is SnapshotMode.WINDOW
    assert resolve(SnapshotMode.CONSISTENT, never) is SnapshotMode.CONSISTENT


def test_a_low_watermark_is_a_position_read_at_least_the_margin_before_the_batch():
    now = [100.0]
    lows = LowWatermarks(margin_s=10, clock=lambda: now[0])
    lows.sample(at(10))  # the run's start
    now[0] = 105
    lows.sample(at(20))
    assert lows.low() == at(10)  # nothing 10 s old but the first: the first
    now[0] = 116
    lows.sample(at(30))
    assert lows.low() == at(20)  # read at 105, 11 s ago; at(10) is older than needed
    now[0] = 200
    lows.sample(at(40))
    assert lows.low() == at(30)
    with pytest.raises(ValueError):
        LowWatermarks().low()


def test_a_binary_key_from_the_binlog_is_padded_as_select_returns_it():
    from lakehouse_engine.source.introspect import ColumnInfo
    from lakehouse_engine.source.keyorder import selected_key

    binary = ColumnInfo("k", "binary", "binary(4)", False)
    number = ColumnInfo("n", "int", "int", False)
    assert selected_key((binary, number), (b"ab", 7)) == (b"ab\x00\x00", 7)
    assert selected_key((number,), (7,)) == (7,)


class ShortReads:
    """A binlog source whose reads stop at ``stops`` in turn (what a replica may see of the
    window so far), each ending with one transaction there."""

    def __init__(self, *stops: int):
        self.stops = list(stops)
        self.reads: list[BinlogPosition] = []
        self.reached: BinlogPosition | None = None

    def transactions(self, start, stop):
        self.reads.append(start)
        end = self.stops[min(len(self.reads), len(self.stops)) - 1]
        self.reached = at(end)
        if at(end) > start:
            yield Transaction.of_changes((change(Op.UPDATE, 1, f"v{end}", end),), at(end))


def test_a_window_read_that_stops_short_of_the_high_watermark_reads_on(monkeypatch):
    monkeypatch.setattr(passes_module, "REACH_PAUSE_S", 0)
    source = ShortReads(50, 90)
    got = list(window_module._read_up_to(source, at(10), at(90), "t", 1))
    assert [t.end for t in got] == [at(50), at(90)] and source.reads == [at(10), at(50)]


def test_a_window_read_ending_in_events_of_no_transaction_is_complete(monkeypatch):
    source = ShortReads(50)
    source.transactions = lambda start, stop: iter(())  # type: ignore[method-assign]
    source.reached = at(90)  # a rotation's header events, read but not handed over
    assert list(window_module._read_up_to(source, at(10), at(90), "t", 1)) == []


def test_a_window_read_that_never_reaches_the_high_watermark_fails_the_run(monkeypatch):
    monkeypatch.setattr(passes_module, "REACH_PAUSE_S", 0)
    with pytest.raises(SourceUnavailableError, match="stopped at .* before the chunk's high watermark"):
        list(window_module._read_up_to(ShortReads(50), at(10), at(90), "t", 1))


def test_a_catch_up_read_that_stops_short_reads_on_so_the_range_it_records_as_read_is_whole(monkeypatch):
    monkeypatch.setattr(passes_module, "REACH_PAUSE_S", 0)
    source = ShortReads(50, 70, 90)
    got = list(capture_module.read_transactions(source, at(10), at(90)))
    assert [t.end for t in got] == [at(50), at(70), at(90)] and source.reads == [at(10), at(50), at(70)]


def test_a_catch_up_read_that_never_reaches_its_stop_is_a_retriable_error(monkeypatch):
    monkeypatch.setattr(passes_module, "REACH_PAUSE_S", 0)
    with pytest.raises(SourceUnavailableError, match="stopped at .* before .*run again"):
        list(capture_module.read_transactions(ShortReads(50), at(10), at(90)))


def test_a_tasks_later_chunk_replays_from_a_high_watermark_read_the_margin_before_its_select():
    now = [0.0]
    windows = TaskWindows(at(10), margin_s=10, clock=lambda: now[0])
    assert windows.low() == at(10)  # the first chunk: the batch's low watermark
    now[0] = 4
    windows.read_to(at(50))  # its high watermark
    assert windows.low() == at(10)  # read 0 s ago: too young to be a low watermark
    now[0] = 9
    windows.read_to(at(90))
    now[0] = 15
    assert windows.low() == at(50)  # read 11 s before this chunk: old enough
    now[0] = 40
    assert windows.low() == at(90)  # the newest old enough, never an older one again


def test_a_tasks_windows_read_the_binlog_once_and_each_gets_exactly_its_own_transactions():
    import random

    rng = random.Random(3)
    ends = sorted(rng.sample(range(11, 2000), 300))
    everything = [Transaction((), at(e)) for e in ends]
    reads: list[tuple[int, int]] = []

    def read(start: BinlogPosition, stop: BinlogPosition):
        reads.append((start.offset, stop.offset))
        return [t for t in everything if start < t.end <= stop]

    windows = TaskWindows(at(10))
    low, high = 10, 10
    for _ in range(40):
        low = rng.randint(low, high)  # lows never fall back; a window may start past the last high
        high = rng.randint(max(low, high), min(2000, high + 120))
        got = windows.transactions(at(low), at(high), read)
        assert got == [t for t in everything if at(low) < t.end <= at(high)]
    covered = sorted(reads)
    assert all(a[1] <= b[0] for a, b in zip(covered, covered[1:], strict=False)), "binlog read twice"
