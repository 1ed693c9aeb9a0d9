"""What Spark executors on other hosts get: the engine's code shipped as a zip, the Python the
project names, and one line when that Python lacks a module."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from lakehouse_engine import errors
from lakehouse_engine.sink import shipping
from lakehouse_engine.sink.columnmap import StaleColumns
from lakehouse_engine.sink.log.transaction import AlreadyCommitted
from lakehouse_engine.sink.objectstore import object_path, unread_settings
from lakehouse_engine.sink.s3store import S3Store
from lakehouse_engine.snapshot.chunktask import batch_tag
from lakehouse_engine.snapshot.reader import nothing_committed, remove_batch_files, task_error
from lakehouse_engine.snapshot.staging import Staging, staging_area

MISSING = """org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 0.0 failed 4 times
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/opt/spark/python/lib/pyspark.zip/pyspark/serializers.py", line 193, in _read_with_length
    return self.loads(obj)
ModuleNotFoundError: No module named 'pymysql'

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:624)
\tat org.apache.spark.util.SparkErrorUtils.tryWithSafeFinally(SparkErrorUtils.scala:64)
"""


def test_the_executors_python_is_the_projects_setting_then_the_environment_then_the_default():
    conf = {"spark.pyspark.python": "/opt/conda/bin/python"}
    assert shipping.executor_python(conf, "spark://master:7077", "/env/python") == "/opt/conda/bin/python"
    assert shipping.executor_python({}, "spark://master:7077", "/env/python") == "/env/python"
    assert shipping.executor_python({}, "local[2]", None) == sys.executable  # beside the driver: its venv
    assert shipping.executor_python({}, "spark://master:7077", None) is None  # never the driver's venv path
    assert shipping.executor_python({}, "local-cluster[2,1,1024]", None) is None


def test_only_a_local_master_runs_executors_in_the_drivers_process():
    assert shipping.is_local_master("local") and shipping.is_local_master("local[*]")
    for master in ("local-cluster[1,1,1024]", "spark://h:7077", "yarn", "k8s://https://k:443"):
        assert not shipping.is_local_master(master)


def test_the_engine_archive_holds_the_package_and_imports_from_itself(tmp_path):
    archive = shipping.engine_archive(tmp_path)
    assert shipping.engine_archive(tmp_path) == archive  # made once per version and content
    names = zipfile.ZipFile(archive).namelist()
    assert "lakehouse_engine/snapshot/chunktask.py" in names and "lakehouse_engine/__init__.py" in names
    assert not any("__pycache__" in n for n in names)
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import lakehouse_engine.snapshot.chunktask as m; "
             "print(m.__file__)")
    done = subprocess.run([sys.executable, "-c", probe, str(archive)], capture_output=True, text=True, check=True)
    assert done.stdout.startswith(str(archive))


def test_a_module_missing_on_the_executors_is_one_configuration_line_naming_it_and_the_fix():
    error = task_error(Exception(MISSING), "customers")
    assert type(error) is errors.ConfigError and "\n" not in str(error)
    assert "ModuleNotFoundError: No module named 'pymysql' on the executors" in str(error)
    assert "spark.pyspark.python" in str(error) and "pip install lakehouse-engine" in str(error)


def test_an_executor_python_that_does_not_start_names_the_setting():
    text = ('java.io.IOException: Cannot run program "/home/me/project/.venv/bin/python": error=2, '
            "No such file or directory\n\tat java.base/java.lang.ProcessBuilder.start(ProcessBuilder.java:1143)")
    error = task_error(Exception(text), "orders")
    assert type(error) is errors.ConfigError
    assert "cannot run '/home/me/project/.venv/bin/python': set spark.pyspark.python" in str(error)


def test_a_python_that_could_not_be_forked_for_lack_of_memory_stays_a_retriable_read_error():
    text = 'java.io.IOException: Cannot run program "/usr/bin/python3": error=12, Cannot allocate memory'
    assert type(task_error(Exception(text), "orders")) is errors.SourceUnavailableError


def test_snapshot_files_stage_in_a_local_lake_in_an_object_stores_bucket_on_any_master_and_elsewhere_refuse_in_one_line(
        tmp_path):
    target = tmp_path / "target"
    conf = {"spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000", "spark.hadoop.fs.s3a.path.style.access": "true"}
    assert staging_area("/data/lake", target, "spark://m:7077", conf) == Staging("/data/lake/_staging")
    assert staging_area("s3a://bucket/lake", target, "local[*]", conf).root == "s3a://bucket/lake/_staging"
    per_bucket = {**conf, "spark.hadoop.fs.s3a.bucket.bucket.endpoint": "http://other:9000"}
    assert staging_area("s3a://bucket/lake", target, "local[*]", per_bucket) == Staging(str(target / "staging"))
    other_bucket = {**conf, "spark.hadoop.fs.s3a.bucket.logs.endpoint": "http://other:9000"}
    assert staging_area("s3a://bucket/lake", target, "local[*]", other_bucket).root == "s3a://bucket/lake/_staging"
    try:  # on a cluster the tasks would write with other settings than Spark's: refused in one line
        staging_area("s3a://bucket/lake", target, "spark://m:7077", per_bucket)
    except errors.ConfigError as error:
        assert "\n" not in str(error) and "fs.s3a.bucket.bucket.endpoint" in str(error)
    else:
        raise AssertionError("a cluster's tasks would ignore the bucket's own endpoint")
    in_bucket = staging_area("s3a://bucket/lake/", target, "spark://m:7077", conf)
    assert in_bucket.root == "s3a://bucket/lake/_staging"
    assert in_bucket.store == S3Store(endpoint="127.0.0.1:9000", https=False, path_style=True)
    assert in_bucket.batch_folder("orders", "run-1", 3) == "s3a://bucket/lake/_staging/orders/run-1-3"
    assert staging_area("gs://bucket/lake", target, "spark://m:7077", conf).root == "gs://bucket/lake/_staging"
    abfss = "abfss://c@account.dfs.core.windows.net/lake"
    assert staging_area(abfss, target, "spark://m:7077", conf).root == f"{abfss}/_staging"
    try:
        staging_area("hdfs://namenode/lake", target, "spark://m:7077", conf)
    except errors.ConfigError as error:
        assert "\n" not in str(error) and "spark.master local[*]" in str(error) and "s3a://" in str(error)
    else:
        raise AssertionError("a cluster's tasks would stage on the driver's disk")


def test_tasks_reach_the_bucket_with_s3as_own_settings_and_keys_never_show_in_a_repr():
    store = S3Store.from_spark_conf([
        ("spark.hadoop.fs.s3a.endpoint", "minio.internal:9000"),
        ("spark.hadoop.fs.s3a.connection.ssl.enabled", "false"),
        ("spark.hadoop.fs.s3a.endpoint.region", "eu-west-1"), ("spark.hadoop.fs.s3a.access.key", "AKIA-SECRET-ID"),
        ("spark.hadoop.fs.s3a.secret.key", "very-secret"), ("spark.executor.memory", "1g")])
    assert (store.endpoint, store.https, store.region) == ("minio.internal:9000", False, "eu-west-1")
    assert not store.path_style
    assert (store.access_key, store.secret_key) == ("AKIA-SECRET-ID", "very-secret")
    assert "SECRET" not in repr(store) and "secret" not in repr(store)
    assert S3Store.from_spark_conf({}) == S3Store()  # AWS itself, keys from the default chain
    assert S3Store.from_spark_conf({"spark.hadoop.fs.s3a.endpoint": "https://s3.example:443"}).https
    assert object_path("s3a://bucket/lake/_staging/t/") == "bucket/lake/_staging/t"


def test_only_s3a_settings_pyarrow_cannot_honour_are_reported_unread():
    s3a = "spark.hadoop.fs.s3a."
    assert unread_settings("s3a://b/lake", {f"{s3a}endpoint": "http://m:9000", f"{s3a}access.key": "k",
                            f"{s3a}aws.credentials.provider":
                                "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider, "
                                "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"}) == []
    assert unread_settings("s3a://logs/lake", [
        (f"{s3a}bucket.logs.endpoint", "x"), (f"{s3a}assumed.role.arn", "arn:aws:iam::1:role/r"),
        (f"{s3a}aws.credentials.provider", "com.example.VaultProvider"), ("spark.hadoop.fs.gs.project.id", "p")]) == [
        f"{s3a}bucket.logs.endpoint", f"{s3a}assumed.role.arn", f"{s3a}aws.credentials.provider"]



def test_only_errors_that_mean_a_commit_did_not_land_let_its_files_be_removed():
    assert nothing_committed(errors.ConcurrentRunError("another run committed batch 3"))
    assert nothing_committed(AlreadyCommitted("bronze:orders already committed version 3"))
    assert nothing_committed(StaleColumns("orders reads other columns"))
    # After Delta wrote the commit, a failed checkpoint or a lost JVM says nothing of the outcome.
    assert not nothing_committed(RuntimeError("An error occurred while calling o123.commit"))
    assert not nothing_committed(ConnectionResetError("py4j gateway gone"))


def test_a_failed_batchs_files_are_found_by_run_and_batch_and_no_other_file_is_removed(tmp_path):
    from pyarrow import fs

    bronze, silver = tmp_path / "bronze" / "orders", tmp_path / "silver" / "orders"
    (bronze / "_delta_log").mkdir(parents=True)
    silver.mkdir(parents=True)
    ours = [bronze / f"part-00000-{batch_tag('run-1', 3)}u1-c000.snappy.parquet",
            silver / f"part-00002-{batch_tag('run-1', 3)}u2-c000.snappy.parquet"]
    others = [bronze / f"part-00000-{batch_tag('run-1', 30)}u3-c000.snappy.parquet",
              bronze / f"part-00001-{batch_tag('run-1', 4)}u4-c000.snappy.parquet",
              bronze / f"part-00001-{batch_tag('run-2', 3)}u5-c000.snappy.parquet",
              bronze / "part-00000-5b1e-c000.snappy.parquet",  # an older engine's, or Spark's
              bronze / "_delta_log" / "00000000000000000003.json"]
    for path in ours + others:
        path.write_bytes(b"PAR1")
    remove_batch_files(fs.LocalFileSystem(), [f"file://{bronze}", f"file://{silver}"], "run-1", 3)
    assert [p for p in ours if p.exists()] == []
    assert [p for p in others if not p.exists()] == []
