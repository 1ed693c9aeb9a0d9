"""Reading the binlog on past one read of :class:`~.binlog.BinlogSource`: a range read through to
its end (:func:`transactions_through`, a catch-up's and a chunk window's read), or the binlog
followed as it grows (:func:`tail`, follow mode's one stream).

A read is one replication connection that ends where the server stops showing the binlog; these
loops start the next read from the last commit boundary handed over, never from where a read
stopped (events after it may be the start of a transaction the server had not shown whole).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import SourceUnavailableError
from ..state.positions import BinlogPosition
from .binlog import BinlogSource, Transaction

# A replica may read the binlog only up to what the server has synced, which can trail SHOW
# MASTER STATUS for a moment (MySQL's sync stage): a read that stops short is tried again.
REACH_ATTEMPTS = 50
REACH_PAUSE_S = 0.1


class ShortRead(SourceUnavailableError):
    """The binlog read kept ending before the position asked for."""


def transactions_through(source: BinlogSource, start: BinlogPosition,
                         stop: BinlogPosition) -> Iterator[Transaction]:
    """Every transaction of ``(start, stop]``, or :class:`ShortRead`. A non-blocking read ends
    where the server stops letting replicas see the binlog, which may be short of ``stop``: the
    read goes on from its last transaction until the stream has reached ``stop`` (events of no
    transaction, e.g. a new file's header, count), so a caller may take the whole range as read."""
    position = start
    for _ in range(REACH_ATTEMPTS):
        for transaction in source.transactions(position, stop):
            position = transaction.end
            yield transaction
        if position >= stop or (source.reached is not None and source.reached >= stop):
            return
        time.sleep(REACH_PAUSE_S)
    raise ShortRead(f"the binlog read stopped at {position}, before {stop} (where the source's binlog "
                    "ended when the read started); run again", position=str(position))


@dataclass(frozen=True)
class Reached:
    """The end of one read pass of :func:`tail`: every transaction ending at or before
    ``position`` was handed over before this."""

    position: BinlogPosition


FILE_START = 4  # the first event of every binlog file, after its magic bytes
# Each read pass of tail() is a new replication connection: while passes find transactions they
# start at most this often. A pass that found none is followed by a wait on the binlog stream
# (``headwatch``) until the server writes, for at most TAIL_IDLE_WAIT_S; where that wait cannot
# be had, by a pause of TAIL_IDLE_INTERVAL_S, and the stream is tried again after TAIL_RETRY_S.
TAIL_INTERVAL_S = 0.5
TAIL_IDLE_WAIT_S = 5.0
TAIL_IDLE_INTERVAL_S = 1.0
TAIL_RETRY_S = 60.0
_NEVER = threading.Event()  # the reader process is stopped by its parent, not by a flag


def tail(source: BinlogSource, start: BinlogPosition) -> Iterator[Transaction | Reached]:
    """Transactions after ``start``, without end: the binlog as it grows (follow mode's one
    stream). Each read pass runs to the end of what the server shows and is followed by a
    :class:`Reached`, so that a consumer knows how far the binlog is read even when nothing of
    interest was in it. A pass that ends in a backlog is followed at once by the next.

    A pass that found no transaction but moved to a newer binlog file (a rotation) goes on from
    the start of that file, so an idle stream never rests on a file the server may purge."""
    position = start
    watch = source.head_watch()
    watch_again_at = float("-inf")
    while True:
        began = time.monotonic()
        found = False
        for transaction in source.transactions(position, None):
            position = transaction.end
            found = True
            yield transaction
        reached = source.reached
        if not found and reached is not None and reached.file != position.file and reached > position:
            position = BinlogPosition(reached.file, FILE_START)
        shown = max(position, reached) if reached is not None else position
        yield Reached(shown)
        if found:
            time.sleep(max(0.0, TAIL_INTERVAL_S - (time.monotonic() - began)))
        elif time.monotonic() < watch_again_at:
            time.sleep(TAIL_IDLE_INTERVAL_S)
        else:
            try:  # closed before the next pass, whose replication connection has the same server id
                watch.wait_past(shown, time.monotonic() + TAIL_IDLE_WAIT_S, _NEVER)
            except Exception:  # only a faster wait; the next pass reports a source that is gone
                watch_again_at = time.monotonic() + TAIL_RETRY_S
                time.sleep(TAIL_IDLE_INTERVAL_S)
