"""Freshness: how long ago silver last held every change the source had committed.

A table is fresh when silver has read up to the source's head (lag 0, however long ago its last
change was), otherwise its lag is the time since ``synced_at``: the moment its position was last
the source's head. The check fails above the table's ``max_lag_seconds``, and when the lag
cannot be known (no catch-up has reached the head since the snapshot, or a checkpoint older
than ``synced_at``): a check that cannot tell must not pass.
"""

from __future__ import annotations

from ..state.positions import BinlogPosition
from .checks import CheckOutcome


def freshness_check(position: BinlogPosition, synced_at: float | None, head: BinlogPosition, checked_at: float,
                    max_lag_s: float) -> CheckOutcome:
    """``position``/``synced_at``: silver's applied checkpoint; ``head``: the source's position
    read at ``checked_at`` (Unix time)."""
    name = f"silver_lag_at_most({max_lag_s:g} s)"
    if position >= head:
        return CheckOutcome(name, True, f"lag 0 s: silver is at the source's head {head}")
    if synced_at is None:
        return CheckOutcome(name, False, f"lag unknown: silver at {position}, the source at {head}, and no "
                                         "catch-up has reached the head since; run `make ingest`")
    lag = max(0.0, checked_at - synced_at)
    return CheckOutcome(name, lag <= max_lag_s, f"lag {lag:.0f} s (silver at {position}, the source at {head})")
