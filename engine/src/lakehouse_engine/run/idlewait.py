"""How an idle ``follow`` waits for the next change.

With every table at the source's binlog head there is nothing to do until the source writes.
Polling the head each interval costs a query and a cycle's bookkeeping each time, and a change
waits for the next poll. Instead the loop blocks on a binlog dump (``cdc.headwatch``) until the
source writes past the head, for at most ``recheck_s``: the loop still wakes that often to
look for added tables, serve other runs' requests and publish its metrics. The dump is held from
one idle wait to the next (``HeadWatch(hold=True)``) and let go once a cycle has work
(:meth:`IdleWait.release`): a login, three statements and a dump every ``recheck_s`` were most
of an idle loop's own CPU.

The wait is an optimisation, never a dependency: when the dump cannot be opened or breaks (a
user without REPLICATION SLAVE is caught earlier, but a proxy may refuse dumps, a network may
drop idle sockets), the loop says so in one warning line and polls as before, trying the dump
again after ``retry_s``.
"""

from __future__ import annotations

import logging
import threading
import time

from ..cdc.headwatch import HeadWatch
from ..failures import first_line
from ..state.positions import BinlogPosition

log = logging.getLogger(__name__)

RECHECK_S = 30.0  # an idle loop's own rounds: new tables, requests, metrics (at most this late)
RETRY_S = 60.0  # after the dump failed, poll this long before trying it again
# The dump's heartbeat while idle, and how often the wait looks at a stop flag set by a thread
# (a signal ends it at once): each wakeup costs milliseconds of CPU on a small VM, and at 1 s
# they were half of an idle follow's Python CPU.
HEARTBEAT_S = 15.0


class IdleWait:
    def __init__(self, watch: HeadWatch | None, recheck_s: float = RECHECK_S, retry_s: float = RETRY_S):
        self._watch = watch
        self._recheck_s = recheck_s
        self._retry_s = retry_s
        self._retry_at = float("-inf")
        self._warned: set[str] = set()

    def wait(self, head: BinlogPosition, stop: threading.Event, interval_s: float, budget_s: float) -> bool:
        """Return once the source wrote past ``head``, ``stop`` is set, ``recheck_s`` passed or
        ``budget_s`` (what the run has left) ran out. Without a working dump: ``interval_s``.
        True when the server said, on the dump, that it wrote nothing past ``head`` meanwhile
        (the head need not be asked for again)."""
        now = time.monotonic()
        if self._watch is None or now < self._retry_at:
            stop.wait(max(0.0, min(interval_s, budget_s)))
            return False
        try:
            changed = self._watch.wait_past(head, now + min(self._recheck_s, budget_s), stop)
            return not changed and self._watch.heard and not stop.is_set()
        except Exception as exc:  # the stream is only a faster wait: poll instead, say so once
            budget_s -= time.monotonic() - now
            self._retry_at = time.monotonic() + self._retry_s
            reason = first_line(exc)
            if reason not in self._warned:
                self._warned.add(reason)
                log.warning("follow: waiting on the source's binlog stream failed (%s): polling every "
                            "%.1f s instead, trying the stream again every %.0f s", reason, interval_s,
                            self._retry_s)
            stop.wait(max(0.0, min(interval_s, budget_s)))
            return False

    def release(self) -> None:
        """Let go of the dump a wait held for the next (the cycles are busy, or the run ends)."""
        if self._watch is not None:
            self._watch.release()
