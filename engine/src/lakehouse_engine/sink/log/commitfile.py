"""One Delta commit file's own facts (commit info, transaction ids), parsed without Spark.

Shared by :mod:`.deltalog` (which reads the files through Delta's log store) and
:mod:`.localfiles` (which reads a local lake's files directly and must not import pyspark)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Commit:
    """What one commit file says about itself: its commit info and its transaction ids."""

    version: int
    operation: str | None
    user_metadata: str | None
    txns: Mapping[str, int]  # SetTransaction app id -> version
    at: dt.datetime | None = None  # commit time


def parse_commit(version: int, lines: Sequence[str]) -> Commit:
    """The commit info and transaction ids of a commit file's lines (its data files are skipped
    unparsed: their statistics make up nearly all of the file)."""
    info: dict[str, Any] = {}
    txns: dict[str, int] = {}
    for line in lines:
        head = line.lstrip("{ \t")  # each line is one action: {"<kind>": {...}}
        if head.startswith('"commitInfo"'):
            info = json.loads(line)["commitInfo"]
        elif head.startswith('"txn"'):
            txn = json.loads(line)["txn"]
            txns[txn["appId"]] = int(txn["version"])
    stamp = info.get("timestamp")
    at = dt.datetime.fromtimestamp(stamp / 1000, dt.UTC) if isinstance(stamp, int) else None
    return Commit(version, info.get("operation"), info.get("userMetadata"), txns, at)
