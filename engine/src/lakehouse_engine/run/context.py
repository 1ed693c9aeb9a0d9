"""What every command runs with (``CommandContext``): the loaded project, its table package, this
invocation and the console's format; the tables it selects and its record in
``run_results.json`` come from here."""

from __future__ import annotations

import datetime as dt
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config.project import ProjectConfig
from .options import Selection
from .printer import LogFormat
from .recording import Recorder
from .results import RunStatus

if TYPE_CHECKING:
    from ..tables import TableSpec


@dataclass(frozen=True)
class Invocation:
    """One run of a command: its name, id (``run_results.json``'s ``invocation_id``) and start."""

    command: str
    id: str
    started: dt.datetime


@dataclass(frozen=True)
class CommandContext:
    """What a command runs with, built once the project's configuration is loaded."""

    config: ProjectConfig
    package: str  # the project's package; its ``tables`` subpackage holds the table modules
    invocation: Invocation
    project_dir: Path  # resolved
    log_format: LogFormat
    recorder: Recorder  # run_results.json, --results-file and the project's telemetry

    def all_specs(self) -> dict[str, TableSpec]:
        """Every table module of the project."""
        from ..tables import discover

        return discover(importlib.import_module(f"{self.package}.tables"))

    def specs(self, selection: Selection) -> list[TableSpec]:
        """The tables ``--select`` and ``--exclude`` choose."""
        from ..config.selection import select_tables

        return select_tables(self.all_specs(), selection.select, selection.exclude, self.package)

    def record(self, status: RunStatus, results: Sequence[Any], message: str = "",
               extra: Mapping[str, Any] | None = None) -> None:
        """Write this invocation's ``run_results.json``, then alert, update metrics, end lineage."""
        self.recorder.record(self.invocation, status, results, message, extra)
