"""Follow mode's one binlog stream: a reader process that keeps decoding while the lake is written.

Without it, each follow cycle starts a reader for its own range (start, stop]: decoding (pure
Python, one core) waits for the cycle to begin, and the cycle's silver MERGE waits for the
decoding to end. The feed starts one reader (:func:`passes.tail` in a child process, at a lower
CPU priority) and keeps it across cycles: while a cycle commits bronze and MERGEs silver, the
reader decodes what the source commits meanwhile, so the next cycle finds its transactions
decoded. Measured with the bench's follow step (2 cores, 2,000 changes/s): cycles of 4-6 s
instead of 8-10 s, and freshness p95 12.9 s instead of 24 s.

Each cycle asks for ``(start, stop]``. The feed hands out transactions in binlog order and keeps
two positions: ``low``, the end of the last transaction handed out, and ``high``, a position up
to which every transaction has been handed out (the reader's :class:`~.passes.Reached` markers
move it past events of no transaction). A range whose ``start`` lies in ``[low, high]`` continues
the stream exactly; any other start (a table added, a failure, a rewind to a checkpoint) starts a
new reader there. A transaction read past ``stop`` is held for the next range.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterator
from functools import partial

from ..errors import SourceUnavailableError
from ..state.positions import BinlogPosition
from .binlog import BinlogSource, Transaction
from .passes import REACH_ATTEMPTS, REACH_PAUSE_S, Reached, ShortRead, tail
from .prefetch import ProcessPrefetcher

GROUP_WEIGHT = 2000  # rows per message from the reader process
DEPTH = 64  # messages the reader may run ahead (up to about 128k rows decoded and waiting)
# Decoding ahead must not slow the cycle it overlaps (its silver MERGE on the same cores): the
# reader runs at a lower CPU priority and takes the time the cycle leaves.
NICENESS = 10
STALL_S = REACH_ATTEMPTS * REACH_PAUSE_S  # as long as a range read may trail its stop (see ShortRead)

Item = Transaction | Reached
StartReader = Callable[[BinlogSource, BinlogPosition], Iterator[Item]]


def item_weight(item: Item) -> int:
    """A marker fills its message, so that it is sent at once, not after the next rows."""
    return GROUP_WEIGHT if isinstance(item, Reached) else item.rows + 1


def process_reader(source: BinlogSource, start: BinlogPosition) -> Iterator[Item]:
    """:func:`passes.tail` from ``start`` in a child process."""
    return iter(ProcessPrefetcher(partial(tail, source, start), depth=DEPTH, group_weight=GROUP_WEIGHT,
                                  weight=item_weight, niceness=NICENESS))


class BinlogFeed:
    """Hands out the binlog range by range from one reader; see the module docstring."""

    def __init__(self, start_reader: StartReader = process_reader, *, stall_s: float = STALL_S):
        self._start_reader = start_reader
        self._stall_s = stall_s
        self._items: Iterator[Item] | None = None
        self._reading: Hashable = None  # what the reader reads (source.identity)
        self._low = self._high = BinlogPosition("", 0)
        self._held: Transaction | None = None
        self.starts = 0  # readers started (a figure for tests and logs)

    def transactions(self, source: BinlogSource, start: BinlogPosition, stop: BinlogPosition) -> Iterator[Transaction]:
        """Every transaction of ``(start, stop]``, as ``passes.transactions_through`` gives them:
        when the iteration ends normally, the binlog is read up to ``stop``. Raises ``ShortRead``
        when the reader makes no progress towards ``stop`` for ``stall_s``, and the reader's own
        errors; the reader is stopped then, and the next call starts a new one."""
        if not self._continues(source, start):
            self.close()
            self._items = self._start_reader(source, start)
            self._reading = source.identity
            self._low = self._high = start
            self.starts += 1
        try:
            yield from self._up_to(stop)
        except BaseException:
            self.close()
            raise

    def _up_to(self, stop: BinlogPosition) -> Iterator[Transaction]:
        progress_at = time.monotonic()
        while self._high < stop:
            item = self._next()
            if isinstance(item, Reached):
                if item.position > self._high:
                    self._high = item.position
                    progress_at = time.monotonic()
                elif time.monotonic() - progress_at > self._stall_s:
                    raise ShortRead(f"the binlog read stopped at {self._high}, before {stop} (where the source's "
                                    "binlog ended when the cycle started); run again", position=str(self._high))
                continue
            if item.end > stop:
                self._held = item
                return
            self._low = item.end
            self._high = max(self._high, item.end)
            progress_at = time.monotonic()
            yield item

    def _next(self) -> Item:
        if self._held is not None:
            item, self._held = self._held, None
            return item
        assert self._items is not None
        try:
            return next(self._items)
        except StopIteration:
            raise SourceUnavailableError("the binlog reader stopped reading; run again, it resumes from the "
                                         "last commit") from None

    def _continues(self, source: BinlogSource, start: BinlogPosition) -> bool:
        return (self._items is not None and self._reading == source.identity
                and self._low <= start <= self._high)

    def close(self) -> None:
        """Stop the reader (its process ends); what it decoded and did not hand out is dropped."""
        items, self._items, self._held = self._items, None, None
        if items is not None and hasattr(items, "close"):
            items.close()
