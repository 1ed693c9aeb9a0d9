from {{ cookiecutter.package_name }}.engine.source.preflight import grant_problems, settings_problems

GOOD = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL"}


def test_a_source_set_up_for_change_capture_has_no_problems():
    assert settings_problems(GOOD) == []


def test_each_wrong_binlog_setting_is_named_with_its_fix():
    problems = settings_problems({**GOOD, "binlog_format": "MIXED", "binlog_row_metadata": "MINIMAL"})
    assert len(problems) == 2
    assert "binlog_format is MIXED" in problems[0] and "binlog_format=ROW" in problems[0]
    assert "binlog_row_metadata=FULL" in problems[1]


def test_binlog_off_and_compression_are_reported():
    problems = settings_problems({**GOOD, "log_bin": "OFF", "binlog_transaction_compression": "ON"})
    assert any("log_bin is OFF" in p for p in problems)
    assert any("binlog_transaction_compression" in p for p in problems)


def test_missing_replication_grants_are_named():
    problems = grant_problems(["GRANT SELECT ON `demo`.* TO `u`@`%`"])
    assert any("REPLICATION SLAVE" in p for p in problems)
    assert any("REPLICATION CLIENT" in p for p in problems)


def test_mariadb_binlog_monitor_counts_as_replication_client():
    grants = ["GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `u`@`h`", "GRANT SELECT ON `demo`.* TO `u`@`h`"]
    assert grant_problems(grants) == []
