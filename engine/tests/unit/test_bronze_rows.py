"""How a binlog change becomes a bronze row: its values, then ``_op``, and a ``_seq`` made of
the event's end position and the row's index in the event, so that two rows of one event (a
key change's delete and update) keep their order; then the event's file and offset."""

from __future__ import annotations

import datetime as dt
import struct

import pytest

from lakehouse_engine.cdc.binlog import RowChange, RowImages, row_images
from lakehouse_engine.cdc.routing import bronze_rows
from lakehouse_engine.cdc.tablecapture import TableCapture
from lakehouse_engine.errors import FatalError
from lakehouse_engine.ops import Op
from lakehouse_engine.sink import bronze
from lakehouse_engine.source.introspect import ColumnInfo, TableSchema
from lakehouse_engine.source.typemap import image_converter
from lakehouse_engine.state.checkpoint import Checkpoint, Phase
from lakehouse_engine.state.positions import BinlogPosition, sequence
from lakehouse_engine.tables import TableSpec

SCHEMA = TableSchema("db", "t", (ColumnInfo("id", "int", "int(11)", False),
                                 ColumnInfo("note", "varchar", "varchar(8)", True)), ("id",))
END = BinlogPosition("mysql-bin.000007", 1234)


def test_rows_of_one_event_take_its_position_and_their_own_index_in_seq():
    capture = TableCapture(TableSpec("t", "t"), SCHEMA, Checkpoint("t", 41, Phase.BINLOG, "r0", position=END),
                           END, None)
    changes = [RowChange("t", Op.DELETE, {"id": 1, "note": "a"}, END, 1, 1_700_000_000),
               RowChange("t", Op.UPDATE, {"id": 2, "note": "b"}, END, 2, 1_700_000_000)]
    rows = bronze_rows(capture, row_images(changes), "run-1")
    meta = bronze.META_COLUMNS
    first, second = (dict(zip(("id", "note", *meta), row, strict=True)) for row in rows)
    assert (first["_op"], first["_seq"]) == ("d", sequence(END, 1))
    assert (second["_op"], second["_seq"]) == ("u", sequence(END, 2))
    assert first["_seq"] < second["_seq"] and (first["id"], second["id"]) == (1, 2)
    assert (first["_source_file"], first["_source_pos"]) == ("mysql-bin.000007", 1234)
    assert first["_source_ts"] == dt.datetime.fromtimestamp(1_700_000_000, dt.UTC)
    assert (first["_run_id"], first["_batch"]) == ("run-1", 42)  # the batch the catch-up commits next


def _capture(project: bool = False) -> TableCapture:
    return TableCapture(TableSpec("t", "t"), SCHEMA, Checkpoint("t", 41, Phase.BINLOG, "r0", position=END),
                        END, None, project=project)


def test_a_row_image_with_other_columns_than_the_table_stops_it_as_a_schema_change():
    for values in ({"id": 1}, {"id": 1, "note": "a", "added": 2}, {"id": 1, "other": "a"}):
        with pytest.raises(FatalError, match="schema change .*has columns"):
            bronze_rows(_capture(), row_images([RowChange("t", Op.UPDATE, values, END, 1, 1_700_000_000)]), "run-1")


def test_under_on_schema_change_ignore_a_row_is_cut_to_the_lakes_columns():
    events = row_images([RowChange("t", Op.INSERT, {"id": 1, "added": 2}, END, 1, 0),
                         RowChange("t", Op.INSERT, {"id": 2, "note": "b"}, END, 2, 0)])
    rows = bronze_rows(_capture(project=True), events, "r")
    assert [row[:2] for row in rows] == [(1, None), (2, "b")]


