"""A Spark Connect client on an ``s3a://`` lake: the server (pyspark's ``SparkConnectServer`` with
the Delta jars, hadoop-aws and S3A's settings) writes the lake on a local S3 server (moto); the
snapshot's tasks stage in the bucket, the catch-up merges, and dq's value check passes.

Opt-in with the other ``s3`` tests (``make test-s3``): hadoop-aws's first download is 642 MB."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import pytest

from .helpers import run_source_sql
from .test_cli import cli_command
from .test_s3_lake import BUCKET, HADOOP_AWS, ok, s3_endpoint  # noqa: F401 - s3_endpoint is a fixture
from .test_spark_connect import ConnectServer, delta_jars

pytestmark = [pytest.mark.integration, pytest.mark.s3]

KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


@pytest.fixture
def s3_connect_server(spark, tmp_path, s3_endpoint) -> Iterator[ConnectServer]:  # noqa: F811
    s3a = {"endpoint": s3_endpoint, "path.style.access": "true", "connection.ssl.enabled": "false",
           "attempts.maximum": "1", "retry.limit": "1"}
    extra = ("--packages", HADOOP_AWS,
             *(arg for name, value in s3a.items() for arg in ("--conf", f"spark.hadoop.fs.s3a.{name}={value}")))
    server = ConnectServer(tmp_path, delta_jars(spark), extra, KEYS)
    yield server
    server.stop()


def _lakehouse(config, url: str, *args: str) -> subprocess.CompletedProcess:
    command, env = cli_command(config, *args, lake_root=f"s3a://{BUCKET}/lake")
    env = {**env, **KEYS, "SPARK_MASTER": url}  # the client's keys: it removes the staged files
    return subprocess.run(command, capture_output=True, text=True, timeout=1800, env=env)


def test_an_s3a_lake_is_snapshotted_caught_up_and_checked_through_spark_connect(
        config, mariadb, s3_endpoint, s3_connect_server):  # noqa: F811
    url = s3_connect_server.url
    snapshot = ok(_lakehouse(config, url, "ingest", "--select", "customers"))
    assert re.search(r"customers +ok +snapshot rows +400 ", snapshot), snapshot
    run_source_sql(mariadb, config.source.database,
                   "UPDATE customers SET full_name = 'On S3' WHERE customer_id <= 3;\n"
                   "DELETE FROM customers WHERE customer_id = 4;")
    catch_up = ok(_lakehouse(config, url, "ingest", "--select", "customers"))
    assert re.search(r"customers +ok .* binlog rows +4 ", catch_up), catch_up
    checked = ok(_lakehouse(config, url, "dq", "--select", "customers"))
    assert "customers                PASS" in checked and "hold the source's values" in checked, checked

    import boto3

    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    staged = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="lake/_staging/").get("Contents", [])]
    assert [k for k in staged if not k.endswith("/")] == [], "the batch's staged files are removed after its commit"
