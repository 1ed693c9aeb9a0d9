"""A running follow refreshes its samples in the metrics textfile: a heartbeat, each table's up
and last success, its lag since it last read up to the source's head, and rows since the start."""

from __future__ import annotations

import threading
import time

from lakehouse_engine.run.follow import Follower, FollowOptions
from lakehouse_engine.run.livemetrics import LiveMetrics
from lakehouse_engine.run.results import TableResult
from lakehouse_engine.telemetry.metrics import _read

from .test_follow import FakePipeline, FakeSource, specs, table_b_failing_while_the_binlog_moves


def _values(path) -> dict[tuple[str, tuple], float]:
    return {(s.name, s.labels): s.value for s in _read(path)}


def test_a_followed_table_reports_its_lag_rows_and_last_success_and_a_failed_one_is_down(tmp_path):
    source, pipeline = table_b_failing_while_the_binlog_moves()
    textfile = tmp_path / "lakehouse.prom"
    textfile.write_text('lakehouse_table_up{command="dq",table="a"} 1\n')  # another command's sample stays
    before = time.time()
    Follower(pipeline, specs("a", "b"), source, threading.Event(), FollowOptions(interval_s=0.0, max_cycles=3),
             metrics=LiveMetrics(textfile, every_s=0.0)).run()

    values = _values(textfile)
    follow_a, follow_b = (("command", "follow"), ("table", "a")), (("command", "follow"), ("table", "b"))
    assert values[("lakehouse_table_up", follow_a)] == 1.0 and values[("lakehouse_table_up", follow_b)] == 0.0
    assert values[("lakehouse_table_up", (("command", "dq"), ("table", "a")))] == 1.0
    assert before <= values[("lakehouse_heartbeat_timestamp_seconds", (("command", "follow"),))] <= time.time()
    assert before <= values[("lakehouse_table_last_success_timestamp_seconds", follow_a)] <= time.time()
    assert ("lakehouse_table_last_success_timestamp_seconds", follow_b) not in values
    # Each cycle read a up to the head as of the cycle's start: its lag is that cycle's age.
    assert 0.0 <= values[("lakehouse_table_lag_seconds", (("table", "a"),))] < 5.0
    assert values[("lakehouse_follow_rows_total", (("table", "a"), ("kind", "binlog")))] == 3.0
    assert "# TYPE lakehouse_follow_rows_total counter" in textfile.read_text()


def test_lag_counts_from_the_last_cycle_that_reached_the_head_and_before_that_from_the_start():
    metrics = LiveMetrics(path=None, every_s=0.0, started_at=90.0)  # type: ignore[arg-type]  (samples only)
    metrics.cycle(100.0, [TableResult("a", binlog_rows=5), TableResult("b", binlog_rows=2)], caught_up=["a"])
    metrics.cycle(130.0, [TableResult("b", binlog_rows=1)], caught_up=[])  # b still behind
    samples = {(s.name, s.labels): s.value for s in metrics.samples({"a": True, "b": True}, now=160.0)}
    assert samples[("lakehouse_table_lag_seconds", (("table", "a"),))] == 60.0  # last at the head at 100
    assert samples[("lakehouse_table_lag_seconds", (("table", "b"),))] == 70.0  # behind since the start, at least
    assert samples[("lakehouse_follow_rows_total", (("table", "b"), ("kind", "binlog")))] == 3.0
    assert samples[("lakehouse_table_last_success_timestamp_seconds",
                    (("command", "follow"), ("table", "b")))] == 130.0


def test_samples_are_written_at_most_every_interval_and_an_unwritable_file_warns_once(tmp_path, caplog):
    textfile = tmp_path / "m.prom"
    metrics = LiveMetrics(textfile, every_s=3600.0)
    metrics.publish({"a": True}, now=1.0)
    first = textfile.read_text()
    metrics.publish({"a": False}, now=2.0)
    assert textfile.read_text() == first  # within the interval: not rewritten

    (tmp_path / "a-file").write_text("")
    blocked = LiveMetrics(tmp_path / "a-file" / "m.prom", every_s=0.0)  # its folder is a file
    blocked.publish({"a": True})
    blocked.publish({"a": True})
    assert sum("could not be written" in r.getMessage() for r in caplog.records) == 1


def test_follow_refreshes_the_projects_textfile_only_when_the_project_keeps_one(tmp_path):
    from types import SimpleNamespace

    from lakehouse_engine.run.commands.follow import _live_metrics

    def ctx(textfile: str):
        return SimpleNamespace(config=SimpleNamespace(root=tmp_path,
                                                      telemetry=SimpleNamespace(metrics_textfile=textfile)))

    assert _live_metrics(ctx("")) is None
    live = _live_metrics(ctx("target/lakehouse.prom"))
    assert live is not None
    live.publish({"a": True})
    assert (tmp_path / "target" / "lakehouse.prom").exists()


def test_a_failed_cycle_does_not_count_as_a_success_even_at_the_head():
    metrics = LiveMetrics(path=None, every_s=0.0, started_at=0.0)  # type: ignore[arg-type]
    metrics.cycle(10.0, [TableResult("a", status="error")], caught_up=["a"])
    samples = {(s.name, s.labels) for s in metrics.samples({"a": False}, now=20.0)}
    assert ("lakehouse_table_last_success_timestamp_seconds", (("command", "follow"), ("table", "a"))) not in samples


def test_a_copied_snapshot_only_table_is_up_not_down(tmp_path):
    source = FakeSource()
    pipeline = FakePipeline(source)
    pipeline.copied = {"b"}
    textfile = tmp_path / "lakehouse.prom"
    Follower(pipeline, specs("a", "b"), source, threading.Event(), FollowOptions(interval_s=0.0, max_cycles=3),
             metrics=LiveMetrics(textfile, every_s=0.0)).run()
    values = _values(textfile)
    assert values[("lakehouse_table_up", (("command", "follow"), ("table", "b")))] == 1.0

