"""``target/run_results.json``: a versioned record of every invocation, dbt style, and the
results it records of each table (``TableResult`` of an ingest, ``MaintenanceResult``).

``status`` is ``success``, ``fail`` (checks failed), ``error`` (with ``message``) or
``interrupted`` (Ctrl-C). The CLI writes it on every outcome of ``ingest``, ``follow`` and
``dq``, so it never shows an earlier run's result.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..atomicfile import write_atomically

if TYPE_CHECKING:
    from ..sink.maintenance import LayerReport

SCHEMA_VERSION = 1
FILE_NAME = "run_results.json"


class RunStatus(StrEnum):
    """The outcome of an invocation, and of each table in it (a table: success, error or
    skipped-busy)."""

    SUCCESS = "success"
    FAIL = "fail"  # quality checks ran and failed
    ERROR = "error"
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM
    SKIPPED_BUSY = "skipped-busy"  # a table another run held: not tried, try again later


@dataclass
class TableResult:
    """One table's outcome of an ingest (or of a follow's last cycle that ingested it)."""

    table: str
    status: RunStatus = RunStatus.SUCCESS
    snapshot_rows: int = 0
    binlog_rows: int = 0
    batch: int = 0
    position: str | None = None
    gtid: str | None = None  # of the transaction ending at ``position``, when known
    seconds: float = 0.0
    message: str = ""
    category: str = ""
    setting: str | None = None  # of the error: the setting to change, when one is at fault
    error_position: str | None = None  # of the error: the binlog position it happened at
    copied: bool = False  # a snapshot-only table is wholly copied: later runs leave it as it is


@dataclass
class MaintenanceResult:
    """One table's ``maintain`` outcome: each layer's file count before and after."""

    table: str
    status: RunStatus = RunStatus.SUCCESS
    layers: list[LayerReport] = field(default_factory=list)
    message: str = ""
    category: str = ""


def write_run_results(
    target_dir: Path,
    *,
    invocation_id: str,
    command: str,
    started_at: dt.datetime,
    status: RunStatus,
    results: Sequence[Any],
    message: str = "",
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write the file; ``extra`` adds top-level fields of the command (``follow``: ``cycles``)."""
    target_dir.mkdir(parents=True, exist_ok=True)
    finished = dt.datetime.now(dt.UTC)
    body = {
        "metadata": {
            "schema_version": SCHEMA_VERSION,
            "invocation_id": invocation_id,
            "command": command,
            "started_at": started_at.isoformat(),
            "finished_at": finished.isoformat(),
        },
        "status": status.value,
        "message": message,
        "elapsed_seconds": round((finished - started_at).total_seconds(), 3),
        "results": [asdict(r) if is_dataclass(r) and not isinstance(r, type) else r for r in results],
        **(extra or {}),
    }
    # Written in one step: runs of different tables may finish at the same moment.
    return write_atomically(target_dir / FILE_NAME, json.dumps(body, indent=2, default=str) + "\n")
