"""Tables added to the project while ``follow`` runs: the table modules read again and selected
as at the start, each new one claimed (its ingest lock taken) before the loop snapshots it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence

from ..errors import IngestError
from ..tables import TableSpec

log = logging.getLogger("lakehouse_engine.run.follow")  # its lines are the follow's


class NewTables:
    """The loop's ``discover``: the project's table modules read again and selected as at the
    start. Each new table is claimed first (``claim`` takes its ingest lock and raises when
    another run holds it; it is then tried again next time). A problem is logged once."""

    def __init__(self, select: Callable[[], Sequence[TableSpec]], claim: Callable[[TableSpec], None]):
        self._select = select
        self._claim = claim
        self._reported: set[str] = set()

    def __call__(self, known: Collection[str]) -> list[TableSpec]:
        try:
            specs = self._select()
        except IngestError as exc:
            self._report(f"table modules not read again ({exc}); following the same tables")
            return []
        added = []
        for spec in specs:
            if spec.name in known:
                continue
            try:
                self._claim(spec)
            except (IngestError, OSError) as exc:
                self._report(f"table {spec.name} is not followed yet: {exc}")
                continue
            added.append(spec)
        return added

    def _report(self, problem: str) -> None:
        if problem not in self._reported:
            self._reported.add(problem)
            log.warning("follow: %s", problem)
