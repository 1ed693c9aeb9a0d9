"""How the project's spark.conf combines with the engine's own Spark settings."""

from __future__ import annotations

from lakehouse_engine.sink.spark import LONG_RUNNING_JVM_OPTIONS, _merged_conf, local_jvm_options

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
    assert local_jvm_options({"spark.driver.extraJavaOptions": "-XX:+UseG1GC"}, long_running=True) == \
        LONG_RUNNING_JVM_OPTIONS


def test_a_long_running_driver_does_not_wake_every_50_ms_to_sample_performance_data():
    assert "-XX:-UsePerfData" in local_jvm_options({}, long_running=True).split()
    assert "-XX:-UsePerfData" not in local_jvm_options({}).split()  # short runs keep jps and jstat


def test_a_long_running_driver_checks_for_monitor_deflation_and_cleanup_safepoints_every_10_s():
    options = local_jvm_options({}, long_running=True).split()
    unlocked = options.index("-XX:+UnlockDiagnosticVMOptions")  # the flags after it are diagnostic ones
    assert options.index("-XX:AsyncDeflationInterval=10000") > unlocked
    assert options.index("-XX:GuaranteedSafepointInterval=10000") > unlocked
    assert "-XX:AsyncDeflationInterval=10000" not in local_jvm_options({}).split()
