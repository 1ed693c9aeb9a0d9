"""An idle follow waits on the real binlog stream: it wakes when the source writes, not on a
poll, and it neither queries nor spins while nothing happens."""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import replace

import pytest

from lakehouse_engine.cdc.headwatch import HeadWatch
from lakehouse_engine.run.follow import Follower, FollowOptions, SourceLink
from lakehouse_engine.run.idlewait import IdleWait
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.source.connection import connection, current_position
from lakehouse_engine.tables import TableSpec

from .helpers import run_source_sql, silver_rows, source_rows

pytestmark = pytest.mark.integration

SERVER_ID = 5498


def _head(config):
    with connection(config.source) as conn:
        return current_position(conn)


def _write_later(mariadb, db: str, sql: str, after_s: float) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(after_s), run_source_sql(mariadb, db, sql)))
    thread.start()
    return thread


def test_a_wait_ends_at_its_deadline_and_at_a_signal_without_a_heartbeat_and_says_what_it_heard(config):
    # The server's first heartbeat would come after 60 s: the wait must not depend on one.
    watch = HeadWatch(config.source, SERVER_ID, heartbeat_s=60.0)
    never = threading.Event()
    started = time.monotonic()
    assert watch.wait_past(_head(config), started + 1.0, never) is False
    assert time.monotonic() - started < 30
    assert watch.heard  # the dump's opening events: the server answered from the head
    # A stop request by signal (SIGTERM's or Ctrl-C's handler sets the flag) ends it at once.
    stop = threading.Event()
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: stop.set())
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        started = time.monotonic()
        assert watch.wait_past(_head(config), started + 120, stop) is False
        assert time.monotonic() - started < 30
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert signal.set_wakeup_fd(-1) == -1  # the wait's wakeup fd is gone with it


def test_the_watch_wakes_at_a_write_waits_out_its_deadline_without_one_and_stops_on_request(config, mariadb):
    watch = HeadWatch(config.source, SERVER_ID, heartbeat_s=0.2)
    never = threading.Event()
    head = _head(config)
    # Nothing written: the wait lasts until its deadline, through several heartbeats.
    started = time.monotonic()
    assert watch.wait_past(head, started + 1.0, never) is False
    assert time.monotonic() - started >= 1.0
    # A write ends the next wait from the same head.
    writer = _write_later(mariadb, config.source.database, "UPDATE products SET price = 3 ORDER BY sku LIMIT 1",
                          0.3)
    assert watch.wait_past(head, time.monotonic() + 60, never) is True
    writer.join()
    # From a head already passed, the wait ends at once (the dump replays what it missed).
    assert watch.wait_past(head, time.monotonic() + 60, never) is True
    # A stop request ends the wait within a heartbeat, long before its deadline.
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    started = time.monotonic()
    assert watch.wait_past(_head(config), started + 60, stop) is False
    assert time.monotonic() - started < 30


def _dumps(config) -> list[int]:
    """The ids of the source's binlog dump connections (the user sees its own)."""
    with connection(config.source) as conn, conn.cursor() as cur:
        cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%' ORDER BY ID")
        return [row[0] for row in cur.fetchall()]


def test_a_held_dump_serves_the_next_idle_wait_is_opened_again_once_dropped_and_closed_at_a_change(config, mariadb):
    watch = HeadWatch(config.source, SERVER_ID, heartbeat_s=0.2, hold=True)
    never = threading.Event()
    head = _head(config)
    assert _dumps(config) == []
    assert watch.wait_past(head, time.monotonic() + 0.5, never) is False
    held = _dumps(config)
    assert len(held) == 1  # kept for the next wait instead of a login and a dump per wait
    assert watch.wait_past(head, time.monotonic() + 0.5, never) is False
    assert _dumps(config) == held
    # The server drops the held dump (a timeout, a restart, a DBA): the next wait opens another.
    with connection(config.source) as conn, conn.cursor() as cur:
        cur.execute(f"KILL {held[0]}")
    assert watch.wait_past(head, time.monotonic() + 0.5, never) is False
    again = _dumps(config)
    assert len(again) == 1 and again != held
    # A change ends the wait and closes the dump: the busy cycles that follow would not read it.
    writer = _write_later(mariadb, config.source.database, "UPDATE products SET price = 5 ORDER BY sku LIMIT 1",
                          0.3)
    assert watch.wait_past(head, time.monotonic() + 60, never) is True
    writer.join()
    deadline = time.monotonic() + 10
    while _dumps(config) and time.monotonic() < deadline:  # the server ends the thread on its side
        time.sleep(0.1)
    assert _dumps(config) == []
    assert watch.wait_past(_head(config), time.monotonic() + 0.3, never) is False
    watch.release()  # the run ends
    deadline = time.monotonic() + 10
    while _dumps(config) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _dumps(config) == []


def test_an_idle_follow_blocks_on_the_stream_and_a_write_starts_its_next_cycle(spark, config, mariadb):
    specs = [TableSpec("products", "products")]
    pipeline = Pipeline(config, spark, "watch-1")
    never = threading.Event()
    Follower(pipeline, specs, SourceLink(config.source), never, FollowOptions(interval_s=0.0, max_cycles=1)).run()

    # At --interval 0 a polling follow ran idle cycles back to back (332,019 in a minute); on
    # the stream an idle cycle is followed by a wait of up to the recheck time, here longer than
    # the run: only the write can start the cycle that reads it.
    writer = _write_later(mariadb, config.source.database, "UPDATE products SET price = 4 ORDER BY sku LIMIT 1", 1.0)
    outcome = Follower(pipeline, specs, SourceLink(config.source), never,
                       FollowOptions(interval_s=0.0, max_seconds=5.0),
                       idle_wait=IdleWait(HeadWatch(config.source, SERVER_ID), recheck_s=60.0)).run()
    writer.join()
    assert outcome.rows == 1, outcome  # the write woke it: the change reached silver within the run
    assert outcome.cycles <= 4, outcome  # idle, busy, idle: not thousands of polls
    assert silver_rows(spark, config, "products") == source_rows(config, "products")


def test_a_stream_that_cannot_be_opened_is_one_warning_and_the_follow_polls_instead(spark, config, caplog):
    specs = [TableSpec("products", "products")]
    pipeline = Pipeline(config, spark, "watch-2")
    never = threading.Event()
    Follower(pipeline, specs, SourceLink(config.source), never, FollowOptions(interval_s=0.0, max_cycles=1)).run()
    wrong = replace(config.source, password="not-the-password")  # the dump's login is refused
    with caplog.at_level(logging.WARNING, logger="lakehouse_engine.run.idlewait"):
        outcome = Follower(pipeline, specs, SourceLink(config.source), never,
                           FollowOptions(interval_s=0.2, max_seconds=2.0),
                           idle_wait=IdleWait(HeadWatch(wrong, SERVER_ID), retry_s=0.5)).run()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("follow: waiting on the source's binlog stream failed ("), warnings
    assert "polling every 0.2 s instead" in warnings[0]
    assert outcome.cycles >= 4 and outcome.cycles == outcome.idle_cycles  # it went on, polling
