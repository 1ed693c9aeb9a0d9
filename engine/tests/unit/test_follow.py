"""The follow loop against a scripted pipeline and source: idle cycles skip the pipeline, a failed
table is dropped, a source that does not answer is retried, a stop request ends the loop."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Sequence

import pytest

from lakehouse_engine.cdc.capture import RetryPolicy
from lakehouse_engine.errors import ConfigError, FatalError, IngestError, SourceUnavailableError
from lakehouse_engine.run.follow import Follower, FollowOptions
from lakehouse_engine.run.newtables import NewTables
from lakehouse_engine.run.pipeline import TablesFailed
from lakehouse_engine.run.results import TableResult
from lakehouse_engine.run.stopping import stop_requests
from lakehouse_engine.state.positions import BinlogPosition
from lakehouse_engine.tables import TableSpec


def at(offset: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000001", offset)


class FakeSource:
    """The source's binlog head, moved by the test; ``down`` makes every call fail."""

    def __init__(self, head: int = 100):
        self.head = at(head)
        self.down = 0  # calls left that fail

    def _answer(self) -> None:
        if self.down:
            self.down -= 1
            raise SourceUnavailableError("cannot reach the source at 127.0.0.1:1")

    def call(self, work: Callable[[None], object]) -> object:
        self._answer()
        return work(None)

    def position(self) -> BinlogPosition:
        self._answer()
        return self.head

    def bytes_behind(self, position: BinlogPosition) -> int:
        return max(self.head.offset - position.offset, 0)

    def check(self) -> None:
        self._answer()

    def close(self) -> None:
        pass


class FakePipeline:
    """Catches every table up to the source's head; ``fail`` maps tables to their next error."""

    def __init__(self, source: FakeSource):
        self.source = source
        self.retry = RetryPolicy(attempts=3, first_backoff_s=0.0)
        self.positions: dict[str, BinlogPosition] = {}  # where each table's catch-up read to
        self.last_transaction: BinlogPosition | None = None  # set: resume positions stay there
        self.fail: dict[str, IngestError] = {}
        self.copied: set[str] = set()  # snapshot-only tables whose copy is over
        self.calls: list[list[str]] = []
        self.held: list[frozenset[str]] = []  # each call's hold_idle
        self.on_ingest: Callable[[], None] = lambda: None
        self.used_at = time.monotonic()  # Spark's last use, as ``RestingSpark`` keeps it
        self.resting = False
        self.rests = 0

    def unused_for(self, seconds: float) -> bool:
        return not self.resting and time.monotonic() - self.used_at >= seconds

    def rest(self) -> bool:
        self.resting, self.rests = True, self.rests + 1
        return True

    def ingest(self, specs: Sequence[TableSpec], *, conn=None, hold_idle=frozenset()) -> list[TableResult]:
        self.resting, self.used_at = False, time.monotonic()  # an ingest starts Spark again
        self.calls.append([s.name for s in specs])
        self.held.append(frozenset(hold_idle))
        stop = self.source.head  # like a real run: the position current at its start
        self.on_ingest()
        results, errors = [], {}
        for spec in specs:
            error = self.fail.pop(spec.name, None)
            if error is not None:
                results.append(TableResult(spec.name, "error", message=str(error), category=error.category))
                errors[spec.name] = error
                self.positions.pop(spec.name, None)
            else:
                results.append(TableResult(spec.name, binlog_rows=1, copied=spec.name in self.copied))
                self.positions[spec.name] = stop
        if errors:
            raise TablesFailed(results, errors)
        return results

    def resume_position(self, table: str) -> BinlogPosition | None:
        read = self.positions.get(table)
        return read if read is None or self.last_transaction is None else min(read, self.last_transaction)

    def read_to(self, table: str) -> BinlogPosition | None:
        return self.positions.get(table)


def specs(*names: str) -> list[TableSpec]:
    return [TableSpec(n, n) for n in names]


def follow(pipeline: FakePipeline, source: FakeSource, names=("a", "b"), **options):
    stop = threading.Event()
    merged = {"interval_s": 0.0, **options}
    return Follower(pipeline, specs(*names), source, stop, FollowOptions(**merged)).run()


