"""``status --json``: each table's state as one versioned JSON document, and the JSON Schemas
of that document and of ``run_results.json`` (``lakehouse schema status|run-results``), so a
dashboard or a scheduler reads the engine without parsing its console lines.

Schema version 1. Times are ISO 8601 in UTC; a value that cannot be known is null (the lag
without the source's password, a table never ingested), never a guess.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..state.positions import BinlogPosition
from .results import SCHEMA_VERSION as RUN_RESULTS_VERSION
from .status import LastRun, TableState, lag_numbers

SCHEMA_VERSION = 1
DRAFT = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True)
class SourceHead:
    """The source's binlog head and file sizes, read once for every table's lag."""

    position: BinlogPosition
    sizes: Mapping[str, int]


@dataclass(frozen=True)
class TableFacts:
    """What status knows of a table beside its lake state: how it is kept, and who runs it now."""

    followed: bool  # False: snapshot-only, copied once on purpose
    running: tuple[int, str] | None  # (pid, command) holding its lock


def document(target: str, lake_root: str, states: Sequence[TableState], facts: Mapping[str, TableFacts],
             head: SourceHead | None, note: str, last: LastRun | None, now: dt.datetime) -> dict[str, Any]:
    """The whole ``status --json`` document."""
    return {
        "schema_version": SCHEMA_VERSION, "generated_at": now.isoformat(), "target": target, "lake_root": lake_root,
        "source_head": str(head.position) if head is not None else None, "lag_note": note or None,
        "tables": [table_entry(s, facts[s.table], head, last, now) for s in states],
        "last_run": None if last is None else {
            "command": last.command, "status": last.status, "message": last.message,
            "finished_at": last.finished_at.isoformat() if last.finished_at else None},
    }


def table_entry(state: TableState, facts: TableFacts, head: SourceHead | None, last: LastRun | None,
                now: dt.datetime) -> dict[str, Any]:
    """One table: its phase (with the snapshot's progress), batches, position and lag."""
    cp = state.checkpoint
    progress = cp.snapshot if cp is not None else None
    behind, seconds = (lag_numbers(state, head.position, head.sizes, now) if head is not None and facts.followed
                       else (None, None))
    return {
        "table": state.table, "mode": "followed" if facts.followed else "snapshot-only",
        "phase": state.phase if cp is not None else "not ingested",
        "note": state.note or None,
        "chunks_done": len(progress.done) if progress is not None else None,
        "chunks_total": len(progress.chunks) if progress is not None else None,
        "batch": cp.batch if cp is not None else None, "silver_batch": state.silver_batch,
        "position": str(state.position) if state.position is not None else None,
        "behind_bytes": behind, "lag_seconds": seconds,
        "last_commit_at": state.committed_at.isoformat() if state.committed_at else None,
        "running": None if facts.running is None else {"pid": facts.running[0], "command": facts.running[1]},
        "last_run_status": last.tables.get(state.table) if last is not None else None,
        "warning": state.warning() or None,
    }


def _nullable(kind: str | list[str]) -> dict[str, Any]:
    kinds = [kind] if isinstance(kind, str) else kind
    return {"type": [*kinds, "null"]}


def status_schema() -> dict[str, Any]:
    """The JSON Schema of ``status --json``."""
    table = {"type": "object", "required": ["table", "mode", "phase"], "properties": {
        "table": {"type": "string"}, "mode": {"enum": ["followed", "snapshot-only"]},
        "phase": {"type": "string", "description": "not ingested, snapshot N/M chunks, refresh N/M chunks, binlog"},
        "note": _nullable("string"), "chunks_done": _nullable("integer"), "chunks_total": _nullable("integer"),
        "batch": _nullable("integer"), "silver_batch": _nullable("integer"), "position": _nullable("string"),
        "behind_bytes": {**_nullable("integer"), "description": "binlog bytes from the table's position to the head"},
        "lag_seconds": {**_nullable("number"), "description": "as dq measures it: 0 at the head, null unknown"},
        "last_commit_at": _nullable("string"),
        "running": {"type": ["object", "null"], "properties": {"pid": {"type": "integer"},
                                                               "command": {"type": "string"}}},
        "last_run_status": _nullable("string"), "warning": _nullable("string")}}
    return {"$schema": DRAFT, "title": "lakehouse status --json", "type": "object",
            "required": ["schema_version", "target", "lake_root", "tables"], "properties": {
                "schema_version": {"const": SCHEMA_VERSION}, "generated_at": {"type": "string"},
                "target": {"type": "string"}, "lake_root": {"type": "string"},
                "source_head": _nullable("string"), "lag_note": _nullable("string"),
                "tables": {"type": "array", "items": table}, "last_run": {"type": ["object", "null"]}}}


def run_results_schema() -> dict[str, Any]:
    """The JSON Schema of ``target/run_results.json`` (and ``--results-file``)."""
    metadata = {"type": "object", "required": ["schema_version", "invocation_id", "command"], "properties": {
        "schema_version": {"const": RUN_RESULTS_VERSION}, "invocation_id": {"type": "string"},
        "command": {"type": "string"}, "started_at": {"type": "string"}, "finished_at": {"type": "string"}}}
    result = {"type": "object", "required": ["table"], "properties": {
        "table": {"type": "string"},
        "status": {"enum": ["success", "fail", "error", "interrupted", "skipped-busy"],
                   "description": "ingest, follow, repair (fail: rows still differ), rebuild, maintain"},
        "success": {"type": "boolean", "description": "dq: every check passed"},
        "snapshot_rows": {"type": "integer"}, "binlog_rows": {"type": "integer"}, "batch": {"type": "integer"},
        "position": _nullable("string"), "seconds": {"type": "number"}, "message": {"type": "string"},
        "category": {"type": "string"}, "lag_seconds": _nullable("number"),
        "checks": {"type": "array", "items": {"type": "object", "properties": {
            "expectation": {"type": "string"}, "success": {"type": "boolean"}, "observed": {"type": "string"}}}},
        "layers": {"type": "array", "description": "maintain: each layer's files and the steps that ran",
                   "items": {"type": "object", "properties": {
                       "layer": {"enum": ["bronze", "silver"]}, "files_before": {"type": "integer"},
                       "files_after": {"type": "integer"}, "seconds": {"type": "number"},
                       "compacted": {"type": "boolean"}, "vacuumed": {"type": "boolean"}}}}}}
    return {"$schema": DRAFT, "title": "run_results.json", "type": "object",
            "required": ["metadata", "status", "results"], "properties": {
                "metadata": metadata, "status": {"enum": ["success", "fail", "error", "interrupted", "skipped-busy"]},
                "message": {"type": "string"}, "elapsed_seconds": {"type": "number"},
                "results": {"type": "array", "items": result},
                "error": {"type": "object", "description": "the failure's table, setting and position"}}}
