"""OpenLineage run events (``lineage`` in lakehouse_project.yml), through the
``openlineage-python`` client: a START when an invocation begins and a COMPLETE, FAIL or ABORT
when it ends, under one run id, for the job ``<project>.<command>``. Its inputs are the source
tables (namespace ``mysql://host:port``, name ``database.table``), its outputs the bronze and
silver Delta tables (namespace the lake's scheme and authority, name the path), so a lineage
server (Marquez, DataHub, OpenMetadata) draws source -> bronze -> silver per table.

``dq`` reads silver and the source and writes nothing: both are its inputs.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from .. import __version__
from ..config.telemetry import LineageTransport, Telemetry

__all__ = ["Datasets", "LineageRun", "lake_dataset", "source_dataset"]

log = logging.getLogger(__name__)

PRODUCER = f"https://pypi.org/project/lakehouse-engine/{__version__}"
# skipped-busy: the run did its work for the tables it could take; the others are another run's.
_END_STATES = {"success": "COMPLETE", "skipped-busy": "COMPLETE", "fail": "FAIL", "error": "FAIL",
               "interrupted": "ABORT"}
WRITERS = frozenset({"ingest", "follow", "rebuild", "repair", "maintain"})


@dataclass(frozen=True)
class Datasets:
    """The tables an invocation touches: ``(namespace, name)`` pairs."""

    sources: tuple[tuple[str, str], ...]
    lake: tuple[tuple[str, str], ...]


def lake_dataset(path: str) -> tuple[str, str]:
    """A Delta table's OpenLineage namespace and name, by the naming spec: ``file`` and the
    absolute path for a local lake, ``s3://bucket`` (``s3a`` counts as ``s3``) and the key, etc."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return "file", os.path.abspath(parsed.path or path)
    scheme = "s3" if parsed.scheme in ("s3a", "s3n") else parsed.scheme
    return f"{scheme}://{parsed.netloc}", parsed.path.lstrip("/")


class LineageRun:
    """One invocation's events; does nothing when lineage is off, and only warns on failure."""

    def __init__(self, settings: Telemetry, project: str, command: str, run_id: str,
                 datasets: Datasets) -> None:
        self._settings, self._job, self._run_id, self._datasets = settings, f"{project}.{command}", run_id, datasets
        self._writes = command in WRITERS
        self._client: Any = None
        if settings.lineage is not LineageTransport.NONE:
            try:
                self._client = _client(settings)
            except Exception as exc:  # noqa: BLE001 (an unwritable file, a bad URL): lineage only warns
                log.warning("OpenLineage is off for this run: its %s transport could not be set up: %s",
                            settings.lineage.value, exc)

    @property
    def enabled(self) -> bool:
        return self._client is not None

    def start(self) -> None:
        self._emit("START")

    def finish(self, body: Mapping[str, Any]) -> None:
        self._emit(_END_STATES.get(str(body.get("status")), "FAIL"))

    def abort(self) -> None:
        """The run stopped before it did anything (e.g. refused: another run holds a table)."""
        self._emit("ABORT")

    def _emit(self, state: str) -> None:
        if self._client is None:
            return
        from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState

        sources = [InputDataset(namespace=n, name=t) for n, t in self._datasets.sources]
        lake = self._datasets.lake
        event = RunEvent(
            eventType=RunState[state], eventTime=dt.datetime.now(dt.UTC).isoformat(), producer=PRODUCER,
            run=Run(runId=self._run_id), job=Job(namespace=_namespace(), name=self._job),
            inputs=sources if self._writes else sources + [InputDataset(namespace=n, name=t) for n, t in lake],
            outputs=[OutputDataset(namespace=n, name=t) for n, t in lake] if self._writes else [],
        )
        try:
            self._client.emit(event)
        except Exception as exc:  # noqa: BLE001 (any transport error: lineage must not fail a run)
            log.warning("the OpenLineage %s event of %s could not be sent: %s", state, self._job, exc)


def source_dataset(host: str, port: int, database: str, table: str) -> tuple[str, str]:
    return f"mysql://{host}:{port}", f"{database}.{table}"


def _namespace() -> str:
    return os.environ.get("OPENLINEAGE_NAMESPACE", "lakehouse")


def _client(settings: Telemetry) -> Any:
    from openlineage.client import OpenLineageClient

    if settings.lineage is LineageTransport.FILE:
        from openlineage.client.transport.file import FileConfig, FileTransport

        os.makedirs(os.path.dirname(os.path.abspath(settings.lineage_file)), exist_ok=True)
        return OpenLineageClient(transport=FileTransport(FileConfig(log_file_path=settings.lineage_file,
                                                                    append=True)))
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    url = os.environ.get(settings.lineage_url_env, "")
    if not url:
        log.warning("lineage.openlineage is http but %s is not set: no lineage events are sent",
                    settings.lineage_url_env)
        return None
    return OpenLineageClient(transport=HttpTransport(HttpConfig(url=url, timeout=5.0)))
