"""SIGTERM and the first Ctrl-C as a request to stop after the current cycle (``follow``); a
second Ctrl-C interrupts at once."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from .. import failures

log = logging.getLogger("lakehouse_engine.run.follow")  # its lines are the follow's


@contextmanager
def stop_requests() -> Iterator[threading.Event]:
    """An event set by SIGTERM or a first Ctrl-C, for the loop to read between cycles.

    A second Ctrl-C goes to the SIGINT handler installed before (Spark's interrupts at once).
    Installs handlers, so it must run in the main thread; the old ones are restored at exit."""
    stop = threading.Event()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT and stop.is_set():
            interrupt = previous[signal.SIGINT]
            if callable(interrupt):
                interrupt(signum, frame)
            failures.note_interrupt()
            raise KeyboardInterrupt
        if not stop.is_set():
            how = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
            log.warning("follow: %s: stopping after the current cycle (Ctrl-C again stops at once; "
                        "progress up to the last commit is kept)", how)
        stop.set()

    for sig in previous:
        signal.signal(sig, on_signal)
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
