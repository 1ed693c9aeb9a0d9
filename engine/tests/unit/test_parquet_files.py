"""Parquet files as the engine reads and writes them outside Spark: a file's columns read in the
asked order (a column it lacks is an error, not silently left out), repeating columns read from
the file's dictionaries, and dictionaries written only where values repeat."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse_engine.quality.arrowsilver import Repeats
from lakehouse_engine.sink import parquetfiles

ROWS = pa.table({"id": list(range(2000)), "tier": ["gold", "silver", None, "bronze"] * 500,
                 "email": [f"u{i}@example.com" for i in range(2000)]})


def _encodings(path) -> dict[str, set[str]]:
    meta = pq.ParquetFile(path).metadata.row_group(0)
    return {meta.column(i).path_in_schema: set(meta.column(i).encodings) for i in range(meta.num_columns)}


def test_a_written_file_uses_dictionaries_only_for_the_columns_whose_values_repeat(tmp_path):
    path = tmp_path / "part.parquet"
    parquetfiles.write(ROWS, path)
    dictionary = {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}
    encodings = _encodings(path)
    assert encodings["tier"] & dictionary
    assert not encodings["id"] & dictionary and not encodings["email"] & dictionary
    assert pq.read_table(path).equals(ROWS)


def test_columns_are_read_in_the_asked_order_and_repeating_ones_as_dictionaries(tmp_path):
    path = tmp_path / "part.parquet"
    parquetfiles.write(ROWS, path)
    read = parquetfiles.read_columns(path, ["tier", "id"], dictionary=["tier"])
    assert read.column_names == ["tier", "id"]
    assert pa.types.is_dictionary(read.schema.field("tier").type)
    assert read.column("tier").cast(pa.string()).equals(ROWS.column("tier"))


def test_reading_a_column_the_file_lacks_is_an_error(tmp_path):
    path = tmp_path / "part.parquet"
    parquetfiles.write(ROWS, path)
    with pytest.raises(pa.ArrowInvalid, match="holds no column nope"):
        parquetfiles.read_columns(path, ["id", "nope"])


def test_dictionaries_are_chosen_from_the_first_part_large_enough_to_tell():
    repeats = Repeats(["tier", "email"])
    repeats.learn(ROWS.slice(0, Repeats.SAMPLE - 1))  # too few rows to tell: still dense
    assert repeats.chosen is None and not pa.types.is_dictionary(repeats.target(ROWS.schema).field("tier").type)
    repeats.learn(ROWS)
    assert repeats.chosen == ["tier"]
    target = repeats.target(ROWS.schema)
    assert target.field("tier").type == pa.dictionary(pa.int32(), pa.string())
    assert target.field("email").type == pa.string() and target.field("id").type == pa.int64()
    repeats.learn(ROWS.select(["id"]).append_column("tier", pa.array([str(i) for i in range(2000)]))
                  .append_column("email", ROWS.column("email")))
    assert repeats.chosen == ["tier"], "the choice is made once"
