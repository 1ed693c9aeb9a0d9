"""The snapshot's progress line estimates the time left at the pace so far."""

from __future__ import annotations

from lakehouse_engine.run.snapshots import eta


def test_eta_extrapolates_the_pace_of_the_chunks_read_in_this_run():
    assert eta(done=4, left=12, elapsed_s=20.0) == ", ETA 1 min"
    assert eta(done=3, left=1, elapsed_s=10.0) == ", ETA 3 s"
    assert eta(done=1, left=1000, elapsed_s=5.0) == ", ETA 1 h 23 min 20 s"


def test_no_eta_without_a_pace_or_with_nothing_left():
    assert eta(done=0, left=10, elapsed_s=3.0) == ""
    assert eta(done=5, left=0, elapsed_s=3.0) == ""
    assert eta(done=5, left=1, elapsed_s=0.1) == ", ETA 0 s"
