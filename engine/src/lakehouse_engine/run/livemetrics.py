"""A running ``follow``'s metrics, refreshed in the project's textfile while it runs.

A finished command's metrics are written when it is recorded (:mod:`..telemetry.report`).
``follow`` runs for weeks as a service, so it also refreshes its own samples, at most every
``EVERY_S`` seconds, merged into the same file (:func:`..telemetry.metrics.update_textfile`):

- ``lakehouse_heartbeat_timestamp_seconds{command="follow"}``: alert when it stops moving
  (``time() - ... > 300``): the service is down, or stuck in one cycle;
- ``lakehouse_table_up{command="follow",table}``: 0 once a table failed (it is no longer
  followed, or its last cycle failed);
- ``lakehouse_table_last_success_timestamp_seconds{command="follow",table}``: the start of the
  newest cycle the table came through;
- ``lakehouse_table_lag_seconds{table}``: seconds since the start of the newest cycle after
  which the table had read up to the source's head as of that start (the definition ``status``
  and ``dq`` use); until it first gets there in this run, the seconds since the follow started
  (a lower bound: the table was behind at least that long), so that a long catch-up after an
  outage shows as lag, not as the small lag an earlier run left in the file;
- ``lakehouse_follow_rows_total{table,kind}``: rows written to bronze since this follow started.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..telemetry.metrics import Sample, update_textfile
from .results import RunStatus, TableResult

log = logging.getLogger(__name__)

EVERY_S = 15.0  # Prometheus scrapes every 15-60 s: fresher samples would not be seen
COMMAND = (("command", "follow"),)


class LiveMetrics:
    """What a follow has done per table, published to the textfile at ``path``."""

    def __init__(self, path: Path, every_s: float = EVERY_S, started_at: float | None = None):
        self._path = path
        self._started_at = time.time() if started_at is None else started_at
        self._every_s = every_s
        self._published_at = float("-inf")
        self._ok_at: dict[str, float] = {}
        self._caught_up_at: dict[str, float] = {}
        self._rows: dict[tuple[str, str], int] = {}
        self._warned = False

    def cycle(self, began_at: float, results: Iterable[TableResult], caught_up: Iterable[str]) -> None:
        """A cycle that began at ``began_at`` (wall clock): the tables it ingested, and the tables
        that had then read up to the source's head as of ``began_at``."""
        failed = set()
        for result in results:
            for kind, rows in (("snapshot", result.snapshot_rows), ("binlog", result.binlog_rows)):
                self._rows[(result.table, kind)] = self._rows.get((result.table, kind), 0) + rows
            if result.status == RunStatus.SUCCESS:
                self._ok_at[result.table] = began_at
            else:
                failed.add(result.table)
        for table in caught_up:
            self._caught_up_at[table] = began_at
            if table not in failed:
                self._ok_at[table] = began_at

    def samples(self, up: Mapping[str, bool], now: float) -> list[Sample]:
        """The samples at ``now``; ``up``: each followed table's name, and whether it is fine."""
        found = [Sample("lakehouse_heartbeat_timestamp_seconds", COMMAND, now)]
        for table, fine in up.items():
            labels = (*COMMAND, ("table", table))
            found.append(Sample("lakehouse_table_up", labels, 1.0 if fine else 0.0))
            if table in self._ok_at:
                found.append(Sample("lakehouse_table_last_success_timestamp_seconds", labels, self._ok_at[table]))
            since = self._caught_up_at.get(table, self._started_at)
            found.append(Sample("lakehouse_table_lag_seconds", (("table", table),), max(0.0, now - since)))
        found += [Sample("lakehouse_follow_rows_total", (("table", table), ("kind", kind)), float(rows))
                  for (table, kind), rows in self._rows.items()]
        return found

    def publish(self, up: Mapping[str, bool], now: float | None = None) -> None:
        """Write the samples, unless they were written less than ``every_s`` ago; a file that
        cannot be written is one warning (metrics never stop the capture)."""
        clock = time.monotonic()
        if clock - self._published_at < self._every_s:
            return
        self._published_at = clock
        try:
            update_textfile(self._path, self.samples(up, time.time() if now is None else now))
        except OSError as exc:
            if not self._warned:
                log.warning("follow: the metrics textfile %s could not be written: %s", self._path, exc)
                self._warned = True
