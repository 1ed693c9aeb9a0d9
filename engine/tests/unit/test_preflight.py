from lakehouse_engine.source.preflight import grant_problems, preflight_message, settings_problems

GOOD = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL"}


def test_a_source_set_up_for_change_capture_has_no_problems():
    assert settings_problems(GOOD) == []


def test_each_wrong_binlog_setting_is_named_with_its_fix():
    problems = settings_problems({**GOOD, "binlog_format": "MIXED", "binlog_row_metadata": "MINIMAL"})
    assert [p.setting for p in problems] == ["binlog_format", "binlog_row_metadata"]
    assert "binlog_format is MIXED" in str(problems[0]) and "binlog_format=ROW" in str(problems[0])
    assert "binlog_row_metadata=FULL" in str(problems[1])


def test_binlog_off_and_compression_are_reported():
    problems = settings_problems({**GOOD, "log_bin": "OFF", "binlog_transaction_compression": "ON"})
    assert [p.setting for p in problems] == ["log_bin", "binlog_transaction_compression"]
    assert "log_bin is OFF" in str(problems[0])


def test_missing_replication_grants_are_named():
    problems = grant_problems(["GRANT SELECT ON `demo`.* TO `u`@`%`"])
    assert [p.setting for p in problems] == ["REPLICATION SLAVE", "REPLICATION CLIENT"]
    assert "GRANT REPLICATION SLAVE ON *.*" in str(problems[0])


def test_mariadb_binlog_monitor_counts_as_replication_client():
    grants = ["GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `u`@`h`", "GRANT SELECT ON `demo`.* TO `u`@`h`"]
    assert grant_problems(grants) == []


def test_the_preflight_error_names_every_problem_and_the_debug_command():
    problems = settings_problems({**GOOD, "log_bin": "OFF", "binlog_format": "MIXED", "binlog_row_metadata": "MINIMAL"})
    message = preflight_message(problems)
    assert message.startswith("log_bin is OFF on the source, must be ON")
    assert "; 2 more to fix: binlog_format, binlog_row_metadata;" in message
    assert message.endswith("`make debug` (lakehouse debug) checks each setting and grant with its fix")
    assert "\n" not in message
    assert "more to fix" not in preflight_message(problems[:1])
