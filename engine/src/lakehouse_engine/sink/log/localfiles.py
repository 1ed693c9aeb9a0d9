"""A local table's ``_delta_log`` read as plain files, without Spark.

A local lake's commit files are small JSON files next to the data: reading the newest few
answers what the engine asks of the log (an app id's last version, the newest checkpoint, the
newest commit) in milliseconds, where Delta would rebuild the table's state with a Spark job.
Nothing here imports pyspark: ``status`` reads a local lake without starting a JVM.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from .commitfile import Commit, parse_commit


def is_local(path: str) -> bool:
    """Whether a lake path is on the local file system (a plain path or ``file:``)."""
    return path.startswith("/") or path.startswith("file:/")


def local_path(path: str) -> str:
    """The file system path of a local lake path (``file:///abs``, ``/abs/../x``: ``/abs``, ``/x``)."""
    plain = os.path.normpath(path[len("file:"):] if path.startswith("file:") else path)
    return "/" + plain.lstrip("/") if plain.startswith("/") else plain


def log_dir(table_path: str) -> Path:
    """The ``_delta_log`` folder of the local table at ``table_path``."""
    return Path(local_path(table_path)) / "_delta_log"


def commit_file(log: Path, version: int) -> Path:
    """Commit ``version``'s file in the ``_delta_log`` folder ``log``."""
    return log / f"{version:020d}.json"


def newest_version(log: Path) -> int | None:
    """The newest commit version in a ``_delta_log`` folder; None when it holds no commit."""
    versions = [int(p.name[:20]) for p in log.glob("*.json") if p.name[:20].isdigit()]
    return max(versions) if versions else None


def read_commit(log: Path, version: int) -> Commit | None:
    """Commit ``version``'s own facts; None when its file is gone (log cleanup after a checkpoint)."""
    try:
        lines = commit_file(log, version).read_text().splitlines()
    except FileNotFoundError:
        return None
    return parse_commit(version, lines)


def commits_back(log: Path) -> Iterator[Commit]:
    """The table's commits from the newest back, as long as their files are there."""
    versions = sorted((int(p.name[:20]) for p in log.glob("*.json") if p.name[:20].isdigit()), reverse=True)
    for version in versions:
        commit = read_commit(log, version)
        if commit is None:  # removed by a log cleanup since the listing
            return
        yield commit


def last_txn_version(log: Path, newest: int, app_id: str) -> int | None:
    """The last ``SetTransaction`` version of ``app_id`` in commits ``newest``, ``newest - 1``,
    ...; -1 when no commit back to version 0 has one; None when a needed commit file is gone
    (log cleanup after a checkpoint), so the caller must ask Delta."""
    for version in range(newest, -1, -1):
        commit = read_commit(log, version)
        if commit is None:
            return None
        if app_id in commit.txns:
            return commit.txns[app_id]
    return -1
