"""One allocator hands out the replica server ids of every binlog reader of a process."""

from __future__ import annotations

import pytest

from lakehouse_engine.snapshot.window import Window
from lakehouse_engine.source.serverids import ServerIds
from lakehouse_engine.state.positions import BinlogPosition


def test_the_readers_of_one_process_never_share_an_id_within_the_range():
    ids = ServerIds.of((5400, 5499))
    taken = [ids.own(pid=4242), ids.checks(pid=4242), ids.watch(pid=4242),
             *(ids.task(slot, pid=4242) for slot in range(40))]
    assert len(set(taken)) == len(taken)
    assert all(5400 <= i <= 5499 for i in taken)
    assert ids.own(pid=4242) == 5400 + 4242 % 100 and ids.checks(pid=4242) == 5400 + (42 + 50) % 100


@pytest.mark.parametrize("pid", [0, 99, 100, 12345])
def test_ids_wrap_around_inside_the_range(pid):
    ids = ServerIds.of((10, 14))
    assert sorted(ids.at(offset, pid=pid) for offset in range(5)) == [10, 11, 12, 13, 14]


def test_a_reversed_pair_is_the_same_range():
    assert ServerIds.of((5499, 5400)) == ServerIds.of((5400, 5499))


def test_a_window_task_takes_the_id_after_the_runs_own_reader():
    ids = ServerIds.of((5400, 5499))
    window = Window(BinlogPosition("mysql-bin.000001", 4), ids.own(pid=7), 60.0)
    assert [window.for_task(slot, (5400, 5499)).server_id for slot in range(3)] == [
        ids.task(0, pid=7), ids.task(1, pid=7), ids.task(2, pid=7)] == [5408, 5409, 5410]


@pytest.mark.parametrize("high", [5402, 5403, 5404, 5499])
def test_an_idle_follows_wait_takes_an_id_apart_from_the_runs_reader_and_dqs(high):
    ids = ServerIds.of((5400, high))
    for pid in (0, 1, 7, 4242):
        assert ids.watch(pid=pid) not in (ids.own(pid=pid), ids.checks(pid=pid))


@pytest.mark.parametrize("high", [5400, 5401])
def test_a_range_of_one_or_two_ids_leaves_none_for_the_wait(high):
    assert ServerIds.of((5400, high)).watch(pid=7) is None
