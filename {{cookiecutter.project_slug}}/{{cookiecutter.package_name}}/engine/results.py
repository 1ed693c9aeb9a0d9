"""``target/run_results.json``: a versioned record of every invocation, dbt style."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1


def write_run_results(
    target_dir: Path,
    *,
    invocation_id: str,
    command: str,
    started_at: dt.datetime,
    status: str,
    results: Sequence[Any],
    message: str = "",
) -> Path:
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
        "status": status,
        "message": message,
        "elapsed_seconds": round((finished - started_at).total_seconds(), 3),
        "results": [asdict(r) if is_dataclass(r) else r for r in results],
    }
    path = target_dir / "run_results.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=2, default=str) + "\n")
    tmp.replace(path)
    return path
