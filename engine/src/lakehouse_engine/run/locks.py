"""One ingest at a time per table on this machine.

Two concurrent runs of a table would both append the same binlog range to bronze (Delta accepts
concurrent blind appends), so each run holds an advisory lock per table for its whole duration.
The lock dies with the process, so a killed run never leaves a stale lock behind. The lock file
names its holder (pid and command), so a ``repair`` can tell a ``follow`` it may ask to do the
work (see ``run.requests``) from a run it must wait for.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from ..config.project import ProjectConfig
from ..errors import IngestError
from ..state.holders import LOCKS_FOLDER, UNKNOWN_HOLDER


def locks_folder(config: ProjectConfig) -> Path:
    """Where a project's table locks live."""
    return config.target_dir / LOCKS_FOLDER


class TableBusy(IngestError):
    """Another run holds the table's lock: nothing is wrong, the table may be tried again later
    (category ``busy``, retriable). ``ingest`` skips it and goes on with the others; a command
    refused as a whole records nothing (``run_results.json`` stays the holder's)."""

    exit_code = 1
    category = "busy"

    def __init__(self, table: str, pid: str, command: str):
        super().__init__(f"table {table} is being ingested by another run (pid {pid}, {command}); try again "
                         "when it has finished, or stop it", table=table)
        self.pid = pid
        self.command = command

    def __reduce__(self) -> tuple[Any, ...]:
        return (TableBusy, (self.table, self.pid, self.command))


@contextmanager
def table_locks(folder: Path, tables: Sequence[str], command: str = "ingest") -> Iterator[None]:
    """Hold the locks of ``tables`` for ``command``; raises :class:`TableBusy` at the first one
    another run holds (the tables after it are not even tried)."""
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        for table in sorted(tables):
            busy = _lock(stack, folder, table, command)
            if busy is not None:
                raise busy
        yield


@contextmanager
def free_table_locks(folder: Path, tables: Sequence[str], command: str = "ingest") -> Iterator[list[TableBusy]]:
    """Hold the locks of those of ``tables`` no other run holds, for ``command``; yields the
    others' refusals (in table order), so that a run goes on without them."""
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        yield [busy for table in sorted(tables) if (busy := _lock(stack, folder, table, command)) is not None]


def _lock(stack: ExitStack, folder: Path, table: str, command: str) -> TableBusy | None:
    """Take ``table``'s lock for the life of ``stack`` and name this run in it; the refusal
    when another run holds it."""
    handle = stack.enter_context(open(folder / f"{table}.lock", "a+"))
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        pid, _, held_for = (handle.read().strip() or UNKNOWN_HOLDER).partition(" ")
        return TableBusy(table, pid, held_for or UNKNOWN_HOLDER)
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()} {command}")
    handle.flush()
    return None
