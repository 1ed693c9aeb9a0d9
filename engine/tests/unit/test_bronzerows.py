"""A batch's meta columns built per run are exactly those of its rows built one by one."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from lakehouse_engine.cdc.bronzerows import BronzeRows
from lakehouse_engine.sink import bronze
from lakehouse_engine.sink.arrows import arrow_schema, rows_to_batch
from lakehouse_engine.state.positions import BinlogPosition, sequence

SOURCE = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("note", T.StringType(), True)])
SCHEMA = arrow_schema(bronze.bronze_schema(SOURCE))
TS = dt.datetime(2026, 12, 2, 13, 0, tzinfo=dt.UTC)
NOW = dt.datetime(2026, 12, 2, 14, 0, 0, 123456, tzinfo=dt.UTC)


def shared(file: str, offset: int, source_ts: dt.datetime | None = TS) -> tuple:
    return (file, offset, source_ts, NOW, "run-1", 42)


def test_rows_of_several_runs_become_the_table_their_whole_rows_make():
    rows = BronzeRows()
    high = int(sequence(BinlogPosition("mysql-bin.000123", 4_000_000_000)))
    rows.add("cud", high + 1, shared("mysql-bin.000123", 4_000_000_000), [(1, "a"), (2, None), (3, "c")])
    rows.add("u", 5, shared("mysql-bin.000001", 5, None), [(4, "é")])
    rows.add("uu", (1 << 64) - 1, shared("mysql-bin.000002", 9), [(5, "x"), (6, "y")])  # a carry into the high word
    whole = list(rows)
    assert [r[3] for r in whole] == [high + 1, high + 2, high + 3, 5, (1 << 64) - 1, 1 << 64]
    expected = pa.Table.from_batches([rows_to_batch(whole, SCHEMA)])
    assert rows.to_arrow(SCHEMA, 2).equals(expected)


def test_whole_rows_added_one_by_one_keep_their_own_meta_values():
    rows = BronzeRows()
    cascaded = [(7, "z", "d", sequence(BinlogPosition("mysql-bin.000004", 10), 3), *shared("mysql-bin.000004", 10))]
    rows.add_rows(cascaded, 2)
    assert list(rows) == cascaded
    assert rows.to_arrow(SCHEMA, 2).to_pylist()[0]["_seq"] == cascaded[0][3]


def test_no_rows_make_an_empty_table_of_the_schema():
    assert BronzeRows().to_arrow(SCHEMA, 2).schema == SCHEMA and not BronzeRows()


def test_an_op_per_row_is_required():
    with pytest.raises(ValueError, match="op letters"):
        BronzeRows().add("u", 1, shared("f", 1), [(1, "a"), (2, "b")])
