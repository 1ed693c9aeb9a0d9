"""One ingest at a time per table on this machine.

Two concurrent runs of a table would both append the same binlog range to bronze (Delta accepts
concurrent blind appends), so each run holds an advisory lock per table for its whole duration.
The lock dies with the process, so a killed run never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from ..errors import ConfigError


@contextmanager
def table_locks(folder: Path, tables: Sequence[str]) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        for table in sorted(tables):
            handle = stack.enter_context(open(folder / f"{table}.lock", "a+"))
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "?"
                raise ConfigError(
                    f"table {table} is being ingested by another run (pid {holder}); wait for it "
                    "to finish or stop it"
                ) from None
            handle.seek(0)
            handle.truncate()
            handle.write(str(os.getpid()))
            handle.flush()
        yield
