"""The reader started before Spark serves exactly the range and source it read, once; any
other read gets a reader of its own (the reader itself is a real process: test_prefetch)."""

from __future__ import annotations

import pytest

from lakehouse_engine.cdc import headstart
from lakehouse_engine.state.positions import BinlogPosition

START, STOP = BinlogPosition("mysql-bin.000001", 400), BinlogPosition("mysql-bin.000002", 900)


class _Source:
    def __init__(self, identity):
        self.identity = identity


class _Reader:
    def __init__(self, label):
        self.label, self.started, self.closed = label, False, False

    def start(self):
        self.started = True

    def close(self):
        self.closed = True

    def __iter__(self):
        yield self.label


@pytest.fixture
def readers(monkeypatch):
    made = []

    def range_reader(source, start, stop):
        made.append(_Reader((source.identity, start, stop, len(made))))
        return made[-1]

    monkeypatch.setattr(headstart, "range_reader", range_reader)
    return made


def test_the_range_it_read_is_served_from_the_reader_started_ahead_then_reads_are_its_own(readers):
    ahead = headstart.HeadStart(_Source("a"), START, STOP, seen_at=1.0)
    assert readers[0].started  # started at once, before anyone asks

    assert list(ahead.transactions(_Source("a"), START, STOP)) == [("a", START, STOP, 0)]
    assert list(ahead.transactions(_Source("a"), START, STOP)) == [("a", START, STOP, 1)]  # once only
    assert readers[0].closed


LATER_START, LATER_STOP = BinlogPosition("mysql-bin.000001", 500), BinlogPosition("mysql-bin.000002", 1000)


@pytest.mark.parametrize("source, start, stop",
                         [("b", START, STOP), ("a", LATER_START, STOP), ("a", START, LATER_STOP)])
def test_any_other_source_or_range_stops_the_reader_started_ahead_and_reads_on_its_own(readers, source, start, stop):
    ahead = headstart.HeadStart(_Source("a"), START, STOP, seen_at=1.0)

    assert list(ahead.transactions(_Source(source), start, stop)) == [(source, start, stop, 1)]
    assert readers[0].closed


def test_closing_an_unused_head_start_stops_its_reader(readers):
    headstart.HeadStart(_Source("a"), START, STOP, seen_at=1.0).close()
    assert readers[0].closed
