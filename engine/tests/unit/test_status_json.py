"""``status --json``: one versioned document a dashboard reads, valid against the schema
``lakehouse schema status`` prints; lags measured as dq measures them; a snapshot-only table
never "behind"; the run holding a table found without taking its lock."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import fixture_project
import jsonschema

from lakehouse_engine.run import statusdoc
from lakehouse_engine.run.locks import table_locks
from lakehouse_engine.run.status import LastRun, TableState
from lakehouse_engine.state.checkpoint import Checkpoint, Phase
from lakehouse_engine.state.holders import holder
from lakehouse_engine.state.positions import BinlogPosition

NOW = dt.datetime(2026, 1, 2, 12, 0, tzinfo=dt.UTC)
AT = BinlogPosition("mysql-bin.000001", 400)
HEAD = statusdoc.SourceHead(BinlogPosition("mysql-bin.000002", 100), {"mysql-bin.000001": 1000,
                                                                        "mysql-bin.000002": 100})


def binlog_state(table: str, synced_seconds_ago: float | None) -> TableState:
    synced = None if synced_seconds_ago is None else NOW.timestamp() - synced_seconds_ago
    checkpoint = Checkpoint(table, 7, Phase.BINLOG, "run-1", position=AT, synced_at=synced)
    return TableState(table, checkpoint, NOW - dt.timedelta(minutes=2), silver_batch=7)


def test_the_document_holds_each_tables_numbers_and_validates_against_its_schema():
    states = [binlog_state("orders", 90), binlog_state("customers", None), binlog_state("countries", 5),
              TableState("refunds")]
    facts = {"orders": statusdoc.TableFacts(True, (4242, "follow")), "customers": statusdoc.TableFacts(True, None),
             "countries": statusdoc.TableFacts(False, None), "refunds": statusdoc.TableFacts(True, None)}
    last = LastRun("ingest", "success", NOW, "", {"orders": "success"})
    doc = statusdoc.document("dev", "/lake", states, facts, HEAD, "", last, NOW)
    jsonschema.validate(doc, statusdoc.status_schema())
    orders, customers, countries, refunds = doc["tables"]
    assert orders["behind_bytes"] == 700 and orders["lag_seconds"] == 90.0  # 600 + 100 bytes
    assert orders["running"] == {"pid": 4242, "command": "follow"} and orders["last_run_status"] == "success"
    assert customers["behind_bytes"] == 700 and customers["lag_seconds"] is None  # unknown, not a guess
    assert countries["mode"] == "snapshot-only" and countries["behind_bytes"] is None
    assert refunds["phase"] == "not ingested" and refunds["batch"] is None
    assert doc["schema_version"] == 1 and doc["source_head"] == "mysql-bin.000002:100"


def test_without_the_source_the_lags_are_null_and_the_note_says_why():
    doc = statusdoc.document("dev", "/lake", [binlog_state("orders", 90)],
                             {"orders": statusdoc.TableFacts(True, None)}, None,
                             "behind source: not measured, MYSQL_PASSWORD is not set", None, NOW)
    jsonschema.validate(doc, statusdoc.status_schema())
    assert doc["tables"][0]["lag_seconds"] is None and "MYSQL_PASSWORD" in doc["lag_note"]


HOLD = """
import sys, time
from pathlib import Path
from lakehouse_engine.run.locks import table_locks
with table_locks(Path(sys.argv[1]), ["orders"], "follow"):
    print("locked", flush=True)
    time.sleep(30)
"""


def test_the_holder_of_a_table_is_found_without_taking_its_lock(tmp_path):
    assert holder(tmp_path, "orders") is None  # never locked
    other = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                             cwd=fixture_project.PROJECT_ROOT)
    try:
        assert other.stdout.readline().strip() == "locked"
        assert holder(tmp_path, "orders") == (other.pid, "follow")
        assert holder(tmp_path, "orders") == (other.pid, "follow")  # looking twice took nothing
    finally:
        other.kill()
        other.wait()
    assert holder(tmp_path, "orders") is None  # the file still names it, but nobody holds it
    with table_locks(tmp_path, ["orders"]):  # and the lock is free
        pass


def test_run_results_as_written_validate_against_their_published_schema(tmp_path):
    import json

    from lakehouse_engine.quality.checks import CheckOutcome, QualityResult
    from lakehouse_engine.run.results import RunStatus, TableResult, write_run_results

    started = dt.datetime.now(dt.UTC)
    outcomes = {
        "ingest": [TableResult("orders", snapshot_rows=3, position="mysql-bin.000001:4"),
                   TableResult("customers", RunStatus.ERROR, message="lost", category="source")],
        "dq": [QualityResult("orders", False, (CheckOutcome("silver_lag_at_most(60 s)", False, "lag 61 s"),),
                             None, "mysql-bin.000001:4", lag_seconds=61.0)],
        "repair": [{"table": "orders", "status": "fail", "message": "2 keys still differ"}],
    }
    for command, results in outcomes.items():
        path = write_run_results(tmp_path, invocation_id="i", command=command, started_at=started,
                                 status=RunStatus.FAIL, results=results)
        jsonschema.validate(json.loads(path.read_text()), statusdoc.run_results_schema())


def test_a_running_follows_read_ahead_is_where_an_idle_tables_lag_is_measured_from(tmp_path):
    import os

    from lakehouse_engine.state import followstate

    read_to = BinlogPosition("mysql-bin.000002", 100)  # the head: the follow has read it all
    followstate.write(tmp_path, os.getpid(), {"orders": read_to}, NOW.timestamp() - 3)
    assert followstate.read(tmp_path, "orders", holder_pid=None) is None  # no follow holds it
    assert followstate.read(tmp_path, "orders", holder_pid=os.getpid() + 1) is None  # another run
    ahead = followstate.read(tmp_path, "orders", holder_pid=os.getpid())
    assert ahead == followstate.ReadAhead(read_to, NOW.timestamp() - 3)
    idle = binlog_state("orders", synced_seconds_ago=240)  # its commit is held for minutes
    from dataclasses import replace

    doc = statusdoc.document("dev", "/lake", [idle, replace(idle, read_ahead=ahead)],
                             {"orders": statusdoc.TableFacts(True, (os.getpid(), "follow"))}, HEAD, "", None, NOW)
    committed, followed = doc["tables"]
    assert (committed["behind_bytes"], committed["lag_seconds"]) == (700, 240.0)
    assert (followed["behind_bytes"], followed["lag_seconds"]) == (0, 0.0)  # caught up, not 4 minutes behind
