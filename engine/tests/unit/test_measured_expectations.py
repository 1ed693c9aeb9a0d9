"""The lag and the value reconciliation as Great Expectations expectations: measured by the
engine, handed over as suite parameters, judged by the expectation (pure: no Spark, no batch)."""

from __future__ import annotations

from lakehouse_engine.quality.expectations import (
    KEYS_PARAMETER,
    LAG_PARAMETER,
    ROWS_PARAMETER,
    VALUES_CHECK,
    VALUES_PARAMETER,
    ExpectSilverKeyToBeUniqueAndNotNull,
    ExpectSilverLagToBeAtMost,
    ExpectSilverValuesToEqualSource,
    console_name,
    keys_measured,
    lag_measured,
    rows_measured,
    values_measured,
)
from lakehouse_engine.quality.freshness import LagMeasurement, measure_lag
from lakehouse_engine.quality.reconcile import BucketDifference, KeyDifference, Reconciliation
from lakehouse_engine.quality.silverpass import KeyFacts, bucket_sums, fold_facts
from lakehouse_engine.state.positions import BinlogPosition

AT = BinlogPosition("mysql-bin.000002", 500)
HEAD = BinlogPosition("mysql-bin.000002", 900)


def judged(expectation, parameter):
    """The verdict of ``expectation`` with its suite parameter substituted, as GX runs it."""
    concrete = expectation.copy(update={"measured": parameter})
    return concrete._validate({})


def test_the_lag_expectation_is_stored_with_a_parameter_and_judges_the_measured_lag():
    check = lag_measured(measure_lag(AT, 1_000.0, HEAD, 1_400.0), 600)
    assert check.expectation.measured == {"$PARAMETER": LAG_PARAMETER}  # the suite never holds a run's value
    (parameter,) = check.parameters.values()
    assert LagMeasurement.from_parameter(parameter) == LagMeasurement(AT, HEAD, 400.0)
    passed = judged(check.expectation, parameter)
    assert passed["success"] and passed["result"]["observed_value"].startswith("lag 400 s")
    tight = lag_measured(measure_lag(AT, 1_000.0, HEAD, 1_400.0), 399)
    assert not judged(tight.expectation, parameter)["success"]


def test_an_unknown_lag_fails_the_expectation():
    unknown = lag_measured(measure_lag(AT, None, HEAD, 1_400.0), 86_400)
    verdict = judged(unknown.expectation, unknown.parameters[LAG_PARAMETER])
    assert not verdict["success"] and "lag unknown" in verdict["result"]["observed_value"]


def test_the_values_expectation_names_the_differing_keys_and_the_repair():
    differing = Reconciliation(buckets=4, differences=(BucketDifference(
        "bucket 3", 5, 4, (KeyDifference("customer_id=42", "missing from silver"),), drilled=True),))
    check = values_measured("customers", differing)
    parameter = check.parameters[VALUES_PARAMETER]
    assert parameter["differing_keys"] == ["customer_id=42: missing from silver"]
    verdict = judged(check.expectation, parameter)
    assert not verdict["success"]
    assert "customer_id=42: missing from silver" in verdict["result"]["observed_value"]
    assert "`make repair TABLE=customers`" in verdict["result"]["observed_value"]
    assert verdict["result"]["details"]["differing_keys"] == ["customer_id=42: missing from silver"]


def test_the_values_expectation_passes_only_when_compared_and_equal():
    equal = values_measured("t", Reconciliation(buckets=4))
    assert judged(equal.expectation, equal.parameters[VALUES_PARAMETER])["success"]
    skipped = values_measured("t", Reconciliation(not_compared="silver's columns are not the source's"))
    assert not judged(skipped.expectation, skipped.parameters[VALUES_PARAMETER])["success"]


def test_dq_prints_the_measured_checks_under_their_short_names():
    assert console_name(ExpectSilverLagToBeAtMost(max_lag_seconds=300).expectation_type,
                        {"max_lag_seconds": 300}) == "silver_lag_at_most(300 s)"
    assert console_name(ExpectSilverValuesToEqualSource().expectation_type, {}) == VALUES_CHECK
    assert console_name("expect_table_row_count_to_equal", {"value": 3}) is None


def test_the_key_check_fails_on_a_shared_key_or_a_null_key_column_and_names_examples():
    unique = keys_measured(["order_id", "line_no"], fold_facts(["order_id", "line_no"], [[3, 0, 0, 0], [2, 0, 0, 0]]))
    assert unique.expectation.measured == {"$PARAMETER": KEYS_PARAMETER}
    verdict = judged(unique.expectation, unique.parameters[KEYS_PARAMETER])
    assert verdict["success"] and verdict["result"]["observed_value"] == "0 of 5 rows share their key with another row"
    shared = KeyFacts(5, 2, {"order_id": 0, "line_no": 0}, ("order_id=7, line_no=1: 2 rows",))
    verdict = judged(ExpectSilverKeyToBeUniqueAndNotNull(key_columns=["order_id", "line_no"]),
                     keys_measured(["order_id", "line_no"], shared).parameters[KEYS_PARAMETER])
    assert not verdict["success"] and "e.g. order_id=7, line_no=1: 2 rows" in verdict["result"]["observed_value"]
    nulls = fold_facts(["order_id", "line_no"], [[3, 0, 0, 1], [2, 0, 0, 0]])
    verdict = judged(unique.expectation, keys_measured(["order_id", "line_no"], nulls).parameters[KEYS_PARAMETER])
    assert not verdict["success"] and "1 rows with line_no NULL" in verdict["result"]["observed_value"]


def test_the_row_count_check_compares_silver_with_the_source_count_at_the_compared_position():
    equal = rows_measured(400, 400)
    assert judged(equal.expectation, equal.parameters[ROWS_PARAMETER])["success"]
    short = rows_measured(399, 400)
    verdict = judged(short.expectation, short.parameters[ROWS_PARAMETER])
    assert not verdict["success"] and verdict["result"]["observed_value"].startswith("399 rows")
    assert console_name(short.expectation.expectation_type, {}) == "silver_row_count_equals_source"


def test_bucket_sums_drop_buckets_emptied_by_changed_keys_and_the_null_keys_bucket():
    assert bucket_sums([(1, 3, 7), (2, 0, 0), (None, 1, 5), (-4, 1, 0)]) == {1: (3, 7), -4: (1, 0)}


def test_silver_rows_with_a_null_key_fail_the_values_check_and_name_the_rebuild():
    nulls = Reconciliation(buckets=4, unbucketed_rows=2)
    check = values_measured("customers", nulls)
    verdict = judged(check.expectation, check.parameters[VALUES_PARAMETER])
    assert not nulls.success and not verdict["success"]
    assert verdict["result"]["observed_value"] == (
        "2 rows of silver have a NULL key column, which no source row has; "
        "write silver anew from bronze with `make rebuild TABLE=customers`")
