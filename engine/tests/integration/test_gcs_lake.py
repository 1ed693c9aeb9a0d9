"""A ``gs://`` lake root end to end, against a local GCS emulator (fake-gcs-server, built with Go)
and Google's Hadoop connector, through the CLI as a user runs it: snapshot, binlog catch-up, dq,
status, maintain.

Opt-in (``make test-gcs``, deselected from ``make test``): the emulator is built from the Go
module proxy and the connector (38 MB) comes from Maven Central, once each."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import PROJECT_ROOT
from .helpers import run_source_sql
from .servers import free_port, serving
from .test_cli import cli_command, project_dir
from .test_s3_lake import ok

pytestmark = [pytest.mark.integration, pytest.mark.gcs]

BUCKET = "lake-bucket"
EMULATOR = "github.com/fsouza/fake-gcs-server@v1.56.1"
CONNECTOR = ("https://repo1.maven.org/maven2/com/google/cloud/bigdataoss/gcs-connector/3.0.13/"
             "gcs-connector-3.0.13-shaded.jar")  # the newest shaded build Maven Central serves (see the README)
TOOLS = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lakehouse-tests"


def _emulator() -> Path:
    binary = TOOLS / "bin" / "fake-gcs-server"
    if not binary.exists():
        subprocess.run(["go", "install", EMULATOR], check=True, timeout=1200,
                       env={**os.environ, "GOBIN": str(binary.parent)})
    return binary


def _connector() -> Path:
    jar = TOOLS / "jars" / CONNECTOR.rsplit("/", 1)[1]
    if not jar.exists():
        jar.parent.mkdir(parents=True, exist_ok=True)
        partial = jar.with_suffix(".part")
        urllib.request.urlretrieve(CONNECTOR, partial)
        partial.replace(jar)
    return jar


@pytest.fixture
def gcs_endpoint() -> Iterator[str]:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with serving([str(_emulator()), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
                               "-backend", "memory", "-public-host", f"127.0.0.1:{port}"], port):
        create = urllib.request.Request(f"{endpoint}/storage/v1/b?project=test", method="POST",
                                        data=json.dumps({"name": BUCKET}).encode(),
                                        headers={"Content-Type": "application/json"})
        urllib.request.urlopen(create, timeout=10).close()
        yield endpoint


def gcs_cli(config, endpoint: str, *args: str) -> subprocess.CompletedProcess:
    """The CLI on a gs:// lake, configured as the generated README's "A lake on GCS" says."""
    command, env = cli_command(config, *args, lake_root=f"gs://{BUCKET}/lake")
    project_file = project_dir(config) / "lakehouse_project.yml"
    project_file.write_text(project_file.read_text().replace("  conf: {}", f"""  conf:
    spark.jars: {_connector()}
    spark.hadoop.fs.gs.impl: com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem
    spark.hadoop.fs.AbstractFileSystem.gs.impl: com.google.cloud.hadoop.fs.gcs.GoogleHadoopFS
    spark.hadoop.parquet.hadoop.vectored.io.enabled: "false"
    spark.hadoop.fs.gs.storage.root.url: {endpoint}/
    spark.hadoop.fs.gs.auth.type: UNAUTHENTICATED
    spark.hadoop.fs.gs.project.id: test"""))
    return subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=1800, env=env)


def test_a_gs_lake_takes_a_snapshot_the_binlog_checks_status_and_maintenance(config, mariadb, gcs_endpoint):
    assert "conf: {}" in (PROJECT_ROOT / "lakehouse_project.yml").read_text()  # what gcs_cli rewrites
    first = ok(gcs_cli(config, gcs_endpoint, "ingest", "--select", "customers"))
    assert "customers " in first and " ok " in first
    _assert_committed_as_the_tasks_wrote_them(gcs_endpoint, "lake/bronze/customers/", ["_batch"])
    _assert_committed_as_the_tasks_wrote_them(gcs_endpoint, "lake/silver/customers/", ["customer_id"])
    run_source_sql(mariadb, config.source.database, """
        UPDATE customers SET full_name = 'On GCS' WHERE customer_id = 3;
        DELETE FROM customers WHERE customer_id = 4;
    """)
    second = ok(gcs_cli(config, gcs_endpoint, "ingest", "--select", "customers"))
    assert "customers " in second and "binlog rows" in second, second
    checked = ok(gcs_cli(config, gcs_endpoint, "dq", "--select", "customers"))
    assert "customers                PASS" in checked, checked
    assert "hold the source's values" in checked  # the value check ran against silver on GCS
    status = ok(gcs_cli(config, gcs_endpoint, "status", "--select", "customers"))
    assert "customers" in status and "binlog" in status
    maintained = ok(gcs_cli(config, gcs_endpoint, "maintain", "--select", "customers"))
    assert "customers                bronze  files" in maintained and "silver  files" in maintained


def _assert_committed_as_the_tasks_wrote_them(endpoint: str, table: str, stats: list[str]) -> None:
    """The snapshot's files were written by the tasks through pyarrow's GCS file system into the
    table's folder and committed from what they reported: each file's statistics are the engine's
    own (a Spark write records every column) and its size is the object's."""
    from pyarrow import fs

    gcs = fs.GcsFileSystem(anonymous=True, scheme="http", endpoint_override=endpoint.removeprefix("http://"))
    found = gcs.get_file_info(fs.FileSelector(f"{BUCKET}/{table}", recursive=True))
    sizes = {info.path.removeprefix(f"{BUCKET}/{table}"): info.size for info in found if info.type == fs.FileType.File}
    adds = []
    for name in sorted(n for n in sizes if n.startswith("_delta_log/") and n.endswith(".json")):
        with gcs.open_input_stream(f"{BUCKET}/{table}{name}") as log:
            adds += [json.loads(line)["add"] for line in log.read().decode().splitlines() if '"add"' in line]
    assert adds, "the snapshot committed no file"
    for add in adds:
        assert sorted(json.loads(add["stats"])["minValues"]) == stats, add
        assert sizes[add["path"]] == add["size"], add
