"""Follow mode's one binlog stream: ``passes.tail`` read passes and the ranges ``BinlogFeed`` hands out."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lakehouse_engine.cdc import passes as passes_module
from lakehouse_engine.cdc.binlog import Transaction
from lakehouse_engine.cdc.feed import BinlogFeed, item_weight
from lakehouse_engine.cdc.passes import Reached, ShortRead, tail
from lakehouse_engine.errors import SourceUnavailableError
from lakehouse_engine.state.positions import BinlogPosition


def at(offset: int, file: int = 1) -> BinlogPosition:
    return BinlogPosition(f"mysql-bin.{file:06d}", offset)


def tx(offset: int, file: int = 1) -> Transaction:
    return Transaction((), at(offset, file))


class Passes:
    """A source whose read passes return, in turn, the given transactions and end position."""

    identity = ("source", 1)

    def __init__(self, *passes: tuple[list[Transaction], BinlogPosition | None]):
        self.passes = list(passes)
        self.reads: list[tuple[BinlogPosition, BinlogPosition | None]] = []
        self.reached: BinlogPosition | None = None
        self.watch = Watch()

    def transactions(self, start: BinlogPosition, stop: BinlogPosition | None) -> Iterator[Transaction]:
        self.reads.append((start, stop))
        found, self.reached = self.passes.pop(0) if self.passes else ([], start)
        yield from found

    def head_watch(self) -> Watch:
        return self.watch


class Watch:
    """The wait on the binlog stream: records where each wait started; ``failing``: raise."""

    def __init__(self, failing: bool = False):
        self.failing = failing
        self.waits: list[BinlogPosition] = []

    def wait_past(self, position: BinlogPosition, deadline: float, stop: object) -> bool:
        self.waits.append(position)
        if self.failing:
            raise OSError("dump refused")
        return False  # its deadline: nothing was written


def first(items: Iterator[object], count: int) -> list[object]:
    return [next(items) for _ in range(count)]


# -- tail --------------------------------------------------------------------------------------


def test_tail_reads_on_from_the_last_transaction_and_marks_where_each_pass_ended(monkeypatch):
    monkeypatch.setattr(passes_module, "TAIL_INTERVAL_S", 0)
    source = Passes(([tx(50), tx(70)], at(80)), ([tx(90)], at(90)))
    items = first(tail(source, at(10)), 5)  # type: ignore[arg-type]
    assert items == [tx(50), tx(70), Reached(at(80)), tx(90), Reached(at(90))]
    # From the last commit boundary, not from where the pass ended (events after it may be
    # the start of a transaction the server had not shown whole).
    assert [start for start, _ in source.reads] == [at(10), at(70)]
    assert all(stop is None for _, stop in source.reads)


def test_tail_marks_an_idle_pass_at_its_start_when_the_server_reports_no_position(monkeypatch):
    monkeypatch.setattr(passes_module, "TAIL_INTERVAL_S", 0)
    source = Passes(([], None))
    assert first(tail(source, at(40)), 1) == [Reached(at(40))]  # type: ignore[arg-type]


def test_an_idle_tail_moves_to_the_start_of_a_new_binlog_file_so_it_never_rests_on_a_purgeable_one(monkeypatch):
    monkeypatch.setattr(passes_module, "TAIL_INTERVAL_S", 0)
    source = Passes(([], at(256, file=2)), ([tx(300, file=2)], at(300, file=2)))
    items = first(tail(source, at(90)), 3)  # type: ignore[arg-type]
    assert items == [Reached(at(256, file=2)), tx(300, file=2), Reached(at(300, file=2))]
    assert source.reads[1][0] == at(4, file=2)


def test_an_idle_tail_in_the_same_file_reads_again_from_its_last_transaction(monkeypatch):
    monkeypatch.setattr(passes_module, "TAIL_INTERVAL_S", 0)
    source = Passes(([tx(50)], at(50)), ([], at(60)), ([], at(60)))
    first(tail(source, at(10)), 4)  # type: ignore[arg-type]
    assert [start for start, _ in source.reads] == [at(10), at(50), at(50)]


def test_tail_passes_start_at_most_every_interval_while_they_find_transactions_and_wait_on_the_stream_when_idle(
        monkeypatch):
    # Each pass is a replication connection: a reader that polled back to back would open
    # dozens a second on the source; an idle one waits for the server's next write instead.
    monkeypatch.setattr(passes_module, "TAIL_INTERVAL_S", 0.25)
    pauses: list[float] = []
    monkeypatch.setattr(passes_module.time, "sleep", pauses.append)
    source = Passes(([tx(50)], at(50)), ([], at(60)), ([], at(60)))
    first(tail(source, at(10)), 5)  # type: ignore[arg-type]
    assert pauses == pytest.approx([0.25], abs=0.05)  # after the pass that found a transaction only
    # From where the server's binlog ended: a write past it ends the wait.
    assert source.watch.waits == [at(60), at(60)]


def test_a_tail_whose_stream_wait_fails_polls_and_tries_the_stream_again_later(monkeypatch):
    monkeypatch.setattr(passes_module, "TAIL_IDLE_INTERVAL_S", 1.0)
    pauses: list[float] = []
    monkeypatch.setattr(passes_module.time, "sleep", pauses.append)
    source = Passes()
    source.watch = Watch(failing=True)
    first(tail(source, at(10)), 4)  # type: ignore[arg-type]
    assert source.watch.waits == [at(10)]  # not tried again within TAIL_RETRY_S
    assert pauses == [1.0, 1.0, 1.0]


def test_a_marker_fills_its_message_so_the_reader_sends_it_at_once():
    from lakehouse_engine.cdc.feed import GROUP_WEIGHT

    assert item_weight(Reached(at(5))) >= GROUP_WEIGHT
    assert item_weight(tx(5)) == 1


# -- the feed ----------------------------------------------------------------------------------


class Reader:
    """The feed's reader: hands out scripted items; records where each reader started."""

    def __init__(self, *items: Transaction | Reached | BaseException):
        self.items = list(items)
        self.started: list[BinlogPosition] = []
        self.closed = 0

    def __call__(self, source: object, start: BinlogPosition) -> Iterator[Transaction | Reached]:
        self.started.append(start)
        return self._read()

    def _read(self) -> Iterator[Transaction | Reached]:
        try:
            while self.items:
                item = self.items.pop(0)
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self.closed += 1


