"""Freshness: how long ago silver last held every change the source had committed.

A table is fresh when silver has read up to the source's head (lag 0, however long ago its last
change was), otherwise its lag is the time since ``synced_at``: the moment its position was last
the source's head. The check fails above the table's ``max_lag_seconds``, and when the lag
cannot be known (no catch-up has reached the head since the snapshot, or a checkpoint older
than ``synced_at``): a check that cannot tell must not pass.

The measurement (``measure_lag``) and the verdict (``lag_verdict``) are apart: ``dq`` measures,
and the Great Expectations expectation holding the threshold decides (``expectations``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..state import followstate
from ..state.holders import LOCKS_FOLDER, holder
from ..state.positions import BinlogPosition


@dataclass(frozen=True)
class LagMeasurement:
    """Silver's position, the source's head read at ``checked_at``, and the lag there (None:
    unknown; 0 when silver is at the head)."""

    position: BinlogPosition
    head: BinlogPosition
    lag_seconds: float | None

    def as_parameter(self) -> dict[str, Any]:
        return {"silver_at": str(self.position), "head": str(self.head), "lag_seconds": self.lag_seconds}

    @classmethod
    def from_parameter(cls, value: dict[str, Any]) -> LagMeasurement:
        lag = value.get("lag_seconds")
        return cls(BinlogPosition.parse(value["silver_at"]), BinlogPosition.parse(value["head"]),
                   None if lag is None else float(lag))


def measure_lag(position: BinlogPosition, synced_at: float | None, head: BinlogPosition,
                checked_at: float) -> LagMeasurement:
    """``position``/``synced_at``: silver's applied checkpoint; ``head``: the source's position
    read at ``checked_at`` (Unix time)."""
    if position >= head:
        return LagMeasurement(position, head, 0.0)
    return LagMeasurement(position, head, None if synced_at is None else max(0.0, checked_at - synced_at))


def lag_verdict(measured: LagMeasurement, max_lag_s: float) -> tuple[bool, str]:
    """Whether ``measured`` passes under ``max_lag_s``, and the observed value to show."""
    if measured.position >= measured.head:
        return True, f"lag 0 s: silver is at the source's head {measured.head}"
    if measured.lag_seconds is None:
        return False, (f"lag unknown: silver at {measured.position}, the source at {measured.head}, and no "
                       "catch-up has reached the head since; run `make ingest`")
    return (measured.lag_seconds <= max_lag_s,
            f"lag {measured.lag_seconds:.0f} s (silver at {measured.position}, the source at {measured.head})")


def silver_lag(target_dir: Path, table: str, position: BinlogPosition, synced_at: float | None,
               head: BinlogPosition, checked_at: float) -> LagMeasurement:
    """Silver's lag, from its checkpoint (``position``, ``synced_at``) or, while a follow runs the
    table, from how far that follow has read it (an idle table's advance is committed only every
    few minutes)."""
    running = holder(target_dir / LOCKS_FOLDER, table)
    ahead = followstate.read(target_dir, table, running[0] if running is not None and running[1] == "follow" else None)
    if ahead is not None and ahead.position > position:
        return measure_lag(ahead.position, ahead.at, head, checked_at)
    return measure_lag(position, synced_at, head, checked_at)
