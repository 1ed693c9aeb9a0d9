"""Dagster definitions for this project: every table is an asset, `dq` its asset check.

Load with `dagster dev -f orchestration/dagster_defs.py` (or point a code location at it). Dagster
runs in its own environment: it needs only `dagster` and calls this project's `lakehouse` command
(`LAKEHOUSE_BIN`, by default `.venv/bin/lakehouse` here), as the systemd unit and cron do.

- Materializing a selection of tables runs ONE `lakehouse ingest --select ...` (one Spark start,
  like dagster-dbt runs one dbt invocation): each table reports its own materialization with the
  rows and the binlog position, a failed table fails the step with its message, and a table
  another run holds (`skipped-busy`) has the step retried later.
- The asset checks run one `lakehouse dq --select ...`; each table's check carries every
  expectation's observed value.
- `follow` is a long-running service, not a job: run it with deploy/lakehouse-follow.service and
  leave its tables out of the schedules here.
- On a Spark cluster's gateway, set `LAKEHOUSE_SPARK_SUBMIT` to its `spark-submit` (SPARK_HOME set,
  as a gateway has it): each step then runs the line `lakehouse submit-line` prints for it (Delta's
  jars, the project's Spark settings, the engine's launcher) with that spark-submit, as Airflow's
  SparkSubmitOperator would.
"""

# No `from __future__ import annotations`: Dagster reads the context parameter's annotation.
import json
import os
import shlex
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import dagster as dg

PROJECT = Path(__file__).resolve().parents[1]
LAKEHOUSE = os.environ.get("LAKEHOUSE_BIN", str(PROJECT / ".venv" / "bin" / "lakehouse"))
BUSY = "skipped-busy"  # a table another run holds: try again later


def project_tables() -> list[dict[str, Any]]:
    """The project's tables, as `lakehouse list --json` names them."""
    done = subprocess.run([LAKEHOUSE, "list", "--json"], cwd=PROJECT, capture_output=True, text=True,
                          check=False, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"`lakehouse list --json` failed: {(done.stderr or done.stdout).strip()[-500:]}")
    tables: list[dict[str, Any]] = json.loads(done.stdout)
    return tables


def key_of(table: str) -> dg.AssetKey:
    return dg.AssetKey(["lakehouse", table])


def command_line(arguments: Sequence[str]) -> list[str]:
    """`lakehouse <arguments>`, or with LAKEHOUSE_SPARK_SUBMIT set the spark-submit line for them."""
    spark_submit = os.environ.get("LAKEHOUSE_SPARK_SUBMIT")
    if not spark_submit:
        return [LAKEHOUSE, *arguments]
    done = subprocess.run([LAKEHOUSE, "submit-line", *arguments], cwd=PROJECT, capture_output=True, text=True,
                          check=False, timeout=300)
    if done.returncode != 0:
        refused = (done.stderr or done.stdout).strip()[-2000:]
        raise dg.Failure(description=f"`lakehouse submit-line` failed: {refused}")
    words = shlex.split(done.stdout.strip().splitlines()[-1])  # spark-submit --master ... launcher args
    return [spark_submit, *words[1:]]


def run_lakehouse(context: Any, command: str, tables: Sequence[str]) -> tuple[int, dict[str, Any]]:
    """Run `lakehouse <command> --select <tables>`; its exit code and run results."""
    results = PROJECT / "target" / f"dagster-{context.run.run_id}-{command}.json"
    arguments = command_line([command, "--select", *tables, "--results-file", str(results)])
    context.log.info(shlex.join(arguments))
    done = subprocess.run(arguments, cwd=PROJECT, capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        context.log.info(line)
    if not results.exists():  # refused before it ran (usage or configuration)
        raise dg.Failure(description=(done.stderr or done.stdout).strip()[-2000:])
    body: dict[str, Any] = json.loads(results.read_text())
    results.unlink()
    return done.returncode, body


TABLES = project_tables()
ASSETS = [dg.AssetSpec(key_of(t["name"]), group_name="lakehouse", kinds={"delta"}, skippable=True,
                       description=f"{t['source_table']} copied to bronze and silver", tags={
                           tag: "" for tag in t.get("tags", [])})
          for t in TABLES]


@dg.multi_asset(specs=ASSETS, can_subset=True, name="lakehouse_ingest")
def ingest(context: dg.AssetExecutionContext) -> Iterator[dg.MaterializeResult]:
    tables = [key.path[-1] for key in context.selected_asset_keys]
    _, body = run_lakehouse(context, "ingest", tables)
    failed, busy = [], []
    for result in body["results"]:
        if result["status"] == BUSY:
            busy.append(result["table"])
        elif result["status"] != "success":
            failed.append(f"{result['table']}: {result.get('message', result['status'])}")
        else:
            yield dg.MaterializeResult(asset_key=key_of(result["table"]), metadata={
                "snapshot_rows": result.get("snapshot_rows", 0), "binlog_rows": result.get("binlog_rows", 0),
                "binlog_position": result.get("position") or "", "seconds": result.get("seconds", 0.0)})
    if failed:
        raise dg.Failure(description="; ".join(failed))
    if busy:  # held by another run (follow, a manual ingest): nothing is wrong, try again later
        raise dg.RetryRequested(max_retries=5, seconds_to_wait=120)
    if body["status"] != "success":
        raise dg.Failure(description=body.get("message") or body["status"])


@dg.multi_asset_check(specs=[dg.AssetCheckSpec("dq", asset=spec.key) for spec in ASSETS], can_subset=True,
                      name="lakehouse_dq")
def dq(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
    tables = [key.asset_key.path[-1] for key in context.selected_asset_check_keys]
    _, body = run_lakehouse(context, "dq", tables)
    for result in body["results"]:
        yield dg.AssetCheckResult(
            asset_key=key_of(result["table"]), check_name="dq", passed=bool(result["success"]),
            metadata={check["expectation"]: check["observed"] for check in result["checks"]})


ingest_all = dg.define_asset_job("lakehouse_ingest_all", selection=dg.AssetSelection.groups("lakehouse"))
defs = dg.Definitions(
    assets=[ingest], asset_checks=[dq], jobs=[ingest_all],
    schedules=[dg.ScheduleDefinition(job=ingest_all, cron_schedule="*/15 * * * *")],
)
