"""What a snapshot's tasks and driver do in an ``abfss://`` lake through pyarrow, against Azurite's
blob service: write a file where the table's folder is, read its size back, remove a failed
batch's files and nothing else, and clean staging folders.

Spark's side (Hadoop's ABFS driver) is not exercised: no local emulator serves ABFS's Data Lake
API. Opt-in (``make test-azure``, deselected from ``make test``): Azurite comes from npm once."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs

from lakehouse_engine.sink.azurestore import AzureStore
from lakehouse_engine.sink.objectstore import object_path, store_for
from lakehouse_engine.snapshot.chunktask import batch_tag
from lakehouse_engine.snapshot.reader import remove_batch_files
from lakehouse_engine.snapshot.staging import Staging

from .servers import free_port, serving

pytestmark = [pytest.mark.azure]

AZURITE = "azurite@3.35.0"
TOOLS = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lakehouse-tests"
# Azurite's well-known development account (public, in Microsoft's documentation).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
LAKE = f"abfss://lake@{ACCOUNT}.dfs.core.windows.net/teams/lake"


def _azurite() -> Path:
    binary = TOOLS / "npm" / "node_modules" / ".bin" / "azurite-blob"
    if not binary.exists():
        binary.parent.parent.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--prefix", str(TOOLS / "npm"), AZURITE], check=True,
                       timeout=600)
    return binary


@pytest.fixture
def store(tmp_path) -> Iterator[AzureStore]:
    port = free_port()
    with serving([str(_azurite()), "--blobHost", "127.0.0.1", "--blobPort", str(port),
                               "--location", str(tmp_path / "azurite"), "--skipApiVersionCheck"], port):
        # The account key as the project's spark.conf gives it to ABFS; the emulator's address as a test's.
        found = store_for(LAKE, {f"spark.hadoop.fs.azure.account.key.{ACCOUNT}.dfs.core.windows.net": KEY})
        assert isinstance(found, AzureStore)
        ready = replace(found, emulator=f"127.0.0.1:{port}")
        ready.filesystem().create_dir("lake")
        yield ready


def _write(store: AzureStore, uri: str, rows: int) -> int:
    filesystem = store.filesystem()
    pq.write_table(pa.table({"id": list(range(rows))}), object_path(uri), filesystem=filesystem)
    return filesystem.get_file_info([object_path(uri)])[0].size


def test_tasks_write_into_the_tables_folder_and_a_failed_batch_loses_only_its_files(store):
    bronze, silver = f"{LAKE}/bronze/orders", f"{LAKE}/silver/orders"
    failed = [f"{bronze}/part-00000-{batch_tag('run-1', 3)}a-c000.snappy.parquet",
              f"{silver}/part-00000-{batch_tag('run-1', 3)}a-c000.snappy.parquet"]
    kept = [f"{bronze}/part-00000-{batch_tag('run-1', 30)}b-c000.snappy.parquet",
            f"{bronze}/part-00001-{batch_tag('run-2', 3)}c-c000.snappy.parquet"]
    sizes = {uri: _write(store, uri, 1000) for uri in failed + kept}
    assert all(size > 1000 for size in sizes.values())  # read back once written, as the driver commits them
    assert pq.read_table(object_path(kept[0]), filesystem=store.filesystem()).num_rows == 1000

    remove_batch_files(store, [bronze, silver], "run-1", 3)
    left = {info.path for info in store.filesystem().get_file_info(
        fs.FileSelector(object_path(f"{LAKE}/"), recursive=True)) if info.type == fs.FileType.File}
    assert left == {object_path(uri) for uri in kept}


def test_a_portable_batchs_staging_folder_is_emptied_and_a_dead_runs_is_removed_when_stale(store):
    staging = Staging(f"{LAKE}/_staging", store)
    batch = staging.batch_folder("orders", "run-1", 1)
    _write(store, f"{batch}/part-00000.parquet", 10)
    staging.reset(batch)
    assert store.filesystem().get_file_info(object_path(batch)).type == fs.FileType.NotFound
    dead = staging.batch_folder("orders", "run-0", 1)
    _write(store, f"{dead}/part-00000.parquet", 10)
    staging.remove_stale(staging.table_folder("orders"), now=time.time() + 3600)
    assert store.filesystem().get_file_info(object_path(f"{dead}/part-00000.parquet")).type == fs.FileType.File
    staging.remove_stale(staging.table_folder("orders"), now=time.time() + 2 * 24 * 3600)
    assert store.filesystem().get_file_info(object_path(dead)).type == fs.FileType.NotFound
