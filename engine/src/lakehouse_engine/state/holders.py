"""Who holds a table's ingest lock, found without taking it (``run.locks`` takes them): for
``status`` and for ``dq``, which must not import the command line's modules."""

from __future__ import annotations

import os
from pathlib import Path

LOCKS_FOLDER = "locks"  # under the target folder
UNKNOWN_HOLDER = "?"  # a lock file read in the instant between its holder's lock and its name


def holder(folder: Path, table: str) -> tuple[int, str] | None:
    """Who holds ``table``'s lock now (pid, command), found without taking it (a probe that took
    it, even for an instant, could refuse a run starting then): the lock file names its last
    holder, and ``/proc/locks`` says whether a lock on that file is held. Where there is no
    ``/proc/locks``, a live process of that pid counts as the holder."""
    path = folder / f"{table}.lock"
    try:
        text, stat = path.read_text().strip(), path.stat()
    except OSError:
        return None
    pid_text, _, command = text.partition(" ")
    if not pid_text.isdigit():
        return None
    held = _flocked(os.major(stat.st_dev), os.minor(stat.st_dev), stat.st_ino)
    if held is None:
        held = _alive(int(pid_text))
    return (int(pid_text), command or UNKNOWN_HOLDER) if held else None


def _flocked(major: int, minor: int, inode: int) -> bool | None:
    """Whether ``/proc/locks`` lists a FLOCK on the file (None: it cannot be read)."""
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    wanted = f"{major:02x}:{minor:02x}:{inode}"
    return any(" FLOCK " in line and wanted in line.split() for line in lines)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True