def test_rows_of_several_events_and_transactions_keep_each_ones_position_and_time():
    later = BinlogPosition("mysql-bin.000008", 4)
    changes = [RowChange("t", Op.INSERT, {"id": 1, "note": "a"}, END, 1, 100),
               RowChange("t", Op.INSERT, {"id": 2, "note": "b"}, later, 1, 200),
               RowChange("t", Op.INSERT, {"id": 3, "note": "c"}, later, 2, 200)]
    rows = [dict(zip(("id", "note", *bronze.META_COLUMNS), row, strict=True))
            for row in bronze_rows(_capture(), row_images(changes), "run-1")]
    assert [r["_seq"] for r in rows] == [sequence(END, 1), sequence(later, 1), sequence(later, 2)]
    assert [(r["_source_file"], r["_source_pos"]) for r in rows] == [
        ("mysql-bin.000007", 1234), ("mysql-bin.000008", 4), ("mysql-bin.000008", 4)]
    assert [r["_source_ts"] for r in rows] == [dt.datetime.fromtimestamp(t, dt.UTC) for t in (100, 200, 200)]


def test_an_image_whose_columns_come_in_another_order_is_laid_out_by_name():
    (event,) = row_images([RowChange("t", Op.INSERT, {"note": "a", "id": 1}, END, 1, 0)])
    assert event.columns == ("note", "id")
    assert [row[:2] for row in bronze_rows(_capture(), [event], "r")] == [(1, "a")]


def test_images_of_one_event_read_as_events_of_their_own_keep_their_row_index_in_seq():
    # What the exactly-once filter leaves of an event whose middle image is in a chunk's read.
    first, third = (RowImages("t", "u", ((i, "x"),), ("id", "note"), END, 0, i) for i in (1, 3))
    rows = bronze_rows(_capture(), [first, third], "r")
    assert [row[3] for row in rows] == [sequence(END, 1), sequence(END, 3)]


TYPED = TableSchema("db", "t", (ColumnInfo("id", "int", "int(11)", False),
                                ColumnInfo("note", "varchar", "varchar(8)", True),
                                ColumnInfo("ratio", "float", "float", True)), ("id",))


def _typed_capture() -> TableCapture:
    return TableCapture(TableSpec("t", "t"), TYPED, Checkpoint("t", 41, Phase.BINLOG, "r0", position=END),
                        END, None)


def test_text_the_fast_decoder_read_is_kept_and_every_other_column_still_converted():
    image = (1, "ü", 0.1)  # a FLOAT's double from the binlog: bronze holds the float32 nearest to it
    vouched = RowImages("t", "c", (image,), ("id", "note", "ratio"), END, 0, texts=("note",))
    unknown = vouched._replace(texts=())
    rows = [next(iter(bronze_rows(_typed_capture(), [event], "r")))[:3] for event in (vouched, unknown)]
    assert rows[0] == rows[1] == (1, "ü", struct.unpack("<f", struct.pack("<f", 0.1))[0])


def test_text_not_vouched_for_is_converted_from_the_bytes_the_library_left():
    event = RowImages("t", "c", ((1, "ä".encode(), None),), ("id", "note", "ratio"), END, 0)
    assert next(iter(bronze_rows(_typed_capture(), [event], "r")))[:3] == (1, "ä", None)


def test_an_image_of_vouched_text_and_integers_needs_no_conversion_at_all():
    assert image_converter(SCHEMA, ("note",)) is None
    assert image_converter(SCHEMA, ()) is not None  # the library's text may be bytes
    assert image_converter(TYPED, ("note",)) is not None  # the FLOAT still needs its step


def test_a_schema_change_gives_images_the_new_schemas_conversions():
    capture = _capture()
    texts = ("id", "note")
    assert capture.converter(texts) is None and capture.converter(texts) is capture.converter(texts)
    capture.schema = TYPED  # a FLOAT column added, as ``schemachanges`` applies a DDL
    event = RowImages("t", "c", ((1, "ü", 0.1),), ("id", "note", "ratio"), END, 0, texts=texts)
    nearest = struct.unpack("<f", struct.pack("<f", 0.1))[0]
    assert next(iter(bronze_rows(capture, [event], "r")))[:3] == (1, "ü", nearest)
