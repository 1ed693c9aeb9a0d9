"""Replica server ids for every binlog reader of a process, from the project's range
(``binlog.server_id_range``): the server lets one dump thread per id, so two readers sharing an
id evict each other. One process takes its ids at consecutive offsets from a base that its pid
picks, so runs on one machine rarely collide, and the readers of one process never do (up to
the range's size):

- offset 0: the run's own binlog reader (catch-up, follow, startup lookups);
- offsets 1..n: the snapshot tasks of a window-mode batch (one each);
- half the range away: ``dq``'s reader, so that a check started right after an ingest in
  another process does not take the ingest's id;
- the last offset (one below the base): an idle ``follow``'s wait for the binlog to move
  (``cdc.headwatch``), only in a range of 3 ids or more, where it is neither of the above.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# The offsets of the readers named above.
OWN = 0
FIRST_TASK = 1


@dataclass(frozen=True)
class ServerIds:
    low: int
    high: int

    @classmethod
    def of(cls, server_ids: tuple[int, int]) -> ServerIds:
        low, high = sorted(server_ids)  # a reversed pair must not make the range empty
        return cls(low, high)

    @property
    def size(self) -> int:
        return self.high - self.low + 1

    def at(self, offset: int, pid: int | None = None) -> int:
        """The id ``offset`` places after this process's base (wrapping within the range)."""
        base = (os.getpid() if pid is None else pid) % self.size
        return self.low + (base + offset) % self.size

    def own(self, pid: int | None = None) -> int:
        return self.at(OWN, pid)

    def task(self, slot: int, pid: int | None = None) -> int:
        return self.at(FIRST_TASK + slot, pid)

    def checks(self, pid: int | None = None) -> int:
        return self.at(self.size // 2, pid)

    def watch(self, pid: int | None = None) -> int | None:
        """None in a range too small to hold it apart from ``own`` and ``checks``."""
        return self.at(self.size - 1, pid) if self.size >= 3 else None