SOURCE = Passes()


def ends(feed: BinlogFeed, start: int, stop: int, source: object = SOURCE) -> list[int]:
    return [t.end.offset for t in feed.transactions(source, at(start), at(stop))]  # type: ignore[arg-type]


def test_a_range_ends_at_its_stop_and_the_transaction_read_past_it_opens_the_next_range():
    reader = Reader(tx(20), tx(30), tx(45), Reached(at(45)), tx(60), Reached(at(60)))
    feed = BinlogFeed(reader)
    assert ends(feed, 10, 40) == [20, 30]
    assert ends(feed, 30, 50) == [45]
    assert ends(feed, 45, 60) == [60]
    assert reader.started == [at(10)]  # one reader for every range


def test_a_marker_at_or_past_the_stop_completes_a_range_without_a_transaction_there():
    reader = Reader(tx(20), Reached(at(25)), Reached(at(50)), tx(70), Reached(at(80)))
    feed = BinlogFeed(reader)
    assert ends(feed, 10, 40) == [20]
    # Everything up to 50 has been handed out: a range starting anywhere in [20, 50] goes on.
    assert ends(feed, 50, 80) == [70]
    assert reader.started == [at(10)]


def test_a_range_already_read_returns_at_once_without_reading():
    reader = Reader(tx(20), Reached(at(50)), tx(70))
    feed = BinlogFeed(reader)
    assert ends(feed, 10, 30) == [20]
    assert ends(feed, 20, 50) == []
    assert reader.items == [tx(70)]  # not read: the range was known to be complete


def test_a_range_that_does_not_continue_the_stream_starts_a_new_reader_there():
    reader = Reader(tx(20), tx(30), Reached(at(30)), tx(45), Reached(at(45)))
    feed = BinlogFeed(reader)
    assert ends(feed, 10, 30) == [20, 30]
    # A rewind (the cycle failed before committing 20 and 30): the reader starts again at 10.
    assert ends(feed, 10, 45) == [45]
    assert reader.started == [at(10), at(10)] and reader.closed == 1


def test_a_range_past_what_was_handed_out_starts_a_new_reader_rather_than_skip_transactions():
    reader = Reader(tx(20), Reached(at(20)), tx(40), Reached(at(40)))
    feed = BinlogFeed(reader)
    assert ends(feed, 10, 20) == [20]
    ends(feed, 30, 40)
    assert reader.started == [at(10), at(30)]


def test_another_source_or_table_set_starts_a_new_reader():
    reader = Reader(tx(20), Reached(at(20)), tx(30), Reached(at(30)))
    feed = BinlogFeed(reader)
    ends(feed, 10, 20)
    other = Passes()
    other.identity = ("source", 2)
    ends(feed, 20, 30, other)
    assert reader.started == [at(10), at(20)]


def test_a_reader_that_stops_progressing_before_the_stop_is_a_retriable_error():
    reader = Reader(tx(20), Reached(at(20)), Reached(at(20)))
    feed = BinlogFeed(reader, stall_s=-1)
    with pytest.raises(ShortRead, match="stopped at .*, before .*run again"):
        ends(feed, 10, 40)
    assert reader.closed == 1  # the next range starts a new reader


def test_a_reader_error_reaches_the_catch_up_after_the_transactions_before_it_and_ends_the_reader():
    reader = Reader(tx(20), SourceUnavailableError("lost the binlog connection"))
    feed = BinlogFeed(reader)
    got: list[int] = []
    with pytest.raises(SourceUnavailableError, match="lost the binlog connection"):
        for t in feed.transactions(SOURCE, at(10), at(40)):  # type: ignore[arg-type]
            got.append(t.end.offset)
    assert got == [20] and reader.closed == 1
    reader.items = [tx(30), Reached(at(40))]
    assert ends(feed, 20, 40) == [30]
    assert reader.started == [at(10), at(20)]


def test_a_reader_that_ends_is_a_retriable_error():
    feed = BinlogFeed(Reader(tx(20)))
    with pytest.raises(SourceUnavailableError, match="stopped reading"):
        ends(feed, 10, 40)


def test_closing_the_feed_stops_its_reader_and_drops_what_it_held():
    reader = Reader(tx(20), tx(50), Reached(at(50)))
    feed = BinlogFeed(reader)
    assert ends(feed, 10, 30) == [20]
    feed.close()
    assert reader.closed == 1
    reader.items = [tx(50), Reached(at(50))]
    assert ends(feed, 20, 50) == [50]  # read again by a new reader, not from the dropped hold
    assert reader.started == [at(10), at(20)]
