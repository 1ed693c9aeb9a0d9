"""The vectorized casts of the server's text must give exactly what pymysql plus the row converter
give, value by value, and fall back to that exact path wherever they cannot."""

import pyarrow as pa
import pytest
from pymysql import converters
from pymysql.constants import FIELD_TYPE

from lakehouse_engine.sink.arrows import arrow_schema
from lakehouse_engine.source.introspect import ColumnInfo, TableSchema
from lakehouse_engine.source.resultset import ResultColumn
from lakehouse_engine.source.textcolumns import column_converter, exact_values, fast_path
from lakehouse_engine.source.typemap import select_converter, spark_schema

TEXT = {FIELD_TYPE.STRING, FIELD_TYPE.VAR_STRING, FIELD_TYPE.VARCHAR, FIELD_TYPE.BLOB,
        FIELD_TYPE.TINY_BLOB, FIELD_TYPE.MEDIUM_BLOB, FIELD_TYPE.LONG_BLOB, FIELD_TYPE.GEOMETRY}


def result_column(type_code: int, binary: bool = False) -> ResultColumn:
    """Decoding as pymysql's MySQLResult._get_descriptions sets it up for a utf8mb4 connection."""
    if type_code in TEXT:
        encoding = None if binary else "utf8"
    else:
        encoding = "ascii"
    converter = converters.decoders.get(type_code)
    return ResultColumn("c", type_code, 63 if binary else 45, encoding,
                        None if converter is converters.through else converter)


def target(column: ColumnInfo) -> pa.DataType:
    return arrow_schema(spark_schema(TableSchema("d", "t", (column,), (column.name,)))).field(0).type


CASES = [
    # (data_type, column_type, extra, field type, binary, server texts)
    ("int", "int(11)", {}, FIELD_TYPE.LONG, False,
     ["0", "-2147483648", "2147483647", None, "42"]),
    ("int", "int(10) unsigned", {}, FIELD_TYPE.LONG, False, ["4294967295", "0"]),
    ("tinyint", "tinyint(4)", {}, FIELD_TYPE.TINY, False, ["-128", "127", None]),
    ("bigint", "bigint(20)", {}, FIELD_TYPE.LONGLONG, False,
     ["-9223372036854775808", "9223372036854775807"]),
    ("bigint", "bigint(20) unsigned", {}, FIELD_TYPE.LONGLONG, False,
     ["18446744073709551615", "0", None]),
    ("year", "year(4)", {}, FIELD_TYPE.YEAR, False, ["0", "1901", "2155", None]),
    ("decimal", "decimal(10,2)", {"precision": 10, "scale": 2}, FIELD_TYPE.NEWDECIMAL, False,
     ["0.00", "-0.01", "12345678.99", "-12345678.99", None]),
    ("decimal", "decimal(38,10)", {"precision": 38, "scale": 10}, FIELD_TYPE.NEWDECIMAL, False,
     ["9999999999999999999999999999.9999999999", "-0.0000000001"]),
    ("decimal", "decimal(20,0)", {"precision": 20, "scale": 0}, FIELD_TYPE.NEWDECIMAL, False,
     ["-99999999999999999999", "0"]),
    ("double", "double", {}, FIELD_TYPE.DOUBLE, False,
     ["0", "-0", "1.7976931348623157e308", "2.2250738585072014e-308", "4.9406564584124654e-324",
      "0.1", "-123.456", "1e-5", None]),
    # FLOAT is read as CAST(.. AS DOUBLE): the text of the stored float32, widened.
    ("float", "float", {}, FIELD_TYPE.DOUBLE, False,
     ["3.4028234663852886e38", "1.1754943508222875e-38", "0.10000000149011612", "-16777217", "0"]),
    ("date", "date", {}, FIELD_TYPE.DATE, False, ["2024-02-29", "1000-01-01", "9999-12-31", None]),
    ("datetime", "datetime(6)", {}, FIELD_TYPE.DATETIME, False,
     ["2024-01-01 00:00:00", "9999-12-31 23:59:59.999999", "1000-01-01 00:00:00.000001",
      "2024-06-30 12:34:56.5", "2024-06-30 12:34:56.120", None]),
    ("timestamp", "timestamp(3)", {}, FIELD_TYPE.TIMESTAMP, False,
     ["1970-01-01 00:00:01.000", "2038-01-19 03:14:07.999", None]),
    ("varchar", "varchar(20)", {}, FIELD_TYPE.VAR_STRING, False,
     ["", "plain", "ünïcødé", "emoji 😀", "tab\tand\nnewline", "\x00nul", None]),
    ("enum", "enum('a','b')", {}, FIELD_TYPE.STRING, False, ["a", "", None]),
    ("longtext", "longtext", {}, FIELD_TYPE.BLOB, False, ['{"k": [1, 2]}', None]),
    ("varbinary", "varbinary(8)", {}, FIELD_TYPE.VAR_STRING, True,
     [b"\x00\xff\x80", b"", None]),
    ("blob", "blob", {}, FIELD_TYPE.BLOB, True, [b"\xde\xad\xbe\xef" * 100, None]),
]


