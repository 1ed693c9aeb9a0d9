"""An ``s3a://`` lake on a Spark standalone cluster whose worker cannot see the project, its
``target/`` or the engine's source: the snapshot's tasks stage their files in the bucket (through
pyarrow) and the driver reads them there, the catch-up and ``dq`` run on the cluster, and dq's
value check finds silver equal to the source.

Opt-in with the other ``s3`` tests (``make test-s3``): hadoop-aws's first download is 642 MB."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator

import pytest

from .conftest import PROJECT_ROOT
from .helpers import run_source_sql
from .test_cli import cli_command, project_dir
from .test_cluster_executors import _python
from .test_s3_lake import (  # noqa: F401 - s3_endpoint is a fixture
    BUCKET,
    HADOOP_AWS,
    _assert_committed_as_the_tasks_wrote_them,
    ok,
    s3_endpoint,
)
from .test_standalone_cluster import ENGINE_SOURCE, Cluster, _env

pytestmark = [pytest.mark.integration, pytest.mark.s3]

KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


@pytest.fixture
def s3_cluster(config, tmp_path, monkeypatch, s3_endpoint) -> Iterator[Cluster]:  # noqa: F811
    folder = tmp_path / "cluster"
    folder.mkdir()
    config.target_dir.mkdir(parents=True, exist_ok=True)
    for name, value in KEYS.items():  # the worker's own credentials, as an instance role gives them
        monkeypatch.setenv(name, value)
    started = Cluster(folder, [PROJECT_ROOT, config.target_dir, ENGINE_SOURCE])
    yield started
    started.stop()


def _lakehouse(config, cluster: Cluster, endpoint: str, python: str, *args: str) -> subprocess.CompletedProcess:
    command, env = cli_command(config, *args, lake_root=f"s3a://{BUCKET}/lake")
    project_file = project_dir(config) / "lakehouse_project.yml"
    conf = {"spark.pyspark.python": python, "spark.executor.memory": "1g", "spark.executor.cores": "1",
            "spark.jars.packages": HADOOP_AWS, "spark.hadoop.fs.s3a.endpoint": endpoint,
            "spark.hadoop.fs.s3a.path.style.access": "true", "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.attempts.maximum": "1", "spark.hadoop.fs.s3a.retry.limit": "1"}
    project_file.write_text(project_file.read_text().replace("  conf: {}", "  conf: " + json.dumps(conf)))
    env = {**_env(), **KEYS, "PYTHONPATH": env["PYTHONPATH"], "SPARK_MASTER": cluster.master_url}
    return subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=1800, env=env)


def test_an_s3a_lake_is_snapshotted_caught_up_and_checked_on_a_worker_that_cannot_see_the_project(
        config, mariadb, s3_endpoint, s3_cluster, tmp_path):  # noqa: F811
    assert s3_cluster.seen.read_text() == "", "the worker saw the project folder"
    python = _python(tmp_path / "worker-python", with_requirements=True)

    snapshot = ok(_lakehouse(config, s3_cluster, s3_endpoint, python, "ingest", "--select", "customers"))
    assert re.search(r"customers +ok +snapshot rows +400 ", snapshot), snapshot
    _assert_committed_as_the_tasks_wrote_them(s3_endpoint, "lake/bronze/customers/", ["_batch"])
    _assert_committed_as_the_tasks_wrote_them(s3_endpoint, "lake/silver/customers/", ["customer_id"])
    run_source_sql(mariadb, config.source.database,
                   "UPDATE customers SET full_name = 'On S3' WHERE customer_id <= 3;\n"
                   "DELETE FROM customers WHERE customer_id = 4;")
    catch_up = ok(_lakehouse(config, s3_cluster, s3_endpoint, python, "ingest", "--select", "customers"))
    assert re.search(r"customers +ok .* binlog rows +4 ", catch_up), catch_up
    checked = ok(_lakehouse(config, s3_cluster, s3_endpoint, python, "dq", "--select", "customers"))
    assert "customers                PASS" in checked and "hold the source's values" in checked, checked

    import boto3

    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    staged = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="lake/_staging/").get("Contents", [])]
    # pyarrow keeps an empty marker object for a folder whose last file it deleted ("customers/").
    assert [k for k in staged if not k.endswith("/")] == [], "the batch's staged files are removed after its commit"
    data = s3.list_objects_v2(Bucket=BUCKET, Prefix="lake/bronze/customers/")
    assert any(o["Key"].endswith(".parquet") for o in data.get("Contents", []))

