"""``status``: each table's progress, read from the Delta logs as files, without Spark.

Bronze commits carry the table's whole checkpoint (phase, batch, chunk plan, binlog position) as
their ``userMetadata`` and silver commits the bronze batch they applied (see ``bronze.py`` and
``silver.py``). Both are in the newest commit files of the table's ``_delta_log``, so reading a
few small JSON files (``sink/log/localfiles.py``) answers everything: no JVM (seconds to start),
no source password. Only the lag behind the source needs the source, and is shown only when the
password is at hand.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..sink.log.localfiles import commits_back, log_dir
from ..state.checkpoint import Checkpoint, Phase
from ..state.followstate import ReadAhead
from ..state.positions import BinlogPosition, bytes_behind
from .results import FILE_NAME as RUN_RESULTS

# Delta keeps commit files 30 days by default; older ones are folded into a Parquet checkpoint.
LOG_CLEANED = "its newest commits are gone from the Delta log (log cleanup)"


@dataclass(frozen=True)
class TableState:
    """One table as its lake says: ``checkpoint`` is None when bronze has no checkpoint yet."""

    table: str
    checkpoint: Checkpoint | None = None
    committed_at: dt.datetime | None = None  # the bronze commit carrying ``checkpoint``
    silver_batch: int | None = None  # the last bronze batch merged into silver
    note: str = ""  # why the state is unknown, when it is
    silver_generation: int = 0  # the bronze generation silver holds (see Checkpoint.generation)
    read_ahead: ReadAhead | None = None  # how far a running follow has read it (``followstate``)

    @property
    def refreshing(self) -> bool:
        """A full refresh is under way: bronze has a new generation silver does not hold yet."""
        cp = self.checkpoint
        return cp is not None and self.silver_batch is not None and cp.generation != self.silver_generation

    @property
    def phase(self) -> str:
        cp = self.checkpoint
        if cp is None:
            return self.note or "not ingested yet"
        if cp.phase == Phase.SNAPSHOT and cp.snapshot is not None:
            what = "refresh" if self.refreshing else "snapshot"
            return f"{what} {len(cp.snapshot.done)}/{len(cp.snapshot.chunks)} chunks"
        return cp.phase.value

    def warning(self) -> str:
        """What the user must know, and do, about a state no run finishes by itself ("" if none)."""
        cp = self.checkpoint
        if cp is None or self.silver_batch is None:
            return ""
        if self.refreshing:
            return (f"{self.table}: a full refresh is under way: silver holds the table as it was before it; "
                    f"`make ingest TABLE={self.table}` finishes it")
        if self.silver_batch > cp.batch:
            return (f"{self.table}: silver has merged bronze batch {self.silver_batch}, but bronze's newest is "
                    f"{cp.batch}: bronze lost commits; `make rebuild TABLE={self.table}` makes silver anew from it")
        return ""

    @property
    def position(self) -> BinlogPosition | None:
        """Every change up to here is in bronze (during a snapshot: its lowest chunk watermark)."""
        cp = self.checkpoint
        if cp is None:
            return None
        if cp.position is not None:
            return cp.position
        return cp.snapshot.low_watermark if cp.snapshot is not None and cp.snapshot.done else None


@dataclass(frozen=True)
class LastRun:
    """The outcome recorded in ``target/run_results.json``."""

    command: str
    status: str
    finished_at: dt.datetime | None
    message: str
    tables: Mapping[str, str]  # table -> its own status in that run


def read_local(table: str, bronze_path: str, silver_path: str) -> TableState:
    """The state of a table on a local lake, from its commit files alone."""
    bronze_log = log_dir(bronze_path)
    if not bronze_log.is_dir():
        return TableState(table)
    found = next((c for c in commits_back(bronze_log) if c.operation == "WRITE" and c.user_metadata), None)
    if found is None or found.user_metadata is None:
        # Table creation alone has no checkpoint; no file at all is a cleaned-up log.
        note = "" if any(True for _ in commits_back(bronze_log)) else LOG_CLEANED
        return TableState(table, note=note)
    marker = silver_marker(log_dir(silver_path))
    return TableState(table, Checkpoint.from_json(found.user_metadata), found.at,
                      int(marker["bronze_batch"]) if marker is not None else None,
                      silver_generation=int((marker or {}).get("generation", 0)))


def silver_marker(log: Path) -> dict[str, Any] | None:
    """The newest silver marker (the bronze batch merged, its run and generation); None when
    silver does not exist yet."""
    if not log.is_dir():
        return None
    for commit in commits_back(log):
        if commit.user_metadata:  # not on table creation or maintenance commits
            return dict(json.loads(commit.user_metadata))
    return None


def last_run(target_dir: Path) -> LastRun | None:
    """The last recorded run; None when there is none or the file cannot be read."""
    try:
        body = json.loads((target_dir / RUN_RESULTS).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict):
        return None
    meta = body.get("metadata") or {}
    tables = {}
    for result in body.get("results") or []:
        if isinstance(result, dict) and "table" in result:
            tables[str(result["table"])] = _table_status(result)
    return LastRun(command=str(meta.get("command", "?")), status=str(body.get("status", "?")),
                   finished_at=_parse_time(meta.get("finished_at")), message=str(body.get("message") or ""),
                   tables=tables)


def _table_status(result: Mapping[str, Any]) -> str:
    if "status" in result:  # ingest and follow
        return str(result["status"])
    return "pass" if result.get("success") else "fail"  # dq


def _parse_time(text: object) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None


def lag_numbers(state: TableState, head: BinlogPosition, sizes: Mapping[str, int],
                now: dt.datetime) -> tuple[int | None, float | None]:
    """How far a table is behind the source: binlog bytes from where it resumes, and seconds
    measured as ``dq`` measures them (``freshness.measure_lag``: 0 at the head, else the time
    since its data was last complete; None when unknown). (None, None) for a table not read."""
    from ..quality.freshness import measure_lag  # pure: no Spark, no GX

    checkpoint, position = state.checkpoint, state.position
    if checkpoint is None or position is None:
        return None, None
    synced = checkpoint.synced_at
    ahead = state.read_ahead  # an idle table's advance that a running follow holds uncommitted
    if ahead is not None and ahead.position > position:
        position, synced = ahead.position, ahead.at
    measured = measure_lag(position, synced, head, now.timestamp())
    return bytes_behind(position, head, sizes), measured.lag_seconds


def lag(state: TableState, head: BinlogPosition, sizes: Mapping[str, int], now: dt.datetime) -> str:
    """``lag_numbers`` as text: "1,234 bytes, 5m" ("?" for an unknown time, "-" when not read)."""
    behind, seconds = lag_numbers(state, head, sizes, now)
    if behind is None:
        return "-"
    return f"{behind:,} bytes, {'?' if seconds is None else duration(seconds)}"


def duration(seconds: float) -> str:
    """A short duration: 42s, 5m, 3h, 2d."""
    whole = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def age(at: dt.datetime | None, now: dt.datetime) -> str:
    """``at`` as a short age: 42s, 5m, 3h, 2d ago."""
    if at is None:
        return "-"
    return f"{duration((now - at).total_seconds())} ago"


def table_lines(states: Sequence[TableState], lags: Mapping[str, str] | None, run: LastRun | None,
                now: dt.datetime) -> list[str]:
    """The table: one header line and one line per table."""
    lines = [f"{'table':<24} {'phase':<22} {'batch':>5} {'silver':>6}  {'position':<24} "
             f"{'behind source':<22} {'last commit':<11}  last run"]
    for state in states:
        cp = state.checkpoint
        if cp is None:
            lines.append(f"{state.table:<24} {state.phase}")
            continue
        silver = "-" if state.silver_batch is None else str(state.silver_batch)
        behind = "-" if lags is None else lags.get(state.table, "-")
        result = run.tables.get(state.table, "-") if run is not None else "-"
        lines.append(f"{state.table:<24} {state.phase:<22} {cp.batch:>5} {silver:>6}  "
                     f"{str(state.position or '-'):<24} {behind:<22} {age(state.committed_at, now):<11}  {result}")
    lines += [f"WARNING {w}" for w in (state.warning() for state in states) if w]
    return lines


def run_line(run: LastRun | None, now: dt.datetime) -> str:
    if run is None:
        return "last run: none recorded (target/run_results.json)"
    when = f", finished {age(run.finished_at, now)}" if run.finished_at else ""
    message = f": {run.message}" if run.message else ""
    return f"last run: {run.command} {run.status}{when}{message}"
