"""Recording an invocation: ``target/run_results.json`` (and ``--results-file``, a copy a
scheduler task reads without racing other runs), then what the project asked to be told
(``telemetry``: the metrics textfile, an alert on failure, the end of the OpenLineage run)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..atomicfile import write_atomically
from ..config.project import Layer, ProjectConfig
from .results import RunStatus, write_run_results

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ..tables import TableSpec
    from ..telemetry.lineage import LineageRun
    from .context import Invocation


@dataclass(frozen=True)
class Recorder:
    """Where an invocation's results go: its target folder, the ``--results-file`` copy, and the
    project's telemetry (None before the configuration is loaded: nothing to tell then)."""

    target_dir: Path | None  # None: no project folder found, nothing to write to
    results_file: Path | None = None
    config: ProjectConfig | None = None
    lineage: LineageRun | None = None

    def record(self, run: Invocation, status: RunStatus, results: Sequence[Any], message: str = "",
               extra: Mapping[str, Any] | None = None) -> Path | None:
        if self.target_dir is None:
            return None
        path = write_run_results(self.target_dir, invocation_id=run.id, command=run.command,
                                 started_at=run.started, status=status, results=results, message=message,
                                 extra=extra)
        if self.results_file is not None:
            _copy(path, self.results_file)
        if self.config is not None:
            from ..telemetry.report import after_run

            try:
                after_run(path, self.config.telemetry, self.config.name, self.config.root, self.lineage)
            except Exception:  # noqa: BLE001 (telemetry only warns: the run's outcome stands)
                log.warning("reporting the run (alerts, metrics, lineage) failed", exc_info=True)
        return path


def start_lineage(config: ProjectConfig, run: Invocation, specs: Sequence[TableSpec]) -> LineageRun | None:
    """The invocation's OpenLineage run, started (None when lineage is off)."""
    from ..config.telemetry import LineageTransport
    from ..telemetry.lineage import Datasets, LineageRun, lake_dataset, source_dataset

    if config.telemetry.lineage is LineageTransport.NONE:
        return None
    # The file transport's file is the project's (target/...), wherever the command runs from.
    settings = replace(config.telemetry, lineage_file=str(config.root / config.telemetry.lineage_file))
    source = config.source
    sources = tuple(source_dataset(source.host, source.port, source.database, s.source_table) for s in specs)
    layers = (Layer.BRONZE, Layer.SILVER)
    lake = tuple(lake_dataset(config.table_path(layer, s.name)) for s in specs for layer in layers)
    lineage = LineageRun(settings, config.name, run.command, run.id, Datasets(sources, lake))
    lineage.start()
    return lineage


def _copy(path: Path, to: Path) -> None:
    """``path`` copied to ``to`` in one step (a reader never sees half a file), readable by all."""
    write_atomically(to, path.read_text(encoding="utf-8"))
