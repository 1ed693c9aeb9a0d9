import pytest

from lakehouse_engine.errors import ConfigError
from lakehouse_engine.quality.checks import CheckOutcome
from lakehouse_engine.quality.expectations import console_name
from lakehouse_engine.quality.freshness import lag_verdict, measure_lag
from lakehouse_engine.state.positions import BinlogPosition
from lakehouse_engine.tables import TableSpec

AT = BinlogPosition("mysql-bin.000002", 500)
HEAD = BinlogPosition("mysql-bin.000002", 900)
NOW = 1_700_000_000.0


def freshness_check(position, synced_at, head, checked_at, max_lag_s):
    """Measured as ``dq`` measures, judged as the GX expectation judges, named as dq prints it."""
    success, observed = lag_verdict(measure_lag(position, synced_at, head, checked_at), max_lag_s)
    name = console_name("expect_silver_lag_to_be_at_most", {"max_lag_seconds": max_lag_s})
    return CheckOutcome(name, success, observed)


def test_silver_at_the_head_is_fresh_however_long_ago_it_last_synced():
    outcome = freshness_check(HEAD, NOW - 10 * 86_400, HEAD, NOW, max_lag_s=60)
    assert outcome.success and outcome.observed.startswith("lag 0 s")


def test_silver_behind_the_head_passes_within_the_limit_and_fails_past_it():
    assert freshness_check(AT, NOW - 60, HEAD, NOW, max_lag_s=60).success
    late = freshness_check(AT, NOW - 61, HEAD, NOW, max_lag_s=60)
    assert not late.success and late.observed.startswith("lag 61 s") and "60 s" in late.expectation


def test_an_unknown_lag_behind_the_head_fails_rather_than_passes():
    unknown = freshness_check(AT, None, HEAD, NOW, max_lag_s=86_400)
    assert not unknown.success and "lag unknown" in unknown.observed and "make ingest" in unknown.observed


@pytest.mark.parametrize("bad", [0, -1, True, "60"])
def test_a_table_lag_limit_must_be_a_positive_number(bad):
    with pytest.raises(ConfigError, match="max_lag_seconds"):
        TableSpec("orders", "orders", max_lag_seconds=bad)
