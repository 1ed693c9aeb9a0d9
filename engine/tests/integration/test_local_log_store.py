"""The engine's log store for local tables (``sink/logstore.py``, ``engine/java``): Delta uses it,
it lists what Delta's own store lists, and the shipped jar is its source's."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError

from lakehouse_engine.sink import localfs, logstore
from lakehouse_engine.sink.spark import jvm_view

pytestmark = pytest.mark.integration

JAVA = Path(__file__).parents[2] / "java"
SOURCE = JAVA / "lakehouse" / "delta" / "NamesFirstLocalLogStore.java"


def _listing(jvm, store, log: Path, start: str, conf) -> list[tuple[str, int, bool]]:
    """What ``store`` lists of the folder ``log`` from the name ``start`` on."""
    statuses = store.listFrom(jvm.org.apache.hadoop.fs.Path(str(log / start)), conf)  # as Delta builds it
    found = []
    while statuses.hasNext():
        status = statuses.next()
        found.append((status.getPath().toString(), status.getLen(), status.isDirectory()))
    return found


@pytest.fixture()
def jvm(spark):
    return jvm_view(spark)


def test_delta_lists_a_local_tables_log_through_the_engines_names_first_store(spark, jvm, tmp_path):
    table = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(table)
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table)
    delegate = log.store().getDelegate(log.logPath())  # Delta's adaptor of a Java store
    assert delegate.logStoreImpl().getClass().getName() == logstore.STORE_CLASS
    # It writes as the store Delta takes for file: when none is set (a commit never replaces one).
    assert delegate.logStoreImpl().getClass().getSuperclass().getName() == "io.delta.storage.HDFSLogStore"
    assert jvm.org.apache.spark.sql.delta.storage.DelegatingLogStore.getDefaultLogStoreClassName("file").isEmpty()
    assert jvm.org.apache.spark.sql.delta.storage.DelegatingLogStore.defaultHDFSLogStoreClassName() == (
        "io.delta.storage.HDFSLogStore")


@pytest.mark.parametrize("folder", ["t", "a lake/d\u00e9j\u00e0 vu"])
def test_the_names_first_listing_is_deltas_own_listing_of_the_same_folder(spark, jvm, tmp_path, folder):
    table = tmp_path / folder
    for i in range(12):  # a checkpoint at version 10 (Delta's default interval), commits after it
        spark.range(i, i + 1).write.format("delta").mode("append").save(str(table))
    log = table / "_delta_log"
    (log / ".00000000000000000011.json.tmp").write_text("")  # a hidden leftover of an interrupted write
    (log / "00000000000000000005.json.0123.tmp").write_text("")  # a visible one among the commits
    (log / "_commits").mkdir()  # a folder in the log
    (log / "00000000000000000011.json:copy").write_text("")  # a colon: a name, not a scheme
    assert any(p.name.startswith(".") and p.name.endswith(".crc") for p in log.iterdir())  # Hadoop's own checksums
    conf = spark._jsc.hadoopConfiguration()
    ours = jvm.lakehouse.delta.NamesFirstLocalLogStore(conf)
    deltas = jvm.io.delta.storage.HDFSLogStore(conf)  # Delta's store for file: when none is set
    for start in ("00000000000000000000", "00000000000000000005", "00000000000000000010.checkpoint",
                  "00000000000000000011.json", "00000000000000000099", "_last_checkpoint", ".0"):
        expected = _listing(jvm, deltas, log, start, conf)
        assert _listing(jvm, ours, log, start, conf) == expected, start
    # The checkpoint, commits 10 and 11, _last_checkpoint and more: a listing that is not empty.
    assert len(_listing(jvm, ours, log, "00000000000000000010", conf)) >= 4


def test_listing_a_missing_log_folder_fails_as_deltas_store_does(spark, jvm, tmp_path):
    conf = spark._jsc.hadoopConfiguration()
    for store in (jvm.lakehouse.delta.NamesFirstLocalLogStore(conf), jvm.io.delta.storage.HDFSLogStore(conf)):
        with pytest.raises(Py4JJavaError) as failed:
            _listing(jvm, store, tmp_path / "none" / "_delta_log", "00000000000000000000", conf)
        assert failed.value.java_exception.getClass().getName() == "java.io.FileNotFoundException"


@pytest.mark.skipif(shutil.which("javac") is None, reason="javac (a JDK) is not installed: no rebuild to compare")
def test_the_shipped_jars_are_built_from_their_source(spark, jvm, tmp_path):
    import pyspark

    # The delta-storage jar this session loaded Delta's log stores from.
    loaded_from = jvm.io.delta.storage.LogStore._java_lang_class.getProtectionDomain().getCodeSource()
    storage = loaded_from.getLocation().getPath()
    (hadoop,) = (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar")
    sources = sorted(str(p) for p in JAVA.rglob("*.java"))
    subprocess.run(["javac", "--release", "17", "-cp", f"{storage}:{hadoop}", "-d", str(tmp_path), *sources],
                   check=True, capture_output=True)
    built = {str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*.class")}
    shipped = {}
    for shipped_jar in (logstore.JAR, localfs.JAR):
        with zipfile.ZipFile(shipped_jar) as jar:
            shipped |= {name: jar.read(name) for name in jar.namelist()}
    assert "lakehouse/hadoop/NoForkRawLocalFileSystem.class" in built
    assert built == shipped, "a jar is older than its source: rebuild them with engine/java/build.sh"
