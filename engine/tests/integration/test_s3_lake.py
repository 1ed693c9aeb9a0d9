"""An ``s3a://`` lake root end to end, against a local S3-compatible server (moto), through the CLI
as a user runs it: snapshot, binlog catch-up, dq, status, maintain.

Opt-in (``make test-s3``, deselected from ``make test``): Spark's first start with hadoop-aws
downloads 642 MB from Maven Central, and the run takes minutes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from .conftest import PROJECT_ROOT
from .helpers import run_source_sql
from .servers import free_port, serving
from .test_cli import cli_command, project_dir

pytestmark = [pytest.mark.integration, pytest.mark.s3]

BUCKET = "lake-bucket"
HADOOP_AWS = "org.apache.hadoop:hadoop-aws:3.4.2"  # pyspark 4.1.4's Hadoop (see the README)


@pytest.fixture
def s3_endpoint() -> Iterator[str]:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with serving([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], port):
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                     aws_secret_access_key="testing").create_bucket(Bucket=BUCKET)
        yield endpoint


def s3_cli(config, endpoint: str, *args: str) -> subprocess.CompletedProcess:
    command, env = cli_command(config, *args, lake_root=f"s3a://{BUCKET}/lake")
    project_file = project_dir(config) / "lakehouse_project.yml"
    project_file.write_text(project_file.read_text().replace("  conf: {}", f"""  conf:
    spark.jars.packages: {HADOOP_AWS}
    spark.hadoop.fs.s3a.endpoint: {endpoint}
    spark.hadoop.fs.s3a.path.style.access: "true"
    spark.hadoop.fs.s3a.connection.ssl.enabled: "false"
    spark.hadoop.fs.s3a.attempts.maximum: "1"
    spark.hadoop.fs.s3a.retry.limit: "1\""""))
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1")
    return subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=1800, env=env)


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def test_an_s3a_lake_takes_a_snapshot_the_binlog_checks_status_and_maintenance(config, mariadb, s3_endpoint):
    assert "conf: {}" in (PROJECT_ROOT / "lakehouse_project.yml").read_text()  # what s3_cli rewrites
    first = ok(s3_cli(config, s3_endpoint, "ingest", "--select", "customers"))
    assert "customers " in first and " ok " in first
    _assert_committed_as_the_tasks_wrote_them(s3_endpoint, "lake/bronze/customers/", ["_batch"])
    _assert_committed_as_the_tasks_wrote_them(s3_endpoint, "lake/silver/customers/", ["customer_id"])
    run_source_sql(mariadb, config.source.database, """
        UPDATE customers SET full_name = 'On S3' WHERE customer_id = 3;
        DELETE FROM customers WHERE customer_id = 4;
    """)
    second = ok(s3_cli(config, s3_endpoint, "ingest", "--select", "customers"))
    assert re.search(r"customers +ok .* binlog rows +2 ", second), second
    checked = ok(s3_cli(config, s3_endpoint, "dq", "--select", "customers"))
    assert "customers                PASS" in checked, checked
    assert "hold the source's values" in checked  # the value check ran against silver on S3
    status = ok(s3_cli(config, s3_endpoint, "status", "--select", "customers"))
    assert "customers" in status and "binlog" in status
    maintained = ok(s3_cli(config, s3_endpoint, "maintain", "--select", "customers"))
    assert "customers                bronze  files" in maintained and "silver  files" in maintained

    import boto3

    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    logs = s3.list_objects_v2(Bucket=BUCKET, Prefix="lake/silver/customers/_delta_log/")
    assert logs.get("KeyCount", 0) > 0
    assert os.environ.get("AWS_ACCESS_KEY_ID") != "testing"  # the keys went to the CLI only

def _assert_committed_as_the_tasks_wrote_them(endpoint: str, table: str, stats: list[str]) -> None:
    """The snapshot's files were written by the tasks into the table's folder and committed from
    what they reported, not read back and written again by Spark: each file's statistics are the
    engine's own (``stats``: bronze's batch number, silver's integer key; a Spark write records
    every column) and its size is the object's."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    objects = {o["Key"]: o["Size"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=table)["Contents"]}
    adds = [json.loads(line)["add"]
            for key in sorted(k for k in objects if k.startswith(f"{table}_delta_log/") and k.endswith(".json"))
            for line in s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode().splitlines()
            if '"add"' in line]
    assert adds, "the snapshot committed no file"
    for add in adds:
        assert sorted(json.loads(add["stats"])["minValues"]) == stats, add
        assert objects[table + add["path"]] == add["size"], add

