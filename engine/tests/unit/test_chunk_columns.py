"""A snapshot chunk's columns as its Spark task writes them: the change metadata repeated from
buffers (equal to pyarrow's own conversion, and without importing pandas into the worker), and
each Parquet column dictionary-encoded only when its values repeat."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse_engine.config.project import SourceProfile
from lakehouse_engine.sink import bronze
from lakehouse_engine.sink.arrows import arrow_schema
from lakehouse_engine.sink.constants import repeated, single
from lakehouse_engine.sink.parquetfiles import dictionary_columns
from lakehouse_engine.snapshot.chunktask import ChunkTask, _ChunkFiles, silver_columns
from lakehouse_engine.source.introspect import ColumnInfo, TableSchema
from lakehouse_engine.source.typemap import spark_schema
from lakehouse_engine.state.chunks import Chunk
from lakehouse_engine.state.positions import BinlogPosition

from .test_arrow_columns import imports_pandas

AT = dt.datetime(2026, 12, 5, 21, 30, 15, 123456, tzinfo=dt.UTC)
CASES = [
    ("r", pa.string()),
    (b"\x00\xff", pa.binary()),
    (-7, pa.int8()),
    (2**40 + 3, pa.int64()),
    (250, pa.uint8()),
    (3, pa.int32()),
    (10**37 + 12345, pa.decimal128(38, 0)),
    (Decimal("-42"), pa.decimal128(10, 2)),
    (AT, pa.timestamp("us", tz="UTC")),
    (AT, pa.timestamp("ms", tz="UTC")),
    (dt.datetime(1969, 7, 20, 20, 17, 40, 5, tzinfo=dt.UTC), pa.timestamp("us", tz="UTC")),
    (None, pa.int64()),
    (None, pa.timestamp("us", tz="UTC")),
    (1.5, pa.float64()),  # not laid out here: pyarrow's own conversion
]


@pytest.mark.parametrize(("value", "kind"), CASES, ids=[str(k) + ":" + repr(v)[:20] for v, k in CASES])
def test_a_repeated_value_equals_pyarrows_conversion_of_it(value, kind):
    made = repeated(value, kind, 5)
    assert made.type == kind
    assert made.equals(pa.array([value] * 5, type=kind))


def test_a_decimal_too_wide_for_its_type_is_refused_as_pyarrow_refuses_it():
    with pytest.raises(pa.ArrowInvalid):
        single(10**5, pa.decimal128(4, 0))


def test_a_chunks_metadata_columns_are_built_without_importing_pandas():
    # In a Spark worker pandas costs 0.26 s and ~48 MB each: pa.array or pa.scalar imports it.
    probe = (
        "import datetime as dt\n"
        "from lakehouse_engine.snapshot import chunktask\n"
        "from lakehouse_engine.sink import bronze\n"
        "from lakehouse_engine.sink.arrows import arrow_schema\n"
        "from lakehouse_engine.sink.constants import repeated\n"
        "from pyspark.sql.types import StructType\n"
        "schema = arrow_schema(bronze.bronze_schema(StructType([])))\n"
        "meta = ('r', 10**20, 'mysql-bin.000001', 4, None, dt.datetime.now(dt.UTC), 'run', 3)\n"
        "cols = [repeated(v, f.type, 1000) for v, f in zip(meta, schema, strict=True)]\n"
    )
    assert not imports_pandas(probe)


def test_only_columns_whose_values_repeat_are_dictionary_encoded():
    rows = pa.table({"id": list(range(1000)), "flag": ["Y", "N"] * 500,
                     "half": [i // 2 for i in range(1000)], "empty": pa.nulls(1000, pa.string())})
    # "half" has exactly half as many distinct values as rows: not fewer, so no dictionary.
    assert dictionary_columns(rows) == ["flag", "empty"]
    assert dictionary_columns(rows.slice(0, 0)) == ["id", "flag", "half", "empty"]


def _encodings(path: str) -> dict[str, set[str]]:
    meta = pq.ParquetFile(path).metadata.row_group(0)
    return {meta.column(i).path_in_schema: set(meta.column(i).encodings) for i in range(meta.num_columns)}


def test_a_chunk_file_and_its_silver_twin_encode_a_unique_column_plainly_and_a_repeating_one_by_dictionary(
        tmp_path):
    table = TableSchema("db", "t", (ColumnInfo("id", "int", "int(11)", False),
                                    ColumnInfo("country", "varchar", "varchar(8)", True)), ("id",))
    schema = arrow_schema(bronze.bronze_schema(spark_schema(table)))
    # Silver's files name the columns physically (column mapping): the choice follows the names.
    silver_names = {name: f"col-{i}" for i, name in enumerate(silver_columns(table))}
    task = ChunkTask(SourceProfile("127.0.0.1", 1, "u", "p", "db"), table, Chunk(0, None, None), "run1", 1,
                     str(tmp_path), seed_silver=True, silver_names=silver_names)
    meta = ("r", 10**20, "mysql-bin.000001", 4, None, AT, "run1", 1)
    rows = pa.RecordBatch.from_arrays(
        [pa.array(range(3000), pa.int32()), pa.array(["NL", "FR", None] * 1000),
         *(repeated(v, f.type, 3000) for v, f in zip(meta, list(schema)[2:], strict=True))], schema=schema)
    with _ChunkFiles(task, schema) as files:
        files.add(rows)
    staged = files.staged(0, BinlogPosition("mysql-bin.000001", 4))
    bronze_file, silver_file = _encodings(staged.path), _encodings(staged.silver_path)
    dictionary = {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}
    assert not bronze_file["id"] & dictionary and bronze_file["country"] & dictionary
    assert bronze_file["_run_id"] & dictionary
    assert not silver_file[silver_names["id"]] & dictionary and silver_file[silver_names["country"]] & dictionary
    assert pq.read_table(staged.path).equals(pa.Table.from_batches([rows]))
