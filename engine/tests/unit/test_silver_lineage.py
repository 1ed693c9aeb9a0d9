"""Silver's marker against bronze's checkpoints: when silver's state cannot be placed in bronze's
changelog, the table stops with the command that repairs it."""

from __future__ import annotations

import pytest

from lakehouse_engine.errors import FatalError
from lakehouse_engine.sink.silverlineage import Commit, Lineage


def lineage(newest: int, done_run: str | None, generation: int | None = 0) -> Lineage:
    return Lineage(newest=newest, run="run-new", generation=generation, chunks_read=True, done_run=done_run)


def test_silver_in_step_with_bronze_goes_on():
    lineage(8, "run-1").check({"bronze_batch": 7, "bronze_run": "run-1"}, "orders")
    lineage(7, "run-1").check({"bronze_batch": 7, "bronze_run": "run-1"}, "orders")


def test_a_marker_written_before_runs_were_recorded_is_checked_by_its_batch_only():
    lineage(7, "run-1").check({"bronze_batch": 7}, "orders")
    with pytest.raises(FatalError, match="bronze's newest batch is 6"):
        lineage(6, None).check({"bronze_batch": 7}, "orders")


def test_a_batch_number_bronze_no_longer_has_stops_the_table_with_the_rebuild_command():
    with pytest.raises(FatalError) as stopped:
        lineage(6, None).check({"bronze_batch": 7, "bronze_run": "run-1"}, "orders")
    assert str(stopped.value) == (
        "table orders: silver has merged bronze batch 7, but bronze's newest batch is 6: bronze lost commits "
        "(its _delta_log was edited or restored from an older copy); make silver anew from bronze with "
        "`make rebuild TABLE=orders`, then ingest again")


def test_a_batch_number_another_run_took_again_stops_the_table():
    with pytest.raises(FatalError, match="bronze's batch 7 is another run's"):
        lineage(7, "run-2").check({"bronze_batch": 7, "bronze_run": "run-1"}, "orders")


def test_silver_of_another_generation_is_left_to_the_refresh_not_checked_by_batch():
    lineage(3, "run-2", generation=2).check({"bronze_batch": 7, "bronze_run": "run-1"}, "orders")


def test_the_marker_names_the_run_and_a_refresh_generation():
    assert Commit("silver:t", 5, "t").marker == '{"bronze_batch": 5}'
    marker = Commit("silver:t", 5, "t", "run-3", 4).marker
    assert marker == '{"bronze_batch": 5, "bronze_run": "run-3", "generation": 4}'
