"""How far a running ``follow`` has read, for ``status`` and ``dq`` on the same host.

An idle table's advance is held in memory (one commit per ``idle_commit_s``, not per cycle), so
its committed checkpoint trails what the follow has read. ``follow`` writes, at most every
``EVERY_S`` seconds, the position each table has been read to with no change of it left, and
when; a table is then current up to that position at that time. The file is trusted only while
the run that wrote it still holds the table's lock (``holders.holder``): a stopped follow has
committed what it read (``Follower._save_held_positions``), and on another host the file is
simply not there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..atomicfile import write_atomically
from .positions import BinlogPosition

FILE_NAME = "follow_positions.json"
EVERY_S = 5.0


@dataclass(frozen=True)
class ReadAhead:
    """Every change of the table up to ``position`` is in silver, as of ``at`` (Unix time)."""

    position: BinlogPosition
    at: float


def write(target_dir: Path, pid: int, positions: Mapping[str, BinlogPosition], at: float) -> None:
    body = {"pid": pid, "at": at, "tables": {name: str(p) for name, p in positions.items()}}
    write_atomically(target_dir / FILE_NAME, json.dumps(body) + "\n")


def read(target_dir: Path, table: str, holder_pid: int | None) -> ReadAhead | None:
    """What the follow holding ``table`` (pid ``holder_pid``) has read of it; None unless that
    follow wrote the file."""
    if holder_pid is None:
        return None
    try:
        body = json.loads((target_dir / FILE_NAME).read_text())
        if int(body["pid"]) != holder_pid or table not in body["tables"]:
            return None
        return ReadAhead(BinlogPosition.parse(body["tables"][table]), float(body["at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