def test_cycles_run_the_pipeline_only_when_the_binlog_moved():
    source = FakeSource()
    pipeline = FakePipeline(source)
    outcome = follow(pipeline, source, max_cycles=5)
    assert pipeline.calls == [["a", "b"]]  # the first cycle; then nothing moved
    assert (outcome.cycles, outcome.idle_cycles) == (5, 4)
    assert [r.status for r in outcome.results] == ["success", "success"]


def test_a_rotation_with_nothing_after_it_leaves_the_loop_idle_after_one_catch_up():
    # The last transaction ends in the old file; the head is past the new file's header events.
    source = FakeSource()
    source.head = BinlogPosition("mysql-bin.000002", 385)
    pipeline = FakePipeline(source)
    pipeline.last_transaction = BinlogPosition("mysql-bin.000001", 900)

    outcome = follow(pipeline, source, max_cycles=5)

    assert len(pipeline.calls) == 1 and outcome.idle_cycles == 4


def test_a_moved_binlog_runs_the_next_cycle():
    source = FakeSource()
    pipeline = FakePipeline(source)

    def move_once() -> None:
        if len(pipeline.calls) == 1:
            source.head = at(200)  # a change while the first cycle runs

    pipeline.on_ingest = move_once
    outcome = follow(pipeline, source, max_cycles=4)
    assert len(pipeline.calls) == 2 and outcome.idle_cycles == 2
    assert outcome.rows == 4


def move_head(source: FakeSource) -> Callable[[], None]:
    def move() -> None:
        source.head = at(source.head.offset + 100)
    return move


def test_idle_advances_are_held_until_idle_commit_seconds_pass_without_a_commit():
    source = FakeSource()
    pipeline = FakePipeline(source)
    pipeline.on_ingest = move_head(source)
    follow(pipeline, source, max_cycles=3)
    assert pipeline.held == [frozenset({"a", "b"})] * 3

    pipeline = FakePipeline(source)
    pipeline.on_ingest = move_head(source)
    follow(pipeline, source, max_cycles=3, idle_commit_s=0.0)
    assert pipeline.held == [frozenset()] * 3


def test_a_table_whose_resume_position_stays_put_stops_being_held():
    source = FakeSource()
    pipeline = FakePipeline(source)
    pipeline.on_ingest = move_head(source)
    pipeline.last_transaction = at(150)  # "a" and "b" never commit past it
    follow(pipeline, source, max_cycles=4, idle_commit_s=0.05, interval_s=0.03)
    # First cycle: held since the loop started; its position then stays, and 0.05 s later the
    # tables must commit it.
    assert pipeline.held[0] == frozenset({"a", "b"})
    assert pipeline.held[-1] == frozenset()


def test_spark_rests_once_no_cycle_used_it_for_its_seconds_after_idle_positions_are_committed(caplog):
    source = FakeSource()
    pipeline = FakePipeline(source)
    pipeline.last_transaction = at(50)  # the tables hold their advance past it in memory
    with caplog.at_level("INFO", logger="lakehouse_engine.run.follow"):
        follow(pipeline, source, spark_rest_s=0.1, interval_s=0.01, max_seconds=0.5)
    # The first cycle, then the held positions committed before the one rest; idle cycles on.
    assert pipeline.calls == [["a", "b"], ["a", "b"]] and pipeline.held[1] == frozenset()
    assert pipeline.rests == 1 and pipeline.resting
    lines = [r.getMessage() for r in caplog.records]
    assert lines.index("follow: saved the positions of a, b before Spark rests") < \
        next(i for i, line in enumerate(lines) if "Spark's context stopped until the next change" in line)


def test_spark_does_not_rest_before_its_seconds_nor_when_resting_is_off():
    source = FakeSource()
    pipeline = FakePipeline(source)
    follow(pipeline, source, spark_rest_s=60.0, interval_s=0.01, max_seconds=0.2)
    follow(pipeline, source, spark_rest_s=None, interval_s=0.01, max_seconds=0.2)
    assert pipeline.rests == 0


def test_a_change_after_spark_rested_is_ingested_and_spark_rests_again_later():
    pipeline: FakePipeline

    class ChangedOnceRested(FakeSource):
        def position(self) -> BinlogPosition:
            if pipeline.rests == 1 and len(pipeline.calls) == 1:
                self.head = at(300)
            return super().position()

    source = ChangedOnceRested()
    pipeline = FakePipeline(source)
    follow(pipeline, source, names=("a",), interval_s=0.01, spark_rest_s=0.1, max_seconds=0.8)
    assert pipeline.calls == [["a"], ["a"]] and pipeline.positions["a"] == at(300)
    assert pipeline.rests == 2


