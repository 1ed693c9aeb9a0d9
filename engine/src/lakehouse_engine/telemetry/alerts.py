"""``alerts`` in lakehouse_project.yml: tell someone when an invocation fails.

A failure is status ``error`` (a table or the run failed) or ``fail`` (quality checks failed);
``interrupted`` is a stop someone asked for (Ctrl-C, a scheduler's SIGTERM), not a failure.

- ``on_failure``: a shell command, run with the run results' path in ``LAKEHOUSE_RUN_RESULTS``,
  the command and status in ``LAKEHOUSE_COMMAND``/``LAKEHOUSE_STATUS``, and the results' JSON on
  its standard input (e.g. ``mail -s "lakehouse failed" oncall@example.com``).
- ``webhook_url_env``: the environment variable holding a URL (a Slack or Teams incoming webhook,
  an alert manager); it gets a POST of ``{"text": <one line>, "run_results": <the results>}``.

Both are bounded in time and can only warn: they never change the invocation's exit code.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["FAILED", "alert", "summary"]

log = logging.getLogger(__name__)

FAILED = frozenset({"error", "fail"})
TIMEOUT_S = 30.0


def summary(body: Mapping[str, Any], project: str) -> str:
    """One line saying what failed: the command, its status, the failing tables and the message."""
    failing = [str(r.get("table")) for r in body.get("results", [])
               if r.get("status") in FAILED or r.get("success") is False]
    tables = f" ({', '.join(failing)})" if failing else ""
    message = f": {body['message']}" if body.get("message") else ""
    return f"lakehouse {project}: {body['metadata']['command']} {body['status']}{tables}{message}"


def alert(body: Mapping[str, Any], results_path: Path, project: str, *, command: str | None,
          webhook_url_env: str | None) -> None:
    """Run the hook and call the webhook when ``body`` is a failure; log, never raise."""
    if body.get("status") not in FAILED:
        return
    if command:
        try:
            _run_hook(command, body, results_path)
        except Exception as exc:  # noqa: BLE001 (e.g. no shell): an alert only warns
            log.warning("alerts.on_failure could not be run: %s", exc)
    if webhook_url_env:
        try:
            _post(webhook_url_env, {"text": summary(body, project), "run_results": body})
        except Exception as exc:  # noqa: BLE001 (a malformed URL, a broken HTTP answer): only warn
            # The URL is a secret (it holds the webhook's token): name the variable, never the value.
            log.warning("the webhook in %s could not be called: %s", webhook_url_env, type(exc).__name__)


def _run_hook(command: str, body: Mapping[str, Any], results_path: Path) -> None:
    env = {**os.environ, "LAKEHOUSE_RUN_RESULTS": str(results_path),
           "LAKEHOUSE_COMMAND": str(body["metadata"]["command"]), "LAKEHOUSE_STATUS": str(body["status"])}
    try:
        done = subprocess.run(command, shell=True, input=json.dumps(body, default=str), text=True, env=env,
                              capture_output=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        log.warning("alerts.on_failure did not finish in %.0f s and was stopped: %s", TIMEOUT_S, command)
        return
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        log.warning("alerts.on_failure exited %d: %s", done.returncode, tail[0][:300])


def _post(url_env: str, payload: Mapping[str, Any]) -> None:
    url = os.environ.get(url_env, "")
    if not url:
        log.warning("alerts.webhook_url_env names %s, which is not set: no webhook was called", url_env)
        return
    request = urllib.request.Request(url, data=json.dumps(payload, default=str).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 (the user's URL)
            response.read()
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        # The URL is a secret (it holds the webhook's token): name the variable, never the value.
        log.warning("the webhook in %s could not be called: %s", url_env, getattr(exc, "reason", exc))
