"""A resting Spark session: stopped on request only when it can start again, started again at
its next use with the process's own Ctrl-C handler kept, and idle time counted from its last use."""

from __future__ import annotations

import signal
import time
from types import SimpleNamespace

from lakehouse_engine.sink.resting import RestingSpark


class FakeSession:
    """What a rest touches: Delta's log cache through the JVM view, and ``stop``."""

    def __init__(self) -> None:
        self.events: list[str] = []
        delta = SimpleNamespace(DeltaLog=SimpleNamespace(clearCache=lambda: self.events.append("clear cache")))
        self._jvm = SimpleNamespace(org=SimpleNamespace(apache=SimpleNamespace(spark=SimpleNamespace(
            sql=SimpleNamespace(delta=delta)))))

    def stop(self) -> None:
        self.events.append("stop")


def test_a_session_without_a_way_to_start_again_never_rests():
    session = FakeSession()
    handle = RestingSpark(session)  # type: ignore[arg-type]
    assert not handle.rest() and not handle.unused_for(0.0)
    assert handle.session is session and session.events == []


def test_a_rest_clears_deltas_log_cache_stops_the_context_and_the_next_use_starts_a_new_one():
    first, second = FakeSession(), FakeSession()
    started: list[FakeSession] = []

    def restart() -> FakeSession:
        started.append(second)
        return second

    handle = RestingSpark(first, restart)  # type: ignore[arg-type]
    assert handle.rest() and handle.resting
    assert first.events == ["clear cache", "stop"] and started == []
    assert handle.rest()  # resting already: nothing more to stop
    assert first.events == ["clear cache", "stop"]
    assert handle.session is second and handle.session is second and started == [second]
    assert not handle.resting


def test_a_restart_keeps_the_processs_own_ctrl_c_handler():
    def ours(signum, frame) -> None:
        pass

    def restart() -> FakeSession:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a new SparkContext does
        return FakeSession()

    before = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, ours)
        handle = RestingSpark(FakeSession(), restart)  # type: ignore[arg-type]
        handle.rest()
        assert handle.session is not None  # started again
        assert signal.getsignal(signal.SIGINT) is ours
    finally:
        signal.signal(signal.SIGINT, before)


def test_idle_time_counts_from_the_last_use_and_a_resting_session_is_not_idle():
    handle = RestingSpark(FakeSession(), FakeSession)  # type: ignore[arg-type]
    time.sleep(0.05)
    assert handle.unused_for(0.05)
    handle.used()
    assert not handle.unused_for(0.05)
    time.sleep(0.05)
    assert handle.session is not None  # a use
    assert not handle.unused_for(0.05)
    handle.rest()
    assert not handle.unused_for(0.0)
