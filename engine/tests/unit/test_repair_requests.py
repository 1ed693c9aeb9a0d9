"""A repair of a table a follow holds is asked of that follow (files in target/requests), and done
here when the follow stops first. Real file locks held by another process stand for the follow."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import fixture_project
import pytest

from lakehouse_engine.config.project import load_project
from lakehouse_engine.run.locks import TableBusy, locks_folder, table_locks
from lakehouse_engine.run.repair import RepairResult
from lakehouse_engine.run.repairs import (
    KIND,
    RepairServer,
    Waiting,
    repair_tables,
    requests_of,
)
from lakehouse_engine.run.requests import Requests
from lakehouse_engine.run.results import RunStatus
from lakehouse_engine.tables import TableSpec

PROJECT = fixture_project.PROJECT_ROOT
HOLD = """
import sys
from pathlib import Path
from lakehouse_engine.run.locks import table_locks
with table_locks(Path(sys.argv[1]), ["orders"], sys.argv[2]):
    print("locked", flush=True)
    sys.stdin.readline()  # held until the test writes a line or closes stdin
"""
ORDERS = TableSpec("orders", "orders")
FAST = Waiting(wait_s=30, poll_s=0.02)


@pytest.fixture
def config(tmp_path):
    return replace(load_project(PROJECT, env={"MYSQL_PASSWORD": "x"}), target_dir=tmp_path / "target")


class Holder:
    """Another process holding the orders lock for ``command``, until :meth:`release`."""

    def __init__(self, folder: Path, command: str):
        self.process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), command], cwd=PROJECT,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=30)


def repaired_here(calls: list):
    def repair(spec: TableSpec, run_id: str) -> RepairResult:
        calls.append((spec.name, run_id))
        return RepairResult(spec.name, keys_found=2, rows_reread=2, after="here")
    return repair


def serve_once_asked(config, specs, answer_with) -> threading.Thread:
    """A follow's side in a thread: serve the first request that arrives."""
    server = RepairServer(requests_of(config), answer_with)

    def loop() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not requests_of(config).pending(KIND, {s.name for s in specs}):
            time.sleep(0.02)
        server({s.name: s for s in specs})

    thread = threading.Thread(target=loop)
    thread.start()
    return thread


def test_the_lock_names_the_command_holding_it(tmp_path):
    holder = Holder(tmp_path, "follow")
    try:
        with pytest.raises(TableBusy) as busy:
            with table_locks(tmp_path, ["orders"], "repair"):
                pass
        assert (busy.value.command, busy.value.pid, busy.value.table) == ("follow", str(holder.process.pid), "orders")
    finally:
        holder.release()


def test_a_followed_table_is_repaired_by_the_follow_and_nothing_is_done_here(config):
    holder = Holder(locks_folder(config), "follow")
    calls: list = []
    try:
        served = serve_once_asked(config, [ORDERS], lambda spec, run_id: RepairResult(
            spec.name, keys_found=3, rows_reread=2, keys_deleted=1, after=f"by the follow for {run_id}"))
        (result,) = repair_tables(config, "run-7", [ORDERS], repaired_here(calls), FAST)
        served.join()
    finally:
        holder.release()
    assert calls == []
    assert (result.keys_found, result.rows_reread, result.keys_deleted) == (3, 2, 1)
    assert result.status == RunStatus.SUCCESS and result.after == "by the follow for run-7"
    assert list((config.target_dir / "requests").iterdir()) == []  # request and answer are gone


def test_a_follow_that_stops_before_answering_leaves_the_repair_to_the_requester(config):
    holder = Holder(locks_folder(config), "follow")
    calls: list = []
    threading.Timer(0.3, holder.release).start()  # the follow exits without serving
    try:
        (result,) = repair_tables(config, "run-8", [ORDERS], repaired_here(calls), FAST)
    finally:
        holder.release()
    assert calls == [("orders", "run-8")] and result.after == "here"
    assert list((config.target_dir / "requests").iterdir()) == []  # its request withdrawn


def test_a_table_held_by_an_ingest_is_an_error_line_and_the_other_tables_are_repaired(config):
    holder = Holder(locks_folder(config), "ingest")
    calls: list = []
    try:
        busy, other = repair_tables(config, "run-9", [ORDERS, TableSpec("customers", "customers")],
                                    repaired_here(calls), FAST)
    finally:
        holder.release()
    assert busy.status == RunStatus.ERROR and "being ingested by another run" in busy.message
    assert "ingest" in busy.message and busy.category == "busy"
    assert calls == [("customers", "run-9")] and other.status == RunStatus.SUCCESS


def test_no_answer_in_time_withdraws_the_request_and_says_the_follow_never_started(config):
    holder = Holder(locks_folder(config), "follow")
    try:
        (result,) = repair_tables(config, "run-10", [ORDERS], repaired_here([]), Waiting(wait_s=0.2, poll_s=0.02))
    finally:
        holder.release()
    assert result.status == RunStatus.ERROR and "no answer within 0 s" in result.message
    assert "did not start the repair" in result.message
    assert requests_of(config).pending(KIND, {"orders"}) == []


def test_a_request_is_withdrawn_when_the_table_passes_to_a_run_that_is_no_follow(config):
    holder = Holder(locks_folder(config), "follow")
    ingest = None
    try:
        # Polls 2 s apart: the ingest below takes the lock between two of them.
        slow = Waiting(wait_s=30, poll_s=2.0)
        asked = threading.Thread(target=lambda: asked.result.append(
            repair_tables(config, "run-11", [ORDERS], repaired_here([]), slow).__next__()))
        asked.result = []
        asked.start()
        deadline = time.monotonic() + 30
        while not requests_of(config).pending(KIND, {"orders"}) and time.monotonic() < deadline:
            time.sleep(0.02)
        holder.release()  # the follow stops for a deploy; an ingest takes the table first
        ingest = Holder(locks_folder(config), "ingest")
        asked.join(timeout=30)
    finally:
        holder.release()
        if ingest is not None:
            ingest.release()
    (result,) = asked.result
    assert result.status == RunStatus.ERROR and "(pid" in result.message and "ingest" in result.message
    assert list((config.target_dir / "requests").iterdir()) == []  # no request left for a later follow


def test_an_unnamed_holder_is_looked_at_again_not_taken_for_an_ingest(config):
    folder = locks_folder(config)
    folder.mkdir(parents=True)
    holder = Holder(folder, "follow")
    (folder / "orders.lock").write_text("")  # as in the instant between a holder's lock and its name
    threading.Timer(0.3, holder.release).start()
    calls: list = []
    try:
        (result,) = repair_tables(config, "run-12", [ORDERS], repaired_here(calls), FAST)
    finally:
        holder.release()
    assert calls == [("orders", "run-12")] and result.status == RunStatus.SUCCESS


def test_requests_hand_over_once_and_a_withdrawn_one_is_not_served(tmp_path):
    requests = Requests(tmp_path)
    first = requests.ask("orders", KIND, "a")
    withdrawn = requests.ask("customers", KIND, "b")
    assert set(requests.pending(KIND, {"orders", "customers"})) == {first, withdrawn}
    assert requests.pending(KIND, {"items"}) == []
    assert requests.withdraw(withdrawn) and not requests.take(withdrawn)
    assert requests.take(first) and not requests.take(first)  # served once
    assert not requests.withdraw(first)  # too late: the follow has started it
    assert requests.answer_to(first) is None
    requests.answer(first, {"table": "orders"})
    assert requests.answer_to(first) == {"table": "orders"} and requests.answer_to(first) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == []
