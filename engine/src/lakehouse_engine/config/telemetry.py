"""What a project tells the outside world about its runs (``lakehouse_project.yml``):
``alerts`` (a shell command and/or a webhook on failure), ``metrics`` (a Prometheus textfile)
and ``lineage`` (OpenLineage events). Everything is off unless configured: a run never needs
the network to succeed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..errors import ConfigError


class LineageTransport(StrEnum):
    NONE = "none"
    FILE = "file"  # one JSON event per line, appended
    HTTP = "http"  # POSTed to an OpenLineage endpoint (Marquez, DataHub, ...)


@dataclass(frozen=True)
class Telemetry:
    """``on_failure``: a shell command run when an invocation fails (status ``error`` or ``fail``);
    ``webhook_url_env``: the environment variable holding a URL the run results are POSTed to
    then (kept out of the file: such URLs are secrets). ``metrics_textfile``: where the Prometheus
    textfile is written after every run. ``lineage_*``: the OpenLineage transport, its file, and
    the environment variable holding the endpoint's URL."""

    on_failure: str | None = None
    webhook_url_env: str | None = None
    metrics_textfile: str | None = None
    lineage: LineageTransport = LineageTransport.NONE
    lineage_file: str = "target/openlineage.jsonl"
    lineage_url_env: str = "OPENLINEAGE_URL"


def telemetry_from(raw: Mapping[str, Any], origin: str) -> Telemetry:
    """The settings from the file's ``alerts``, ``metrics`` and ``lineage`` sections (already
    checked for unknown keys by ``keys``); ``origin`` names the file in errors."""
    alerts, metrics, lineage = (_section(raw, name, origin) for name in ("alerts", "metrics", "lineage"))
    transport = str(lineage.get("openlineage", "none"))
    if transport not in {t.value for t in LineageTransport}:
        raise ConfigError(f"{origin}: lineage.openlineage is {transport!r}; use none, file or http",
                          setting="lineage.openlineage")
    return Telemetry(
        on_failure=_text(alerts, "on_failure", origin),
        webhook_url_env=_text(alerts, "webhook_url_env", origin),
        metrics_textfile=_text(metrics, "textfile", origin),
        lineage=LineageTransport(transport),
        lineage_file=_text(lineage, "file", origin) or Telemetry.lineage_file,
        lineage_url_env=_text(lineage, "url_env", origin) or Telemetry.lineage_url_env,
    )


def _section(raw: Mapping[str, Any], name: str, origin: str) -> Mapping[str, Any]:
    value = raw.get(name) or {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{origin}: {name} must be a mapping of settings, not {value!r}", setting=name)
    return value


def _text(section: Mapping[str, Any], key: str, origin: str) -> str | None:
    value = section.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{origin}: {key} must be a string, not {value!r}", setting=key)
    return value
