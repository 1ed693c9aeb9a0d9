"""Prometheus metrics as a node_exporter textfile (``metrics.textfile`` in lakehouse_project.yml).

After every recorded command (``ingest``, ``dq``, ``repair``, ...; ``follow`` when it stops,
and every 15 s while it runs: :mod:`..run.livemetrics`), the file is rewritten in one step
(a temporary file renamed over it, as the textfile collector requires) with, per table: the
rows of its last run, its status, when it last succeeded, and the lag ``dq`` measured. Tables
not in this run keep their samples from the previous file, so one file serves every command and
``time() - lakehouse_table_last_success_timestamp_seconds`` alerts on a table nobody ingests.
"""

from __future__ import annotations

import fcntl
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomicfile import write_atomically

__all__ = ["METRICS", "Sample", "lag_samples", "render", "samples_of", "update_textfile"]

# name -> (type, help)
METRICS: dict[str, tuple[str, str]] = {
    "lakehouse_table_rows": ("gauge", "Rows the table's last run wrote to bronze, by kind (snapshot, binlog)."),
    "lakehouse_table_run_seconds": ("gauge", "Seconds the table's last run took."),
    "lakehouse_table_up": ("gauge", "1 when the table's last run of the command succeeded, else 0."),
    "lakehouse_table_last_success_timestamp_seconds": ("gauge", "When a run of the command last succeeded."),
    "lakehouse_table_lag_seconds": ("gauge", "Silver's lag behind the source, as dq, status or a running follow "
                                             "last measured it."),
    "lakehouse_table_lag_bytes": ("gauge", "Binlog bytes from the table's position to the source's head (status)."),
    "lakehouse_last_run_timestamp_seconds": ("gauge", "When the command last finished, by status."),
    "lakehouse_heartbeat_timestamp_seconds": ("gauge", "When a running follow last reported (every 15 s)."),
    "lakehouse_follow_rows_total": ("counter", "Rows a running follow wrote to bronze since it started, by kind."),
}
_LINE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, order=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def line(self) -> str:
        labels = ",".join(f'{k}="{_escaped(v)}"' for k, v in self.labels)
        return f"{self.name}{{{labels}}} {self.value:.17g}"


def samples_of(body: Mapping[str, Any], finished_at: float) -> list[Sample]:
    """The samples one run's results give (``body``: run_results.json's content)."""
    command = str(body["metadata"]["command"])
    status = str(body["status"])
    found = [Sample("lakehouse_last_run_timestamp_seconds", (("command", command), ("status", status)),
                    finished_at)]
    for result in body.get("results", []):
        found.extend(_table_samples(command, result, finished_at))
    return found


def _table_samples(command: str, result: Mapping[str, Any], finished_at: float) -> Iterable[Sample]:
    table = str(result.get("table", ""))
    if not table or result.get("status") == "skipped-busy":  # not tried: its last samples stand
        return
    labels = (("command", command), ("table", table))
    ok = result.get("status", "success") == "success" and result.get("success", True) is not False
    yield Sample("lakehouse_table_up", labels, 1.0 if ok else 0.0)
    if ok:
        yield Sample("lakehouse_table_last_success_timestamp_seconds", labels, finished_at)
    for kind in ("snapshot", "binlog"):
        if f"{kind}_rows" in result:
            yield Sample("lakehouse_table_rows", (*labels, ("kind", kind)), float(result[f"{kind}_rows"]))
    if "seconds" in result:
        yield Sample("lakehouse_table_run_seconds", labels, float(result["seconds"]))
    if result.get("lag_seconds") is not None:
        yield Sample("lakehouse_table_lag_seconds", (("table", table),), float(result["lag_seconds"]))


def lag_samples(tables: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """The lags ``status`` measured (its JSON document's tables); an unknown lag gives none."""
    found = []
    for table in tables:
        labels = (("table", str(table["table"])),)
        if table.get("behind_bytes") is not None:
            found.append(Sample("lakehouse_table_lag_bytes", labels, float(table["behind_bytes"])))
        if table.get("lag_seconds") is not None:
            found.append(Sample("lakehouse_table_lag_seconds", labels, float(table["lag_seconds"])))
    return found


def update_textfile(path: Path, fresh: Iterable[Sample]) -> None:
    """Merge ``fresh`` into the textfile at ``path`` (a fresh sample replaces the one with the
    same name and labels) and replace the file in one step."""
    # Under a lock: a running follow rewrites the file every 15 s, and a dq or ingest writing
    # between its read and its rename would lose its samples.
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        merged = {(s.name, s.labels): s for s in _read(path)}
        merged.update({(s.name, s.labels): s for s in fresh})
        write_atomically(path, render(merged.values()))  # 0644: node_exporter runs as another user


def render(samples: Iterable[Sample]) -> str:
    """The exposition text: each metric's HELP and TYPE once, then its samples in order."""
    by_name: dict[str, list[Sample]] = {}
    for sample in sorted(samples):
        by_name.setdefault(sample.name, []).append(sample)
    lines = []
    for name, group in by_name.items():
        kind, text = METRICS.get(name, ("gauge", name))
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", *(s.line() for s in group)]
    return "\n".join(lines) + "\n" if lines else ""


def _read(path: Path) -> list[Sample]:
    """The samples of the engine's own earlier file (other lines, and a missing file, give none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    found = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is not None and match["name"] in METRICS:
            labels = tuple((k, _unescaped(v)) for k, v in _LABEL.findall(match["labels"]))
            found.append(Sample(match["name"], labels, float(match["value"])))
    return found


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _unescaped(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], value)
