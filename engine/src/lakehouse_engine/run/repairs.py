"""``repair``: each table repaired here, or by the ``follow`` that holds it, without stopping it.

A table's repair needs its ingest lock (see ``run.repair``). When a ``follow`` holds the
lock, the repair is asked of it through ``run.requests``: the follow repairs the table between
two cycles, on its own Spark session and pipeline, and answers; its capture then goes on. The
requesting run starts no Spark of its own for that table. Should the follow stop before it
answers, the lock comes free and the requester does the repair itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config.project import ProjectConfig
from ..state.holders import UNKNOWN_HOLDER
from ..tables import TableSpec
from .locks import TableBusy, locks_folder, table_locks
from .repair import RepairResult, repair_or_error
from .requests import Request, Requests
from .results import RunStatus

if TYPE_CHECKING:
    from .pipeline import Pipeline

log = logging.getLogger(__name__)

KIND = "repair"


def requests_of(config: ProjectConfig) -> Requests:
    return Requests(config.target_dir / "requests")


Repair = Callable[[TableSpec, str], RepairResult]  # repairs a table for a run id, failure as its result


class RepairServer:
    """Serves the repair requests for a follow's tables; called by the follow between cycles with
    every table it holds (``known``). ``repair`` runs on the follow's own Spark session and
    pipeline."""

    def __init__(self, requests: Requests, repair: Repair):
        self._requests = requests
        self._repair = repair

    def __call__(self, known: Mapping[str, TableSpec]) -> None:
        for request in self._requests.pending(KIND, known):
            if not self._requests.take(request):
                continue  # withdrawn by its requester meanwhile
            # Also a table no longer followed (failed, or snapshot-only and copied): its lock is
            # still this run's; a failed table's repair fails with its error, which is the answer.
            log.info("follow: repairing %s, as run %s asked", request.table, request.id)
            result = self._repair(known[request.table], request.id)
            log.info("follow: repair of %s: %s", request.table, result.message or result.after)
            self._requests.answer(request, result.as_dict())


def repair_here(config: ProjectConfig, pipeline: Callable[[], Pipeline]) -> Repair:
    """The repair of a table on ``pipeline()``'s Spark session (asked for when first needed)."""

    def repair(spec: TableSpec, run_id: str) -> RepairResult:
        ready = pipeline()
        return repair_or_error(config, ready.spark, ready.ingest, spec, run_id)

    return repair


@dataclass(frozen=True)
class Waiting:
    wait_s: float  # how long to wait for a follow's answer
    poll_s: float = 0.5


def repair_tables(config: ProjectConfig, run_id: str, specs: Sequence[TableSpec], repair: Repair,
                  waiting: Waiting) -> Iterator[RepairResult]:
    """Repair each of ``specs``: here with ``repair`` when its lock is free, else by the follow
    holding it; one table's failure is its result, the others go on."""
    for spec in specs:
        yield _repair(config, run_id, spec, repair, waiting)


def _repair(config: ProjectConfig, run_id: str, spec: TableSpec, repair: Repair, waiting: Waiting) -> RepairResult:
    requests = requests_of(config)
    request: Request | None = None
    try:
        deadline = time.monotonic() + waiting.wait_s
        while True:
            if request is not None and (answer := requests.answer_to(request)) is not None:
                request = None  # answered: nothing left to take back
                return RepairResult.from_dict(answer)
            try:
                with table_locks(locks_folder(config), [spec.name], KIND):
                    if request is not None:  # the follow stopped without answering: done here
                        requests.forget(request)
                        request = None
                        log.info("%s: the follow stopped before repairing it; repairing it here", spec.name)
                    return repair(spec, run_id)
            except TableBusy as busy:
                if busy.command not in ("follow", UNKNOWN_HOLDER):
                    return RepairResult(spec.name, RunStatus.ERROR, message=str(busy), category=busy.category)
                if time.monotonic() >= deadline:
                    return _gave_up(requests, request, busy, waiting.wait_s)
                if request is None and busy.command == "follow":
                    request = requests.ask(spec.name, KIND, run_id)
                    log.info("%s: followed by run pid %s; asked it to repair the table between two cycles "
                             "(waiting at most %.0f s)", spec.name, busy.pid, waiting.wait_s)
                # UNKNOWN_HOLDER: the holder took the lock and is about to name itself; look again.
            time.sleep(waiting.poll_s)
    finally:
        if request is not None:  # never leave a request for a later follow to serve for nobody
            requests.withdraw(request)


def _gave_up(requests: Requests, request: Request | None, busy: TableBusy, wait_s: float) -> RepairResult:
    started = request is not None and not requests.withdraw(request)
    doing = ("is still repairing it; its outcome will be in target/lakehouse.log" if started else
             "did not start the repair (a long cycle?); run `make repair` again later, or stop the follow first")
    return RepairResult(busy.table or "?", RunStatus.ERROR, category="configuration", message=(
        f"table {busy.table}: no answer within {wait_s:.0f} s from the follow holding it "
        f"(pid {busy.pid}), which {doing}"))
