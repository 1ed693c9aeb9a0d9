"""Resumable progress of one table, committed atomically with the bronze rows it covers.

Each bronze commit carries the whole checkpoint as its Delta ``userMetadata``, so the rows and
the position a restart resumes from land in one atomic commit: there is no separate state file
that could disagree with the table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from .chunks import Chunk
from .lakechange import LakeChange
from .positions import BinlogPosition
from .values import decode_key, encode_key

FORMAT_VERSION = 1


class Phase(StrEnum):
    SNAPSHOT = "snapshot"  # chunks still to copy; binlog events of copied chunks are applied too
    BINLOG = "binlog"  # every chunk copied: the table follows the binlog


@dataclass(frozen=True)
class SnapshotProgress:
    """The chunk plan and the high watermark of every chunk already in bronze."""

    key: tuple[str, ...]
    chunks: tuple[Chunk, ...]
    done: Mapping[int, BinlogPosition] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return len(self.done) == len(self.chunks)

    @property
    def pending(self) -> tuple[Chunk, ...]:
        return tuple(c for c in self.chunks if c.index not in self.done)

    @property
    def low_watermark(self) -> BinlogPosition:
        return min(self.done.values())

    @property
    def high_watermark(self) -> BinlogPosition:
        return max(self.done.values())

    def with_done(self, finished: Mapping[int, BinlogPosition]) -> SnapshotProgress:
        return replace(self, done={**self.done, **finished})


@dataclass(frozen=True)
class Checkpoint:
    """``batch`` numbers bronze commits; ``position`` is set once the binlog phase has begun:
    every change at or before it is in bronze. ``snapshot`` is kept while binlog events may
    still fall inside a chunk's watermark window (position below the highest watermark)."""

    table: str
    batch: int
    phase: Phase
    run_id: str
    snapshot: SnapshotProgress | None = None
    position: BinlogPosition | None = None
    # Unix time at which ``position`` was (or was past) the source's binlog head: every change
    # the source committed before it is in bronze. Only ever an under-estimate; None when unknown.
    synced_at: float | None = None
    # The batch re-reads rows silver already holds (``repair``): its snapshot rows ('r') are for
    # keys silver has, so silver must MERGE them, never append them as new keys.
    repair: bool = False
    # MariaDB's GTID position at ``position``: the last GTID (domain-server-seq) of each
    # replication domain logged up to there, as BINLOG_GTID_POS(file, offset) gives it (None when
    # unknown: MySQL, or no GTID logged yet). A replica's file/offset differ from its primary's;
    # this identifies the point across a failover.
    gtid: str | None = None
    # The DDL this commit applied (its text, shortened) and what it did to the lake table's
    # columns, which silver replays before merging any later batch (see ``silver.apply``).
    ddl: str | None = None
    schema_changes: tuple[LakeChange, ...] = ()
    # The batch that began bronze's current generation: 0 for the table's first snapshot, the
    # batch of a full refresh's first commit (which replaced bronze's rows) after one. Silver
    # records the generation it holds: one of another generation is replaced, not merged into.
    generation: int = 0

    @property
    def chunks_read(self) -> bool:
        """Whether every chunk of the snapshot is in bronze (or there is no snapshot to read)."""
        return self.snapshot is None or self.snapshot.complete

    def to_json(self) -> str:
        body: dict[str, Any] = {
            "format": FORMAT_VERSION,
            "table": self.table,
            "batch": self.batch,
            "phase": self.phase.value,
            "run_id": self.run_id,
            "position": self.position.to_json() if self.position else None,
            "snapshot": None,
        }
        if self.synced_at is not None:
            body["synced_at"] = round(self.synced_at, 3)
        if self.repair:
            body["repair"] = True
        if self.gtid is not None:
            body["gtid"] = self.gtid
        if self.ddl is not None:
            body["ddl"] = self.ddl
        if self.generation:
            body["generation"] = self.generation
        if self.schema_changes:
            body["schema_changes"] = [c.to_json() for c in self.schema_changes]
        if self.snapshot is not None:
            body["snapshot"] = {
                "key": list(self.snapshot.key),
                "chunks": [[c.index, encode_key(c.start), encode_key(c.end)] for c in self.snapshot.chunks],
                "done": {str(i): p.to_json() for i, p in sorted(self.snapshot.done.items())},
            }
        return json.dumps(body, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Checkpoint:
        body = json.loads(text)
        if body.get("format") != FORMAT_VERSION:
            raise ValueError(f"unsupported checkpoint format {body.get('format')!r}")
        snapshot = None
        if body.get("snapshot"):
            raw = body["snapshot"]
            snapshot = SnapshotProgress(
                key=tuple(raw["key"]),
                chunks=tuple(Chunk(int(i), decode_key(s), decode_key(e)) for i, s, e in raw["chunks"]),
                done={int(i): BinlogPosition.from_json(p) for i, p in raw["done"].items()},
            )
        return cls(
            table=body["table"],
            batch=int(body["batch"]),
            phase=Phase(body["phase"]),
            run_id=body["run_id"],
            snapshot=snapshot,
            position=BinlogPosition.from_json(body["position"]) if body.get("position") else None,
            synced_at=float(body["synced_at"]) if body.get("synced_at") is not None else None,
            repair=bool(body.get("repair", False)),
            gtid=body.get("gtid"),
            ddl=body.get("ddl"),
            schema_changes=tuple(LakeChange.from_json(c) for c in body.get("schema_changes", ())),
            generation=int(body.get("generation", 0)),
        )

    def advanced_to(self, position: BinlogPosition, run_id: str, synced_at: float | None = None,
                    gtid: str | None = None) -> Checkpoint:
        """The next binlog checkpoint; drops the chunk plan once every chunk is read and the
    position is past every watermark.
        ``synced_at``: when ``position`` was the source's head, if it was; else the earlier
        checkpoint's time stays (a catch-up's intermediate commit is at least that fresh).
        ``gtid``: the GTID position at ``position`` (kept only when it moved nowhere; an unknown
        one is not carried over from an earlier position)."""
        if gtid is None and position == self.position:
            gtid = self.gtid
        snapshot = self.snapshot
        if snapshot is not None and snapshot.complete and position >= snapshot.high_watermark:
            snapshot = None
        # Chunks to read again (a DDL came while they were read) keep the table in its snapshot.
        phase = Phase.SNAPSHOT if snapshot is not None and not snapshot.complete else Phase.BINLOG
        return replace(self, batch=self.batch + 1, phase=phase, position=position,
                       snapshot=snapshot, run_id=run_id, repair=False, gtid=gtid, ddl=None, schema_changes=(),
                       synced_at=synced_at if synced_at is not None else self.synced_at)
