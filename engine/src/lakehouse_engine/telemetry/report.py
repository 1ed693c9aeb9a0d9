"""After an invocation wrote ``run_results.json``: update the metrics textfile, alert on a
failure, and end the OpenLineage run - each from the file's content, each only able to warn."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from ..config.telemetry import Telemetry
from . import alerts, metrics
from .lineage import LineageRun

__all__ = ["after_run"]

log = logging.getLogger(__name__)


def after_run(results_path: Path, settings: Telemetry, project: str, project_dir: Path,
              lineage: LineageRun | None = None) -> None:
    try:
        body = json.loads(results_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("the run results at %s could not be read for metrics and alerts: %s", results_path, exc)
        return
    if settings.metrics_textfile:
        path = project_dir / settings.metrics_textfile  # an absolute path stays as it is
        try:
            metrics.update_textfile(path, metrics.samples_of(body, time.time()))
        except OSError as exc:
            log.warning("the metrics textfile %s could not be written: %s", path, exc)
    alerts.alert(body, results_path, project, command=settings.on_failure, webhook_url_env=settings.webhook_url_env)
    if lineage is not None:
        lineage.finish(body)
