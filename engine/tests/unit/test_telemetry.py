"""Alerts, metrics and lineage read an invocation's run results and can only warn: a failure
reaches the hook and the webhook with its tables, the Prometheus textfile keeps every table's
last success across commands, and OpenLineage events name the source and the Delta tables."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from lakehouse_engine.config.telemetry import LineageTransport, Telemetry, telemetry_from
from lakehouse_engine.errors import ConfigError
from lakehouse_engine.telemetry import alerts, metrics
from lakehouse_engine.telemetry.lineage import Datasets, LineageRun, lake_dataset, source_dataset
from lakehouse_engine.telemetry.report import after_run


def run_results(command="ingest", status="success", results=(), message=""):
    return {"metadata": {"schema_version": 1, "command": command, "invocation_id": "inv-1"},
            "status": status, "message": message, "results": list(results)}


ORDERS_OK = {"table": "orders", "status": "success", "snapshot_rows": 10, "binlog_rows": 3, "seconds": 1.5}
CUSTOMERS_ERROR = {"table": "customers", "status": "error", "snapshot_rows": 0, "binlog_rows": 0,
                   "message": "lost connection"}


def write(tmp_path: Path, body) -> Path:
    path = tmp_path / "run_results.json"
    path.write_text(json.dumps(body))
    return path


# --- metrics -------------------------------------------------------------------------------


def test_the_textfile_keeps_each_tables_last_success_across_commands(tmp_path):
    prom = tmp_path / "metrics" / "lakehouse.prom"
    metrics.update_textfile(prom, metrics.samples_of(run_results(results=[ORDERS_OK, CUSTOMERS_ERROR]), 1000.0))
    metrics.update_textfile(prom, metrics.samples_of(run_results(status="error", results=[CUSTOMERS_ERROR]), 2000.0))
    text = prom.read_text()
    # orders succeeded at 1000 and was not in the second run: its sample stays.
    assert 'lakehouse_table_last_success_timestamp_seconds{command="ingest",table="orders"} 1000' in text
    assert 'table="customers"} 1000' not in text.split("lakehouse_table_last_success")[1].split("# HELP")[0]
    assert 'lakehouse_table_up{command="ingest",table="customers"} 0' in text
    assert 'lakehouse_table_up{command="ingest",table="orders"} 1' in text
    assert 'lakehouse_table_rows{command="ingest",table="orders",kind="binlog"} 3' in text
    assert 'lakehouse_last_run_timestamp_seconds{command="ingest",status="success"} 1000' in text
    assert 'lakehouse_last_run_timestamp_seconds{command="ingest",status="error"} 2000' in text
    assert text.count("# TYPE lakehouse_table_up gauge") == 1
    # No temporary file left; the writers' lock file stays (node_exporter reads *.prom only).
    assert sorted(p.name for p in prom.parent.iterdir()) == [".lakehouse.prom.lock", "lakehouse.prom"]


def test_dq_results_give_the_lag_and_a_failed_check_marks_the_table_down(tmp_path):
    prom = tmp_path / "lakehouse.prom"
    checked = {"table": "orders", "success": False, "lag_seconds": 42.0, "checks": []}
    metrics.update_textfile(prom, metrics.samples_of(run_results("dq", "fail", [checked]), 5.0))
    text = prom.read_text()
    assert 'lakehouse_table_lag_seconds{table="orders"} 42' in text
    assert 'lakehouse_table_up{command="dq",table="orders"} 0' in text


def test_label_values_are_escaped_and_read_back(tmp_path):
    prom = tmp_path / "lakehouse.prom"
    odd = {"table": 'we"ird\\name', "status": "success"}
    metrics.update_textfile(prom, metrics.samples_of(run_results(results=[odd]), 7.0))
    metrics.update_textfile(prom, [])
    assert 'table="we\\"ird\\\\name"} 1' in prom.read_text()


# --- alerts --------------------------------------------------------------------------------


def test_a_failed_run_runs_the_hook_with_the_results_and_a_success_does_not(tmp_path):
    seen = tmp_path / "seen"
    hook = f'echo "$LAKEHOUSE_COMMAND $LAKEHOUSE_STATUS $LAKEHOUSE_RUN_RESULTS" > {seen}; cat >> {seen}'
    body = run_results(status="error", results=[ORDERS_OK, CUSTOMERS_ERROR])
    path = write(tmp_path, body)
    alerts.alert(run_results(results=[ORDERS_OK]), path, "acme", command=hook, webhook_url_env=None)
    assert not seen.exists()
    alerts.alert(run_results(status="interrupted"), path, "acme", command=hook, webhook_url_env=None)
    assert not seen.exists()  # a stop someone asked for is no failure
    alerts.alert(body, path, "acme", command=hook, webhook_url_env=None)
    first, rest = seen.read_text().split("\n", 1)
    assert first == f"ingest error {path}" and json.loads(rest) == body


def test_a_failing_hook_only_warns(tmp_path, caplog):
    body = run_results(status="fail")
    with caplog.at_level(logging.WARNING):
        alerts.alert(body, write(tmp_path, body), "acme", command="echo broken >&2; exit 3", webhook_url_env=None)
    assert "alerts.on_failure exited 3: broken" in caplog.text


class Receiver(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # noqa: N802 (the handler's name)
        length = int(self.headers["Content-Length"])
        Receiver.received.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def webhook(monkeypatch):
    server = HTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Receiver.received = []
    monkeypatch.setenv("ALERT_URL", f"http://127.0.0.1:{server.server_port}/hook")
    yield Receiver.received
    server.shutdown()


def test_the_webhook_gets_one_line_naming_the_failing_tables_and_the_results(tmp_path, webhook):
    body = run_results("dq", "fail", [ORDERS_OK, {"table": "customers", "success": False}])
    alerts.alert(body, write(tmp_path, body), "acme", command=None, webhook_url_env="ALERT_URL")
    (payload,) = webhook
    assert payload["text"] == "lakehouse acme: dq fail (customers)"
    assert payload["run_results"] == body


def test_an_unset_or_unreachable_webhook_only_warns_and_never_shows_the_url(tmp_path, monkeypatch, caplog):
    body = run_results(status="error", message="boom")
    monkeypatch.setenv("ALERT_URL", "http://127.0.0.1:9/secret-token")
    with caplog.at_level(logging.WARNING):
        alerts.alert(body, write(tmp_path, body), "acme", command=None, webhook_url_env="ALERT_URL")
        alerts.alert(body, write(tmp_path, body), "acme", command=None, webhook_url_env="UNSET_URL_VAR")
    assert "the webhook in ALERT_URL could not be called" in caplog.text
    assert "UNSET_URL_VAR, which is not set" in caplog.text
    assert "secret-token" not in caplog.text


# --- lineage -------------------------------------------------------------------------------


def test_lake_paths_are_named_by_the_openlineage_naming_spec():
    assert lake_dataset("s3a://bucket/lake/silver/orders") == ("s3://bucket", "lake/silver/orders")
    assert lake_dataset("abfss://c@acct.dfs.core.windows.net/lake/x") == (
        "abfss://c@acct.dfs.core.windows.net", "lake/x")
    assert lake_dataset("/data/lake/bronze/orders") == ("file", "/data/lake/bronze/orders")
    assert source_dataset("db.internal", 3306, "shop", "orders") == ("mysql://db.internal:3306", "shop.orders")


def test_an_ingest_emits_start_and_complete_with_source_inputs_and_delta_outputs(tmp_path):
    events_file = tmp_path / "lineage" / "events.jsonl"
    settings = Telemetry(lineage=LineageTransport.FILE, lineage_file=str(events_file))
    sets = Datasets((source_dataset("h", 3306, "shop", "orders"),), (lake_dataset("/lake/bronze/orders"),
                                                                   lake_dataset("/lake/silver/orders")))
    run = LineageRun(settings, "acme", "ingest", "0190e5c8-0000-7000-8000-000000000001", sets)
    run.start()
    body = run_results(results=[ORDERS_OK])
    after_run(write(tmp_path, body), settings, "acme", tmp_path, run)
    start, end = (json.loads(line) for line in events_file.read_text().splitlines())
    assert [start["eventType"], end["eventType"]] == ["START", "COMPLETE"]
    assert start["run"]["runId"] == end["run"]["runId"] and end["job"]["name"] == "acme.ingest"
    assert [(d["namespace"], d["name"]) for d in end["inputs"]] == [("mysql://h:3306", "shop.orders")]
    assert [d["name"] for d in end["outputs"]] == ["/lake/bronze/orders", "/lake/silver/orders"]


def test_dq_reads_the_lake_so_its_tables_are_inputs_and_a_failure_is_a_fail_event(tmp_path):
    events_file = tmp_path / "events.jsonl"
    settings = Telemetry(lineage=LineageTransport.FILE, lineage_file=str(events_file))
    sets = Datasets((("mysql://h:3306", "shop.orders"),), (("file", "/lake/silver/orders"),))
    run = LineageRun(settings, "acme", "dq", "0190e5c8-0000-7000-8000-000000000002", sets)
    run.finish(run_results("dq", "fail"))
    (event,) = (json.loads(line) for line in events_file.read_text().splitlines())
    assert event["eventType"] == "FAIL" and event["outputs"] == []
    assert len(event["inputs"]) == 2


def test_lineage_off_or_without_its_url_sends_nothing(tmp_path, monkeypatch, caplog):
    sets = Datasets((), ())
    assert not LineageRun(Telemetry(), "acme", "ingest", "r", sets).enabled
    monkeypatch.delenv("OPENLINEAGE_URL", raising=False)
    with caplog.at_level(logging.WARNING):
        http = LineageRun(Telemetry(lineage=LineageTransport.HTTP), "acme", "ingest", "r", sets)
    assert not http.enabled and "OPENLINEAGE_URL is not set" in caplog.text


# --- settings ------------------------------------------------------------------------------


def test_the_settings_are_read_from_their_sections_and_checked():
    settings = telemetry_from({"alerts": {"on_failure": "notify.sh", "webhook_url_env": "SLACK_URL"},
                               "metrics": {"textfile": "/var/lib/node_exporter/lakehouse.prom"},
                               "lineage": {"openlineage": "file"}}, "lakehouse_project.yml")
    assert settings == Telemetry("notify.sh", "SLACK_URL", "/var/lib/node_exporter/lakehouse.prom",
                                 LineageTransport.FILE)
    assert telemetry_from({}, "f") == Telemetry()
    with pytest.raises(ConfigError, match="lineage.openlineage is 'kafka'; use none, file or http"):
        telemetry_from({"lineage": {"openlineage": "kafka"}}, "f")
    with pytest.raises(ConfigError, match="on_failure must be a string"):
        telemetry_from({"alerts": {"on_failure": ["a"]}}, "f")


def test_recording_an_invocation_writes_its_results_and_tells_what_the_project_asked(tmp_path):
    import datetime as dt

    from lakehouse_engine.config.project import load_project
    from lakehouse_engine.run.context import Invocation
    from lakehouse_engine.run.recording import Recorder
    from lakehouse_engine.run.results import RunStatus

    (tmp_path / "lakehouse_project.yml").write_text(
        "name: acme\nprofile: p\nlake_root: lake\n"
        f"alerts: {{on_failure: 'cat > {tmp_path}/alert.json'}}\nmetrics: {{textfile: target/m.prom}}\n")
    (tmp_path / "profiles.yml").write_text(
        "p: {target: dev, outputs: {dev: {host: h, port: 1, user: u, password: x, database: d}}}\n")
    config = load_project(tmp_path, env={})
    recorder = Recorder(config.target_dir, tmp_path / "copy" / "mine.json", config)
    run = Invocation("ingest", "inv-9", dt.datetime.now(dt.UTC))
    path = recorder.record(run, RunStatus.ERROR, [CUSTOMERS_ERROR], "1 of 1 table(s) failed")
    body = json.loads(path.read_text())
    assert json.loads((tmp_path / "copy" / "mine.json").read_text()) == body
    assert json.loads((tmp_path / "alert.json").read_text()) == body
    assert 'lakehouse_table_up{command="ingest",table="customers"} 0' in (tmp_path / "target" / "m.prom").read_text()


def test_a_malformed_webhook_url_or_a_missing_shell_only_warns(tmp_path, monkeypatch, caplog):
    body = run_results(status="error")
    monkeypatch.setenv("ALERT_URL", "hooks.example.com/no-scheme-token")
    with caplog.at_level(logging.WARNING):
        alerts.alert(body, write(tmp_path, body), "acme", command=None, webhook_url_env="ALERT_URL")
        monkeypatch.setenv("SHELL", "/nonexistent")
        monkeypatch.setenv("PATH", "")  # no shell found for the hook: still only a warning
        alerts.alert(body, write(tmp_path, body), "acme", command="notify", webhook_url_env=None)
    assert "the webhook in ALERT_URL could not be called: ValueError" in caplog.text
    assert "no-scheme-token" not in caplog.text


def test_lineage_that_cannot_be_set_up_is_off_for_the_run_with_a_warning(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    settings = Telemetry(lineage=LineageTransport.FILE, lineage_file=str(blocker / "sub" / "events.jsonl"))
    with caplog.at_level(logging.WARNING):
        run = LineageRun(settings, "acme", "ingest", "r", Datasets((), ()))
        run.start()
        run.abort()
    assert not run.enabled and "OpenLineage is off for this run" in caplog.text


def test_a_refused_run_ends_its_lineage_with_abort(tmp_path):
    events_file = tmp_path / "events.jsonl"
    run = LineageRun(Telemetry(lineage=LineageTransport.FILE, lineage_file=str(events_file)), "acme", "ingest",
                     "0190e5c8-0000-7000-8000-000000000003", Datasets((), ()))
    run.start()
    run.abort()
    assert [json.loads(line)["eventType"] for line in events_file.read_text().splitlines()] == ["START", "ABORT"]


def test_the_results_file_copy_is_readable_by_other_users(tmp_path):
    import datetime as dt

    from lakehouse_engine.run.context import Invocation
    from lakehouse_engine.run.recording import Recorder
    from lakehouse_engine.run.results import RunStatus

    recorder = Recorder(tmp_path / "target", tmp_path / "scheduler" / "task.json")
    recorder.record(Invocation("dq", "inv", dt.datetime.now(dt.UTC)), RunStatus.SUCCESS, [])
    assert (tmp_path / "scheduler" / "task.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "target" / "run_results.json").stat().st_mode & 0o777 == 0o644


def test_status_lags_go_to_the_textfile_and_an_unknown_lag_gives_no_sample(tmp_path):
    prom = tmp_path / "lakehouse.prom"
    tables = [{"table": "orders", "behind_bytes": 1032, "lag_seconds": 12.5},
              {"table": "customers", "behind_bytes": 700, "lag_seconds": None},
              {"table": "countries", "behind_bytes": None, "lag_seconds": None}]
    metrics.update_textfile(prom, metrics.lag_samples(tables))
    text = prom.read_text()
    assert 'lakehouse_table_lag_bytes{table="orders"} 1032' in text
    assert 'lakehouse_table_lag_seconds{table="orders"} 12.5' in text
    assert 'lakehouse_table_lag_bytes{table="customers"} 700' in text
    assert 'lag_seconds{table="customers"}' not in text and "countries" not in text


def test_a_run_whose_only_misses_were_busy_tables_alerts_nobody_and_keeps_their_samples(tmp_path):
    prom = tmp_path / "lakehouse.prom"
    metrics.update_textfile(prom, metrics.samples_of(run_results(results=[ORDERS_OK]), 1000.0))
    busy = {"table": "orders", "status": "skipped-busy", "message": "held by another run"}
    body = run_results(status="skipped-busy", results=[busy])
    metrics.update_textfile(prom, metrics.samples_of(body, 2000.0))
    text = prom.read_text()
    assert 'lakehouse_table_up{command="ingest",table="orders"} 1' in text  # not marked down for it
    assert 'last_success_timestamp_seconds{command="ingest",table="orders"} 1000' in text
    seen = tmp_path / "seen"
    alerts.alert(body, write(tmp_path, body), "acme", command=f"touch {seen}", webhook_url_env=None)
    assert not seen.exists()
