"""Lake failures read from a Spark error's cause chain become one configuration line naming
the fix. The chains are the first lines S3A gave against an S3-compatible server."""

from __future__ import annotations

from lakehouse_engine.errors import ConfigError
from lakehouse_engine.failures import hadoop_version, lake_config_error

LAKE = "s3a://bucket/lake"
LOG = f"{LAKE}/bronze/customers/_delta_log"
NO_CREDENTIALS = (
    f"AccessDeniedException: {LOG}: org.apache.hadoop.fs.s3a.auth.NoAuthWithAWSException: No AWS "
    "Credentials provided by TemporaryAWSCredentialsProvider SimpleAWSCredentialsProvider "
    "EnvironmentVariableCredentialsProvider IAMInstanceCredentialsProvider : "
    "software.amazon.awssdk.core.exception.SdkClientException: Unable to load credentials from system settings.",
    "NoAuthWithAWSException: No AWS Credentials provided by TemporaryAWSCredentialsProvider",
    "SdkClientException: Unable to load credentials from system settings. Access key must be specified "
    "either via environment variable (AWS_ACCESS_KEY_ID) or system property (aws.accessKeyId).",
)
REFUSED_KEY = (
    f"AccessDeniedException: {LOG}: listObjects() on {LOG}: software.amazon.awssdk.services.s3.model."
    "S3Exception: The AWS Access Key Id you provided does not exist in our records. (Service: S3, "
    "Status Code: 403, Request ID: r1):InvalidAccessKeyId",
    "S3Exception: The AWS Access Key Id you provided does not exist in our records. (Service: S3, "
    "Status Code: 403, Request ID: r1)",
)


def test_no_aws_credentials_names_the_environment_variables():
    error = lake_config_error(NO_CREDENTIALS, LAKE, "deltalog.delta_log")
    assert isinstance(error, ConfigError)
    assert str(error) == (
        f"no AWS credentials for lake_root {LAKE} (in deltalog.delta_log): export AWS_ACCESS_KEY_ID "
        "and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones), or run where an "
        "instance or container role provides them"
    )


def test_refused_credentials_on_an_object_store_say_check_the_credentials_not_the_folder():
    message = str(lake_config_error(REFUSED_KEY, LAKE, "deltalog.delta_log"))
    assert message.startswith(f"cannot access lake_root {LAKE} (in deltalog.delta_log): S3Exception: ")
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in message
    assert "folder writable" not in message and "\n" not in message


def test_an_unwritable_local_lake_still_names_the_folder():
    causes = ("AccessDeniedException: /data/lake/bronze/t/_delta_log",)
    message = str(lake_config_error(causes, "/data/lake", "bronze.append"))
    assert message == (
        "cannot write lake_root /data/lake (in bronze.append): AccessDeniedException: "
        "/data/lake/bronze/t/_delta_log; make the lake folder writable for this user, or change "
        "lake_root in lakehouse_project.yml"
    )


def test_a_missing_s3a_filesystem_names_hadoop_aws_at_sparks_hadoop_version():
    causes = ('UnsupportedFileSystemException: No FileSystem for scheme "s3a"',)
    message = str(lake_config_error(causes, LAKE, "paths.check_filesystem"))
    assert f"'org.apache.hadoop:hadoop-aws:{hadoop_version()}'" in message
    assert message.startswith(f"lake_root {LAKE} needs the S3A filesystem (hadoop-aws)")


def test_a_missing_gcs_connector_names_its_shaded_jar_and_the_filesystem_setting():
    causes = ('UnsupportedFileSystemException: No FileSystem for scheme "gs"',)
    message = str(lake_config_error(causes, "gs://bucket/lake", "paths.check_filesystem"))
    assert message.startswith("lake_root gs://bucket/lake needs Google's GCS connector")
    assert "gcs-connector-3.0.13-shaded.jar" in message and "spark.hadoop.fs.gs.impl" in message
    assert "\n" not in message


def test_a_connector_built_for_another_hadoop_failing_vectored_reads_names_the_parquet_setting():
    causes = ("SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
              "gs://bucket/lake/silver/t/part-00001.snappy.parquet.",
              "RuntimeException: java.lang.NoSuchMethodError: 'void org.apache.hadoop.fs.VectoredReadUtils."
              "validateRangeRequest(org.apache.hadoop.fs.FileRange)'",
              "NoSuchMethodError: 'void org.apache.hadoop.fs.VectoredReadUtils.validateRangeRequest("
              "org.apache.hadoop.fs.FileRange)'")
    message = str(lake_config_error(causes, "gs://bucket/lake", "silver.apply"))
    assert "'spark.hadoop.parquet.hadoop.vectored.io.enabled' to \"false\"" in message


def test_other_failures_are_not_lake_configuration():
    assert lake_config_error(("FileNotFoundException: /x (No such file or directory)",), LAKE, "dq") is None
