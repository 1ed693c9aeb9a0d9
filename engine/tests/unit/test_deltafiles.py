"""The statistics of files committed outside Spark."""

import json

from lakehouse_engine.sink.deltafiles import DataFile


def test_file_statistics_carry_the_exact_row_count():
    stats = json.loads(DataFile("/t/f.parquet", 123, {"_batch": 4}, {"_batch": 4}, {"_batch": 0}).stats(
        {"_batch": "_batch"}))
    assert stats == {"numRecords": 123, "minValues": {"_batch": 4}, "maxValues": {"_batch": 4},
                     "nullCount": {"_batch": 0}}


def test_file_statistics_name_columns_as_the_files_do_under_column_mapping():
    data = DataFile("/t/f.parquet", 2, {"id": 1, "_batch": 4}, {"id": 9, "_batch": 4}, {"id": 0})
    stats = json.loads(data.stats({"id": "col-a1", "_batch": "col-b2", "name": "col-c3"}))
    assert stats == {"numRecords": 2, "minValues": {"col-a1": 1, "col-b2": 4},
                     "maxValues": {"col-a1": 9, "col-b2": 4}, "nullCount": {"col-a1": 0}}
