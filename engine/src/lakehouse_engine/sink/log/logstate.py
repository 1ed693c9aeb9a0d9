"""A local Delta table's state (protocol, metadata, live files), replayed from its log in Python.

Delta rebuilds a table's state with Spark jobs after every commit (a few hundred milliseconds
each time, whatever the size of the change). The silver writer of :mod:`dvmerge` needs the same
facts once per batch, so it keeps one :class:`TableState` per table in the process and moves it
forward by reading only the commit files written since (normally one). A state is built from the
newest classic checkpoint (single or multi-part Parquet) and the commit files after it; a log
it cannot read that way (a v2 checkpoint, a missing commit file) raises :class:`Unreadable`, and
the caller leaves the write to Delta.

Files are reconciled as the protocol says: a file is known by its path and deletion vector, an
``add`` makes it live, a ``remove`` of the same path and vector ends it. Two live entries for one
path would be a broken log: :class:`Unreadable` too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from .localfiles import commit_file

_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")


class Unreadable(Exception):
    """The log holds something this reader does not replay; Delta must handle the table."""


def dv_id(descriptor: Mapping[str, Any] | None) -> str:
    """A deletion vector's identity within a file's (the protocol's ``uniqueId``)."""
    if not descriptor:
        return ""
    offset = descriptor.get("offset")
    return f"{descriptor['storageType']}{descriptor['pathOrInlineDv']}" + (f"@{offset}" if offset else "")


@dataclass
class TableState:
    """The table at ``version``: its protocol and metadata actions and its live ``add`` actions."""

    root: Path
    version: int = -1
    protocol: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    files: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (path, dv id) -> add
    stamp: tuple[int, int, int] | None = None  # inode, size, mtime of commit ``version``'s file

    def current(self) -> bool:
        """Whether commit ``version``'s file is still the one replayed (not a table deleted and
        made again at the same path)."""
        return self.stamp is not None and self.stamp == _stamp(commit_file(self.log_dir, self.version))

    @property
    def log_dir(self) -> Path:
        return self.root / "_delta_log"

    def live(self) -> list[dict[str, Any]]:
        return list(self.files.values())

    def apply(self, actions: Iterable[Mapping[str, Any]]) -> None:
        """One commit's (or checkpoint's) actions, in the protocol's reconciliation (a commit
        names each file entry once, so their order within it does not matter)."""
        for action in actions:
            if (add := action.get("add")) is not None:
                self.files[(add["path"], dv_id(add.get("deletionVector")))] = dict(add)
            elif (remove := action.get("remove")) is not None:
                self.files.pop((remove["path"], dv_id(remove.get("deletionVector"))), None)
            elif (protocol := action.get("protocol")) is not None:
                self.protocol = dict(protocol)
            elif (metadata := action.get("metaData")) is not None:
                self.metadata = dict(metadata)
            elif action.get("checkpointMetadata") is not None or action.get("sidecar") is not None:
                raise Unreadable("the table has v2 checkpoints")
        paths = [path for path, _ in self.files]
        if len(paths) != len(set(paths)):
            raise Unreadable("the log has two live entries for one data file")

    def advance(self, upto: int) -> None:
        """Replay commits ``version + 1 .. upto``."""
        for version in range(self.version + 1, upto + 1):
            try:
                lines = commit_file(self.log_dir, version).read_text().splitlines()
            except FileNotFoundError:
                raise Unreadable(f"commit {version} is not in the log (cleaned up, or not published)") from None
            self.apply(json.loads(line) for line in lines if line.strip())
            self.version = version
        self.stamp = _stamp(commit_file(self.log_dir, self.version))


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


def load(root: Path, upto: int) -> TableState:
    """The table's state at version ``upto``, from its newest complete checkpoint at or before it."""
    state = TableState(root)
    checkpoint = _newest_checkpoint(state.log_dir, upto)
    if checkpoint is not None:
        version, parts = checkpoint
        for part in parts:
            state.apply(_checkpoint_actions(part))
        state.version = version
    state.advance(upto)
    return state


def _newest_checkpoint(log_dir: Path, upto: int) -> tuple[int, list[Path]] | None:
    found: dict[tuple[int, int], list[Path]] = {}
    for path in log_dir.iterdir():
        if (match := _CHECKPOINT.match(path.name)) is None:
            if ".checkpoint." in path.name and not path.name.endswith(".crc"):
                raise Unreadable(f"checkpoint {path.name} is not a classic one")
            continue
        version = int(match.group(1))
        if version <= upto:
            found.setdefault((version, int(match.group(3) or 1)), []).append(path)
    complete = [(version, sorted(paths)) for (version, parts), paths in found.items() if len(paths) == parts]
    return max(complete, default=None)


def _checkpoint_actions(path: Path) -> Iterable[dict[str, Any]]:
    names = pq.read_schema(path).names
    if "checkpointMetadata" in names or "sidecar" in names:
        raise Unreadable("the table has v2 checkpoints")
    table = pq.read_table(path, columns=[c for c in ("add", "protocol", "metaData") if c in names])
    for row in table.to_pylist():
        for kind, value in row.items():
            if value is not None:
                yield {kind: _plain(value)}


_MAPS = frozenset({"partitionValues", "tags", "configuration", "options"})


def _plain(value: Any, name: str = "") -> Any:
    """A checkpoint struct as its JSON action reads: maps as dicts, no null fields, no parsed
    statistics (the ``stats`` string says the same)."""
    if isinstance(value, dict):
        return {k: _plain(v, k) for k, v in value.items() if v is not None and k != "stats_parsed"}
    if name in _MAPS and isinstance(value, list):
        return dict(value)
    return value


@dataclass
class StateCache:
    """One state per table root, moved forward rather than rebuilt."""

    states: dict[Path, TableState] = field(default_factory=dict)

    def at(self, root: Path, version: int) -> TableState:
        state = self.states.pop(root, None)  # a state that fails half-applied is never reused
        if state is None or state.version > version or not state.current():
            state = load(root, version)
        else:
            try:
                state.advance(version)
            except Unreadable:  # e.g. commits cleaned up since: start again from a checkpoint
                state = load(root, version)
        self.states[root] = state
        return state


CACHE = StateCache()
