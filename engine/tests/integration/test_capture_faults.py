"""The binlog connection under faults: a server that stops answering, a connection killed
mid-transaction, a lake write slower than the server's write timeout; and a bronze commit that
fails midway through a catch-up."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from dataclasses import replace

import pymysql
import pytest

from lakehouse_engine.cdc import capture as capture_module
from lakehouse_engine.cdc.binlog import BinlogSource
from lakehouse_engine.cdc.capture import RetryPolicy
from lakehouse_engine.errors import SourceUnavailableError
from lakehouse_engine.logs import is_progress
from lakehouse_engine.run.pipeline import Pipeline, TablesFailed
from lakehouse_engine.sink import bronze
from lakehouse_engine.source import embedded
from lakehouse_engine.source.connection import connection, current_position
from lakehouse_engine.tables import TableSpec

from .helpers import assert_silver_equals_source, bronze_duplicate_changes, run_source_sql

pytestmark = pytest.mark.integration

SPEC = [TableSpec("wide", "wide")]


def _create_wide(mariadb, db: str) -> None:
    run_source_sql(mariadb, db, """
        CREATE TABLE wide (id INT PRIMARY KEY, pad VARCHAR(400) NOT NULL, n INT NOT NULL);
        INSERT INTO wide SELECT seq, REPEAT('s', 300), 0 FROM seq_1_to_100;
    """)


def _many_transactions(mariadb, db: str, transactions: int, rows: int) -> None:
    """``transactions`` commits of ``rows`` wide rows each: a binlog of several megabytes."""
    with embedded.root_connection(mariadb, db) as conn, conn.cursor() as cur:
        for t in range(transactions):
            first = 1000 + t * rows
            last = first + rows - 1  # the sequence engine's table names carry the bounds
            cur.execute(f"INSERT INTO wide SELECT seq, REPEAT('x', 380), {int(t)} FROM seq_{first}_to_{last}")
            cur.execute("COMMIT")


def _dump_threads(mariadb) -> list[int]:
    with embedded.root_connection(mariadb) as conn, conn.cursor() as cur:
        cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'")
        return [int(row[0]) for row in cur.fetchall()]


def _wait_for_dump_thread(mariadb, timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        threads = _dump_threads(mariadb)
        if threads:
            return threads
        time.sleep(0.05)
    raise AssertionError("the binlog reader never connected")


def test_a_server_that_stops_answering_fails_the_read_instead_of_hanging_it(config, mariadb):
    db = config.source.database
    _create_wide(mariadb, db)
    with connection(config.source) as conn:
        start = current_position(conn)
    _many_transactions(mariadb, db, transactions=40, rows=1000)
    with connection(config.source) as conn:
        stop = current_position(conn)
    profile = replace(config.source, connect_timeout=2)
    source = BinlogSource(profile, 5499, db, {"wide": ("id",)}, read_timeout=2)
    outcome: list[BaseException | int] = []

    def read() -> None:
        try:
            outcome.append(sum(1 for _ in source.transactions(start, stop)))
        except BaseException as exc:  # recorded for the assertion below
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    pid = int(mariadb.pidfile.read_text().strip())
    reader.start()
    try:
        _wait_for_dump_thread(mariadb)
        os.kill(pid, signal.SIGSTOP)
        reader.join(60)
        assert not reader.is_alive(), "the read hung on a server that stopped answering"
    finally:
        os.kill(pid, signal.SIGCONT)
        reader.join(120)
    assert len(outcome) == 1 and isinstance(outcome[0], SourceUnavailableError), outcome
    assert "\n" not in str(outcome[0]) and "resumes from the last commit" in str(outcome[0])


def test_a_connection_killed_mid_transaction_is_resumed_from_the_last_transaction(spark, config, mariadb, caplog,
                                                                                 monkeypatch):
    db = config.source.database
    _create_wide(mariadb, db)
    # Small bronze commits, the first one held until the kill: the reader runs ahead until its
    # queue is full and waits there, mid-stream, while its connection is killed. (Unheld, the
    # reader can finish the whole range before any kill lands.) The range (about 30 MB) is far
    # more than the reader's queue and the socket buffers hold, so the server's dump thread is
    # still sending when the kill comes.
    config = replace(config, defaults=replace(config.defaults, flush_rows=2000))
    Pipeline(config, spark, "run-1").ingest(SPEC)
    _many_transactions(mariadb, db, transactions=80, rows=1000)
    killed: list[int] = []
    appending, kill_done = threading.Event(), threading.Event()
    real_append = bronze.append_batch

    def first_append_held_until_the_kill(*args, **kwargs):
        if not appending.is_set():
            appending.set()
            kill_done.wait(60)
        return real_append(*args, **kwargs)

    def kill_the_reader_once() -> None:
        try:
            appending.wait(120)
            deadline = time.monotonic() + 60
            while not killed and time.monotonic() < deadline:
                threads = _wait_for_dump_thread(mariadb)
                with embedded.root_connection(mariadb) as conn, conn.cursor() as cur:
                    for thread_id in threads:
                        try:
                            cur.execute(f"KILL {int(thread_id)}")
                        except pymysql.err.OperationalError:  # it ended between the look and the kill
                            continue
                        killed.append(thread_id)
        finally:
            kill_done.set()

    monkeypatch.setattr(bronze, "append_batch", first_append_held_until_the_kill)
    killer = threading.Thread(target=kill_the_reader_once, daemon=True)
    killer.start()
    retry = RetryPolicy(attempts=4, first_backoff_s=0.2)
    with caplog.at_level(logging.WARNING, logger=capture_module.__name__):
        (result,) = Pipeline(config, spark, "run-2", retry=retry).ingest(SPEC)
    killer.join(10)
    assert killed, "the reader was never killed: the test proves nothing"
    assert any("retry 1/3" in r.getMessage() for r in caplog.records), "the kill was never noticed"
    assert result.status == "success" and result.binlog_rows == 80_000
    assert_silver_equals_source(spark, config, "wide")
    assert bronze_duplicate_changes(spark, config, "wide") == 0


def test_a_lake_write_slower_than_the_servers_write_timeout_does_not_drop_the_stream(
    spark, config, mariadb, monkeypatch, caplog
):
    db = config.source.database
    _create_wide(mariadb, db)
    config = replace(config, defaults=replace(config.defaults, flush_rows=2000))
    Pipeline(config, spark, "run-1").ingest(SPEC)
    _many_transactions(mariadb, db, transactions=60, rows=1000)
    real_append = bronze.append_batch
    slow: list[float] = []

    def slow_first_append(*args, **kwargs):
        if not slow:
            slow.append(time.monotonic())
            time.sleep(6)  # three times the server's write timeout below
        return real_append(*args, **kwargs)

    monkeypatch.setattr(bronze, "append_batch", slow_first_append)
    with embedded.root_connection(mariadb) as conn, conn.cursor() as cur:
        cur.execute("SELECT @@global.net_write_timeout")
        saved = int(cur.fetchone()[0])
        cur.execute("SET GLOBAL net_write_timeout = 2")
    try:
        with caplog.at_level(logging.INFO, logger=capture_module.__name__):
            (result,) = Pipeline(config, spark, "run-2").ingest(SPEC)
    finally:
        with embedded.root_connection(mariadb) as conn, conn.cursor() as cur:
            cur.execute(f"SET GLOBAL net_write_timeout = {saved}")
    assert slow, "the slow write never happened: the test proves nothing"
    retries = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    assert retries == [], "the server dropped the stream during a slow write"
    assert result.status == "success" and result.binlog_rows == 60_000
    assert_silver_equals_source(spark, config, "wide")
    # Progress: one line per flush, marked so a console that is not a terminal leaves it out.
    progress = [r for r in caplog.records if r.getMessage().startswith("binlog: at ")]
    assert len(progress) >= 10 and all(is_progress(r) for r in progress)
    to_go = [int(r.getMessage().split(", ")[1].split(" bytes")[0].replace(",", "")) for r in progress]
    assert to_go == sorted(to_go, reverse=True) and to_go[0] > 0


def test_a_bronze_commit_failing_midway_stops_its_table_at_its_last_commit_and_a_rerun_loses_nothing(
    spark, config, mariadb, monkeypatch
):
    """The table stops at the failed flush (no later batch is attempted, the run counts only the
    rows that landed); the other table finishes, and the next run resumes from the last commit."""
    db = config.source.database
    _create_wide(mariadb, db)
    run_source_sql(mariadb, db, """
        CREATE TABLE narrow (id INT PRIMARY KEY, n INT NOT NULL);
        INSERT INTO narrow SELECT seq, 0 FROM seq_1_to_10;
    """)
    specs = [TableSpec("wide", "wide"), TableSpec("narrow", "narrow")]
    config = replace(config, defaults=replace(config.defaults, flush_rows=2000))
    Pipeline(config, spark, "run-1").ingest(specs)
    _many_transactions(mariadb, db, transactions=12, rows=1000)  # a flush every two
    run_source_sql(mariadb, db, "UPDATE narrow SET n = n + 1;")
    real_append = bronze.append_batch
    wide_batches: list[int] = []

    def third_wide_commit_fails(spark, path, rows, schema, checkpoint):
        if checkpoint.table == "wide":
            wide_batches.append(checkpoint.batch)
            if len(wide_batches) == 3:
                raise RuntimeError("the lake refused the batch (injected)")
        return real_append(spark, path, rows, schema, checkpoint)

    monkeypatch.setattr(bronze, "append_batch", third_wide_commit_fails)
    with pytest.raises(TablesFailed) as failed:
        Pipeline(config, spark, "run-2").ingest(specs)
    monkeypatch.undo()
    results = {r.table: r for r in failed.value.results}
    wide, narrow = results["wide"], results["narrow"]
    assert wide.status == "error" and "the lake refused the batch" in wide.message and "\n" not in wide.message
    # Nothing after the failed batch was committed, and the run counts only what landed.
    assert len(wide_batches) == 3 and wide.binlog_rows == 4000
    assert narrow.status == "success" and narrow.binlog_rows == 10
    assert_silver_equals_source(spark, config, "narrow")
    (again,) = Pipeline(config, spark, "run-3").ingest(specs[:1])
    assert again.status == "success" and again.binlog_rows == 8000  # from the last batch that landed
    assert_silver_equals_source(spark, config, "wide")
    assert bronze_duplicate_changes(spark, config, "wide") == 0