class ScriptedWait:
    """An idle wait that returns at once, saying whether the source wrote nothing meanwhile."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def wait(self, head, stop, interval_s, budget_s) -> bool:
        return self.quiet

    def release(self) -> None:
        pass


class CountingSource(FakeSource):
    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def position(self) -> BinlogPosition:
        self.asked += 1
        return super().position()


@pytest.mark.parametrize(("quiet", "asked"), [(True, 2), (False, 5)])  # 2: the first two cycles
def test_an_idle_wait_that_saw_no_write_spares_the_next_cycle_its_question_for_the_head(quiet, asked):
    source = CountingSource()
    pipeline = FakePipeline(source)
    outcome = Follower(pipeline, specs("a"), source, threading.Event(), FollowOptions(interval_s=0.0, max_cycles=5),
                       idle_wait=ScriptedWait(quiet)).run()  # type: ignore[arg-type]
    assert outcome.idle_cycles == 4 and source.asked == asked


def table_b_failing_while_the_binlog_moves() -> tuple[FakeSource, FakePipeline]:
    """Table b fails at its first cycle; the binlog moves during every ingest."""
    source = FakeSource()
    pipeline = FakePipeline(source)
    pipeline.fail["b"] = FatalError("table b: schema change", table="b")

    def keep_moving() -> None:
        source.head = at(source.head.offset + 10)

    pipeline.on_ingest = keep_moving
    return source, pipeline


def test_a_failed_table_is_dropped_and_the_others_are_followed():
    source, pipeline = table_b_failing_while_the_binlog_moves()
    outcome = follow(pipeline, source, max_cycles=3)
    assert pipeline.calls == [["a", "b"], ["a"], ["a"]]
    assert [(r.table, r.status) for r in outcome.failed] == [("b", "error")]


def test_the_idle_line_measures_the_lag_from_where_the_tables_are_read_not_their_held_commits(caplog):
    source = FakeSource(head=400)
    pipeline = FakePipeline(source)
    pipeline.last_transaction = at(150)  # idle tables hold their advance past it in memory
    with caplog.at_level("INFO", logger="lakehouse_engine.run.follow"):
        follow(pipeline, source, max_cycles=3, heartbeat_s=0.0)
    idle_lines = [r.getMessage() for r in caplog.records if "no new rows" in r.getMessage()]
    assert idle_lines and all(line.endswith("at mysql-bin.000001:400 (lag 0 bytes)") for line in idle_lines), idle_lines


def test_a_snapshot_only_table_is_no_longer_followed_once_copied_and_the_loop_ends_without_an_error(caplog):
    source = FakeSource()
    pipeline = FakePipeline(source)
    pipeline.copied = {"a"}
    pipeline.on_ingest = move_head(source)
    outcome = follow(pipeline, source, max_cycles=3)
    assert pipeline.calls == [["a", "b"], ["b"], ["b"]]
    assert not outcome.failed

    pipeline = FakePipeline(source)
    pipeline.copied = {"a", "b"}
    outcome = follow(pipeline, source, max_cycles=5)
    assert outcome.cycles == 1 and not outcome.failed
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_the_loop_ends_when_every_table_failed():
    source = FakeSource()
    pipeline = FakePipeline(source)
    pipeline.fail["a"] = FatalError("table a: broken", table="a")
    outcome = follow(pipeline, source, names=("a",), max_cycles=10)
    assert outcome.cycles == 1 and len(outcome.failed) == 1


def test_an_unreachable_source_is_retried_then_ends_the_run():
    source = FakeSource()
    pipeline = FakePipeline(source)
    source.down = 2  # fewer failures than attempts: followed on
    outcome = follow(pipeline, source, max_cycles=4)
    assert outcome.cycles == 4 and not outcome.failed

    source.down = 100
    with pytest.raises(SourceUnavailableError, match="cannot reach the source"):
        follow(FakePipeline(source), source, max_cycles=10)


def test_tables_failing_while_the_source_is_down_are_not_dropped():
    source = FakeSource()
    pipeline = FakePipeline(source)
    pipeline.fail["b"] = FatalError("table b: OperationalError: lost connection", table="b")

    def go_down_once() -> None:
        if len(pipeline.calls) == 1:
            source.down = 1  # the check after the failed cycle finds the source gone
            source.head = at(150)

    pipeline.on_ingest = go_down_once
    follow(pipeline, source, max_cycles=3)
    assert pipeline.calls[1] == ["a", "b"], pipeline.calls


def test_a_stop_request_ends_the_loop_after_the_current_cycle():
    source = FakeSource()
    pipeline = FakePipeline(source)
    stop = threading.Event()
    pipeline.on_ingest = stop.set  # requested while the first cycle runs
    outcome = Follower(pipeline, specs("a"), source, stop, FollowOptions(interval_s=60.0)).run()
    assert outcome.cycles == 1 and outcome.results[0].status == "success"


def test_max_seconds_ends_an_idle_loop():
    source = FakeSource()
    outcome = follow(FakePipeline(source), source, interval_s=0.01, max_seconds=0.2)
    assert outcome.cycles >= 2 and outcome.idle_cycles == outcome.cycles - 1


def test_sigterm_and_a_first_ctrl_c_request_a_stop_a_second_ctrl_c_interrupts():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with stop_requests() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(5)
    with stop_requests() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.wait(5)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            stop.wait(5)  # the handler raises in the main thread, here at the latest
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_a_table_added_while_following_joins_the_next_cycle_and_the_others_keep_going():
    source = FakeSource()
    pipeline = FakePipeline(source)
    project = {"a": TableSpec("a", "a")}
    pipeline.on_ingest = move_head(source)

    def add_c_after_the_first_cycle() -> list[TableSpec]:
        if len(pipeline.calls) >= 1:
            project["c"] = TableSpec("c", "c")
        return list(project.values())

    claimed: list[str] = []
    discover = NewTables(add_c_after_the_first_cycle, lambda spec: claimed.append(spec.name))
    outcome = Follower(pipeline, specs("a"), source, threading.Event(),
                       FollowOptions(interval_s=0.0, discover_s=0.0, max_cycles=3), discover=discover).run()
    assert pipeline.calls == [["a"], ["a", "c"], ["a", "c"]]
    assert claimed == ["c"]  # locked once, before its first cycle
    assert [(r.table, r.status) for r in outcome.results] == [("a", "success"), ("c", "success")]


def test_a_new_table_held_by_another_run_or_a_broken_module_leaves_the_followed_tables_alone(caplog):
    source = FakeSource()
    pipeline = FakePipeline(source)
    pipeline.on_ingest = move_head(source)
    attempts: list[str] = []

    def busy(spec: TableSpec) -> None:
        attempts.append(spec.name)
        raise ConfigError(f"table {spec.name} is being ingested by another run (pid 1, ingest)")

    held = NewTables(lambda: specs("a", "c"), busy)
    Follower(pipeline, specs("a"), source, threading.Event(),
             FollowOptions(interval_s=0.0, discover_s=0.0, max_cycles=3), discover=held).run()
    assert pipeline.calls == [["a"]] * 3 and attempts == ["c"] * 3  # tried again each time

    def broken() -> list[TableSpec]:
        raise ConfigError("table module tables/c.py has a syntax error at line 3")

    caplog.clear()
    Follower(pipeline, specs("a"), source, threading.Event(),
             FollowOptions(interval_s=0.0, discover_s=0.0, max_cycles=3),
             discover=NewTables(broken, attempts.append)).run()
    reported = [r.getMessage() for r in caplog.records if "syntax error" in r.getMessage()]
    assert len(reported) == 1 and "following the same tables" in reported[0]  # said once, not each time
    assert pipeline.calls[-3:] == [["a"]] * 3


def test_how_far_each_table_is_read_is_published_for_status_and_dq(tmp_path):
    import json
    import os

    from lakehouse_engine.state import followstate

    source = FakeSource()
    pipeline = FakePipeline(source)
    before = time.time()
    Follower(pipeline, specs("a", "b"), source, threading.Event(), FollowOptions(interval_s=0.0, max_cycles=3),
             publish_to=tmp_path).run()
    body = json.loads((tmp_path / followstate.FILE_NAME).read_text())
    assert body["pid"] == os.getpid() and body["tables"] == {"a": str(source.head), "b": str(source.head)}
    assert before <= body["at"] <= time.time()  # the cycle's start: the head was at most there then
