"""Requests to a running ``follow``: work on a table only the run holding its lock may do.

``follow`` holds its tables' ingest locks for as long as it runs, so ``repair`` cannot take the
lock of a followed table. It leaves a request in ``target/requests/`` instead; the follow serves
it between two cycles, with its own Spark session and pipeline, and answers beside it; the
requesting run prints the answer. Capture goes on: the follow resumes its cycles right after.

A request moves through three files, each written whole (a temporary name, then a rename), so
neither side ever reads half of one::

    <table>.<kind>.<id>.request   left by the requester
    <table>.<kind>.<id>.serving   renamed so by the follow when it starts the work
    <table>.<kind>.<id>.answer    the outcome (JSON); the .serving file is removed

The rename is the hand-over: a requester that gives up removes its ``.request`` file, and finds
it gone only when the follow has already started (then the answer will still come, and the
follow's log has it). A ``.serving`` file left by a follow killed mid-work is harmless: the
requester, finding the lock free, does the work itself and removes it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REQUEST, SERVING, ANSWER = "request", "serving", "answer"


@dataclass(frozen=True)
class Request:
    folder: Path
    table: str
    kind: str  # what is asked: "repair"
    id: str  # the requesting run's invocation id

    def path(self, state: str) -> Path:
        return self.folder / f"{self.table}.{self.kind}.{self.id}.{state}"


class Requests:
    """The request folder of one project (``target/requests``)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def ask(self, table: str, kind: str, request_id: str) -> Request:
        request = Request(self.folder, table, kind, request_id)
        _write_whole(request.path(REQUEST), {"table": table, "kind": kind, "id": request_id})
        return request

    def pending(self, kind: str, tables: Collection[str]) -> list[Request]:
        """Requests of ``kind`` for ``tables`` not yet taken, oldest first."""
        if not self.folder.is_dir():
            return []
        found = []
        for path in self.folder.glob(f"*.{kind}.*.{REQUEST}"):
            table, _, rest = path.name.partition(f".{kind}.")
            if table not in tables:
                continue
            try:
                asked_at = path.stat().st_mtime_ns
            except FileNotFoundError:  # withdrawn since the listing
                continue
            found.append((asked_at, Request(self.folder, table, kind, rest.removesuffix(f".{REQUEST}"))))
        return [request for _, request in sorted(found, key=lambda pair: (pair[0], pair[1].path(REQUEST).name))]

    def take(self, request: Request) -> bool:
        """Start serving ``request``; False when its requester withdrew it meanwhile."""
        try:
            request.path(REQUEST).rename(request.path(SERVING))
        except FileNotFoundError:
            return False
        return True

    def answer(self, request: Request, outcome: Mapping[str, Any]) -> None:
        _write_whole(request.path(ANSWER), dict(outcome))
        request.path(SERVING).unlink(missing_ok=True)

    def answer_to(self, request: Request) -> dict[str, Any] | None:
        """The answer, once there (its file is removed: it is read once)."""
        path = request.path(ANSWER)
        try:
            outcome = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        path.unlink(missing_ok=True)
        return outcome if isinstance(outcome, dict) else None

    def withdraw(self, request: Request) -> bool:
        """Take the request back; False when the follow had already started it."""
        try:
            request.path(REQUEST).unlink()
        except FileNotFoundError:
            return False
        return True

    def forget(self, request: Request) -> None:
        """Remove every file of ``request`` (its requester does the work itself)."""
        for state in (REQUEST, SERVING, ANSWER):
            request.path(state).unlink(missing_ok=True)


def _write_whole(path: Path, content: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(content, default=str))
    os.replace(partial, path)