def raw(values) -> pa.Array:
    return pa.array([v.encode() if isinstance(v, str) else v for v in values], pa.binary())


@pytest.mark.parametrize("case", CASES, ids=[f"{c[1]}" for c in CASES])
def test_fast_path_equals_the_exact_path_value_by_value(case):
    data_type, column_type, extra, type_code, binary, texts = case
    column = ColumnInfo("c", data_type, column_type, True, **extra)
    result = result_column(type_code, binary)
    kind = target(column)
    fast = fast_path(column, result, kind)
    assert fast is not None, f"{column_type} should have a vectorized path"
    exact = exact_values(select_converter(column), result, kind, raw(texts))
    got = fast(raw(texts))
    assert got.type == kind
    assert got.to_pylist() == exact.to_pylist()
    assert got.equals(exact)  # bit for bit, NaN and -0.0 included


@pytest.mark.parametrize(("data_type", "type_code", "texts"), [
    ("date", FIELD_TYPE.DATE, ["2024-01-01", "0000-00-00", "2024-00-10"]),
    ("date", FIELD_TYPE.DATE, ["0000-01-01"]),  # year 0 parses in Arrow, not in Python: NULL
    ("datetime", FIELD_TYPE.DATETIME, ["0000-00-00 00:00:00", "2024-01-01 10:00:00"]),
    ("datetime", FIELD_TYPE.DATETIME, ["0000-06-01 10:00:00"]),
    ("timestamp", FIELD_TYPE.TIMESTAMP, ["0000-00-00 00:00:00"]),
])
def test_values_python_cannot_hold_take_the_exact_path_and_become_null(data_type, type_code, texts):
    column = ColumnInfo("c", data_type, data_type, True)
    result = result_column(type_code)
    kind = target(column)
    got = column_converter(column, result, kind)(raw(texts))
    expected = exact_values(select_converter(column), result, kind, raw(texts))
    assert got.equals(expected)
    assert None in got.to_pylist()


@pytest.mark.parametrize(("data_type", "column_type", "extra", "type_code", "binary"), [
    ("time", "time(3)", {}, FIELD_TYPE.TIME, False),
    ("bit", "bit(8)", {}, FIELD_TYPE.BIT, True),
    ("decimal", "decimal(65,30)", {"precision": 65, "scale": 30}, FIELD_TYPE.NEWDECIMAL, False),
    ("point", "point", {}, FIELD_TYPE.GEOMETRY, True),
])
def test_types_whose_text_arrow_would_read_differently_use_only_the_exact_path(
        data_type, column_type, extra, type_code, binary):
    column = ColumnInfo("c", data_type, column_type, True, **extra)
    assert fast_path(column, result_column(type_code, binary), target(column)) is None


def test_invalid_utf8_is_refused_like_pymysqls_strict_decode():
    column = ColumnInfo("c", "varchar", "varchar(5)", True)
    convert = column_converter(column, result_column(FIELD_TYPE.VAR_STRING), target(column))
    with pytest.raises(UnicodeDecodeError):
        convert(raw([b"\xff\xfe"]))
