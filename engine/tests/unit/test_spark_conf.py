"""How the project's spark.conf combines with the engine's own Spark settings."""

from __future__ import annotations

import fixture_project

from lakehouse_engine.config.project import load_project
from lakehouse_engine.sink import localfs, logstore
from lakehouse_engine.sink.spark import (
    LONG_RUNNING_JVM_OPTIONS,
    _merged_conf,
    _save_manifest,
    jar_manifest,
    local_jvm_options,
    submit_line,
)

PROJECT_ROOT = fixture_project.PROJECT_ROOT
OURS = {"spark.jars.packages": "io.delta:delta-spark_4.1_2.13:4.4.0",
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile=x",
        "spark.sql.shuffle.partitions": "4"}


def test_project_jvm_options_follow_ours_so_they_win_and_keep_our_log_configuration():
    merged = _merged_conf(OURS, {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=4"})
    assert merged["spark.driver.extraJavaOptions"] == (
        "-XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile=x -XX:TieredStopAtLevel=4")


def test_project_packages_are_added_to_the_delta_jars_not_put_in_their_place():
    merged = _merged_conf(OURS, {"spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.4.1"})
    assert merged["spark.jars.packages"] == "io.delta:delta-spark_4.1_2.13:4.4.0,org.apache.hadoop:hadoop-aws:3.4.1"


def test_other_project_settings_replace_ours():
    assert _merged_conf(OURS, {"spark.sql.shuffle.partitions": "64"})["spark.sql.shuffle.partitions"] == "64"
    assert _merged_conf(OURS, {})["spark.sql.shuffle.partitions"] == "4"


def test_a_collector_chosen_by_the_project_replaces_ours_instead_of_clashing_with_it():
    assert "-XX:+UseSerialGC" in local_jvm_options({})
    assert "-XX:+UseSerialGC" in local_jvm_options({"spark.driver.extraJavaOptions": "-Xss4m"})
    chosen = local_jvm_options({"spark.driver.extraJavaOptions": "-Xss4m -XX:+UseG1GC"})
    assert "GC" not in chosen and "-XX:TieredStopAtLevel=1" in chosen


def test_short_runs_use_c1_only_and_a_long_running_follow_keeps_the_optimising_compiler():
    assert "-XX:TieredStopAtLevel=1" in local_jvm_options({}).split()
    long_running = local_jvm_options({}, long_running=True).split()
    assert "-XX:TieredStopAtLevel=1" not in long_running and "-XX:+UseSerialGC" in long_running
    assert local_jvm_options({"spark.driver.extraJavaOptions": "-XX:+UseG1GC -Xms1g"}, long_running=True) == \
        LONG_RUNNING_JVM_OPTIONS


def test_a_local_driver_starts_with_a_small_heap_unless_the_project_sets_its_own():
    """The JVM's default initial heap (1/64 of the machine's memory) was touched whole by a short
    ingest; the heap still grows to spark.driver.memory as the run needs."""
    assert "-Xms64m" in local_jvm_options({}).split()
    assert "-Xms64m" in local_jvm_options({}, long_running=True).split()
    assert "-Xms64m" not in local_jvm_options({"spark.driver.extraJavaOptions": "-Xms512m"}).split()
    assert "-Xms64m" not in local_jvm_options({"spark.driver.extraJavaOptions": "-XX:InitialHeapSize=1g"}).split()


def test_a_long_running_driver_does_not_wake_every_50_ms_to_sample_performance_data():
    assert "-XX:-UsePerfData" in local_jvm_options({}, long_running=True).split()
    assert "-XX:-UsePerfData" not in local_jvm_options({}).split()  # short runs keep jps and jstat


def test_a_long_running_driver_checks_for_monitor_deflation_and_cleanup_safepoints_every_10_s():
    options = local_jvm_options({}, long_running=True).split()
    unlocked = options.index("-XX:+UnlockDiagnosticVMOptions")  # the flags after it are diagnostic ones
    assert options.index("-XX:AsyncDeflationInterval=10000") > unlocked
    assert options.index("-XX:GuaranteedSafepointInterval=10000") > unlocked
    assert "-XX:AsyncDeflationInterval=10000" not in local_jvm_options({}).split()


def test_local_delta_logs_are_listed_through_the_engines_store_whose_jar_ships_with_the_engine():
    wanted = logstore.settings({}, local_master=True, lake_root="/data/lake")
    assert wanted == {"spark.jars": str(logstore.JAR), "spark.delta.logStore.file.impl": logstore.STORE_CLASS}
    assert logstore.JAR.is_file()
    merged = _merged_conf({"spark.jars": "file:///cache/delta-spark.jar"}, wanted)
    assert merged["spark.jars"] == f"file:///cache/delta-spark.jar,{logstore.JAR}"  # beside Delta's, not instead


def test_a_project_that_chose_a_log_store_keeps_it():
    for chosen in ({"spark.delta.logStore.file.impl": "com.example.Store"},
                   {"spark.delta.logStore.class": "com.example.Store"}):
        assert logstore.settings(chosen, local_master=True, lake_root="/data/lake") == {}


def test_a_cluster_driver_keeps_deltas_local_store_it_may_not_have_the_engines_jar():
    assert logstore.settings({}, local_master=False, lake_root="/mnt/shared/lake") == {}


def test_a_local_driver_reads_and_writes_files_through_the_no_fork_file_system_on_its_class_path():
    wanted = localfs.settings({}, local_driver=True)
    assert wanted == {"spark.driver.defaultExtraClassPath": str(localfs.JAR),
                      "spark.hadoop.fs.file.impl": "lakehouse.hadoop.NoForkLocalFileSystem",
                      "spark.hadoop.fs.AbstractFileSystem.file.impl": "lakehouse.hadoop.NoForkLocalFs"}
    assert localfs.JAR.is_file() and localfs.JAR != logstore.JAR  # the log store needs Delta's loader
    # Spark puts the default class path before extraClassPath, which stays the project's (or its
    # spark-defaults.conf's); one that sets the default class path too keeps ours beside it.
    merged = _merged_conf(wanted, {"spark.driver.extraClassPath": "/opt/extra.jar"})
    assert merged["spark.driver.extraClassPath"] == "/opt/extra.jar"
    merged = _merged_conf(wanted, {"spark.driver.defaultExtraClassPath": "/opt/default.jar"})
    assert merged["spark.driver.defaultExtraClassPath"] == f"{localfs.JAR}:/opt/default.jar"


def test_a_driver_the_engine_does_not_start_or_a_project_with_its_own_local_file_system_keeps_hadoops():
    assert localfs.settings({}, local_driver=False) == {}  # spark-submit's driver, or a cluster's
    for chosen in ({"spark.hadoop.fs.file.impl": "com.example.Fs"},
                   {"spark.hadoop.fs.AbstractFileSystem.file.impl": "com.example.Fs"}):
        assert localfs.settings(chosen, local_driver=True) == {}


def test_without_the_no_fork_jar_a_local_driver_warns_and_keeps_hadoops_file_system(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(localfs, "JAR", tmp_path / "missing.jar")
    assert localfs.settings({}, local_driver=True) == {}
    assert "missing.jar is missing" in caplog.text


def test_an_s3a_lakes_logs_are_listed_from_the_listings_first_key_on_any_master():
    for local in (True, False):
        wanted = logstore.settings({}, local_master=local, lake_root="s3a://bucket/lake")
        assert wanted["spark.hadoop.delta.enableFastS3AListFrom"] == "true"
    assert "spark.hadoop.delta.enableFastS3AListFrom" not in logstore.settings(
        {}, local_master=True, lake_root="gs://bucket/lake")


def test_an_s3a_lake_on_the_version_1_list_api_or_with_its_own_choice_keeps_deltas_s3_listing():
    for theirs in ({"spark.hadoop.fs.s3a.list.version": "1"},
                   {"spark.hadoop.delta.enableFastS3AListFrom": "false"}):
        wanted = logstore.settings(theirs, local_master=False, lake_root="s3a://bucket/lake")
        assert "spark.hadoop.delta.enableFastS3AListFrom" not in wanted


def test_spark_submit_of_a_local_master_lists_through_the_engines_store_and_a_clusters_does_not():
    def line(master: str) -> list[str]:
        config = load_project(PROJECT_ROOT, env={"MYSQL_PASSWORD": "x", "SPARK_MASTER": master})
        return submit_line(config, ["ingest", "--all"])

    local = line("local[2]")
    assert str(logstore.JAR) in local[local.index("--jars") + 1].split(",")
    assert f"spark.delta.logStore.file.impl={logstore.STORE_CLASS}" in local
    cluster = line("spark://head:7077")
    assert not any(logstore.STORE_CLASS in arg or str(logstore.JAR) in arg for arg in cluster)


def test_the_engines_store_jar_is_not_saved_with_the_delta_jars(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _save_manifest(f"file:///ivy/jars/io.delta_delta-spark.jar,file://{logstore.JAR}")
    assert jar_manifest().read_text().splitlines() == ["file:///ivy/jars/io.delta_delta-spark.jar"]
