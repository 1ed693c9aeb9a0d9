"""The same row read by SELECT and decoded from the binlog must become the same values."""

import datetime as dt
from decimal import Decimal

from pyspark.sql import types as T

from {{ cookiecutter.package_name }}.engine.introspect import ColumnInfo
from {{ cookiecutter.package_name }}.engine.typemap import binlog_converter, select_converter, spark_type


def col(data_type: str, column_type: str | None = None, **kw) -> ColumnInfo:
    return ColumnInfo("c", data_type, column_type or data_type, kw.pop("nullable", True), **kw)


def same(column: ColumnInfo, selected, decoded):
    a, b = select_converter(column)(selected), binlog_converter(column)(decoded)
    assert a == b, (a, b)
    return a


def test_bigint_unsigned_is_an_exact_decimal():
    column = col("bigint", "bigint(20) unsigned")
    assert spark_type(column) == T.DecimalType(20, 0)
    assert same(column, 2**64 - 1, 2**64 - 1) == Decimal(2**64 - 1)


def test_wide_decimal_becomes_a_string():
    column = col("decimal", "decimal(65,2)", precision=65, scale=2)
    assert spark_type(column) == T.StringType()
    assert same(column, Decimal("1.50"), Decimal("1.50")) == "1.50"


def test_zero_dates_become_null_on_both_paths():
    assert same(col("date"), "0000-00-00", None) is None
    assert same(col("datetime"), "0000-00-00 00:00:00", None) is None
    assert same(col("timestamp"), "0000-00-00 00:00:00", dt.datetime(1970, 1, 1)) is None


def test_timestamps_are_utc_instants():
    column = col("timestamp")
    assert spark_type(column) == T.TimestampType()
    value = same(column, dt.datetime(2024, 5, 1, 12, 0), dt.datetime(2024, 5, 1, 12, 0))
    assert value.tzinfo == dt.UTC


def test_datetime_has_no_zone():
    assert spark_type(col("datetime")) == T.TimestampNTZType()
    assert same(col("datetime"), dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1)).tzinfo is None


def test_bit_strings_from_the_binlog_equal_bytes_from_select():
    assert same(col("bit", "bit(1)"), b"\x01", "1") is True
    assert same(col("bit", "bit(12)"), b"\x0a\x05", "101000000101") == b"\x0a\x05"


def test_set_members_keep_definition_order():
    column = col("set", "set('new','sale','eco')", nullable=False)
    assert same(column, "new,eco", {"eco", "new"}) == "new,eco"
    assert same(column, "", None) == ""


def test_year_zero_decodes_as_1900_in_the_binlog():
    assert same(col("year"), 0, 1900) == 0
    assert same(col("year"), 2024, 2024) == 2024


def test_time_is_a_signed_text():
    column = col("time")
    assert same(column, dt.timedelta(hours=-1, minutes=-30), dt.timedelta(hours=-1, minutes=-30)) == "-01:30:00"
    assert same(column, dt.timedelta(hours=838, microseconds=5), dt.timedelta(hours=838, microseconds=5)) == (
        "838:00:00.000005"
    )


def test_json_from_mysql_binlog_dicts_matches_select_text():
    assert same(col("json"), '{"a": [1, "x"]}', {b"a": [1, b"x"]}) == '{"a": [1, "x"]}'


def test_nulls_stay_null():
    for column in (col("int"), col("varchar"), col("json"), col("bit", "bit(3)")):
        assert same(column, None, None) is None
