"""Transaction assembly and the exactly-once filter, on hand-made events (pure logic)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pymysqlreplication.event import MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from lakehouse_engine.cdc import rowimage
from lakehouse_engine.cdc.binlog import BinlogSource, UnknownTableIdError, _TableMap
from lakehouse_engine.cdc.routing import after_watermarks
from lakehouse_engine.cdc.tablecapture import TableCapture
from lakehouse_engine.config.project import SourceProfile
from lakehouse_engine.errors import FatalError, SourceUnavailableError
from lakehouse_engine.snapshot.chunking import Chunk
from lakehouse_engine.source.introspect import ColumnInfo, TableSchema
from lakehouse_engine.state.checkpoint import Checkpoint, Phase, SnapshotProgress
from lakehouse_engine.state.positions import BinlogPosition
from lakehouse_engine.tables import TableSpec

FILE = "mysql-bin.000007"
FAR = BinlogPosition(FILE, 10**9)


def _event(cls, pos: int, **fields):
    event = cls.__new__(cls)  # no packet to parse: only the fields the adapter reads
    event.packet = SimpleNamespace(log_pos=pos)
    event.timestamp = fields.pop("timestamp", 1_700_000_000)
    for name, value in fields.items():
        setattr(event, name, value)
    return event


def rotate(pos: int = 4, fake: bool = True):
    return _event(RotateEvent, pos, timestamp=0 if fake else 1)


def gtid(pos: int, seq: int, standalone: bool = False):
    return _event(MariadbGtidEvent, pos, gtid=f"0-1-{seq}", flags=1 if standalone else 0)


def query(pos: int, sql: str, schema: bytes = b"demo"):
    return _event(QueryEvent, pos, query=sql, schema=schema)


def xid(pos: int):
    return _event(XidEvent, pos)


def rows(cls, pos: int, table: str, images: list[dict], *, columns: int = 2, schema: str = "demo",
         minimal: bool = False):
    full = b"\x03"  # both columns present
    bitmap = b"\x01" if minimal else full
    event = _event(cls, pos, schema=schema, table=table, number_of_columns=columns,
                   columns_present_bitmap=bitmap, columns_present_bitmap2=bitmap)
    event._RowsEvent__rows = images  # what the `rows` property returns once decoded
    return event


def insert(pos: int, table: str, *ids: int, **kw):
    return rows(WriteRowsEvent, pos, table, [{"values": {"id": i, "v": "x"}, "none_sources": {}} for i in ids], **kw)


class FakeStream:
    def __init__(self, events):
        self._events = events
        self.log_file = FILE
        self.table_map = _TableMap()

    def __iter__(self):
        return iter(self._events)


def assemble(events, stop: BinlogPosition = FAR):
    # The events carry rows as the library decodes them (test_rowimage covers the fast decoder).
    source = BinlogSource(SourceProfile("h", 1, "u", "p", "demo"), 1, "demo", {"orders": ("id",)},
                          fast_decode=False)
    return list(source._read(FakeStream(events), stop))


def test_a_transaction_ends_only_at_its_xid_and_carries_all_its_rows():
    txs = assemble([rotate(), gtid(100, 1), insert(200, "orders", 1, 2), insert(300, "orders", 3), xid(330)])
    assert len(txs) == 1
    assert [c.values["id"] for c in txs[0].changes] == [1, 2, 3]
    assert txs[0].end == BinlogPosition(FILE, 330) and txs[0].gtid == "0-1-1"
    assert [c.row_index for c in txs[0].changes] == [1, 2, 1]


def test_a_savepoint_inside_a_transaction_is_not_a_resume_point():
    txs = assemble([rotate(), query(90, "BEGIN"), insert(100, "orders", 1), query(150, "SAVEPOINT a"),
                    insert(200, "orders", 2), query(250, "ROLLBACK TO SAVEPOINT a"), query(300, "COMMIT")])
    assert [t.end.offset for t in txs] == [300]
    assert len(txs[0].changes) == 2


def test_a_standalone_statement_group_ends_at_its_statement():
    txs = assemble([rotate(), gtid(100, 1, standalone=True), query(200, "CREATE USER bob"),
                    gtid(300, 2), insert(400, "orders", 7), xid(450)])
    assert [t.end.offset for t in txs] == [200, 450]


def test_rows_of_tables_not_captured_are_skipped_and_ddl_on_captured_ones_is_reported():
    txs = assemble([rotate(), gtid(100, 1), insert(200, "other", 1), insert(210, "orders", 5, schema="elsewhere"),
                    xid(250), gtid(300, 2, standalone=True),
                    query(400, "TRUNCATE demo.orders", schema=b"mysql")])
    assert txs[0].changes == ()
    assert [(c.table, c.statement) for c in txs[1].schema_changes] == [("orders", "TRUNCATE demo.orders")]


def test_transactions_ending_after_the_stop_position_are_not_returned():
    events = [rotate(), gtid(100, 1), insert(200, "orders", 1), xid(300), gtid(400, 2),
              insert(500, "orders", 2), xid(600)]
    assert [t.end.offset for t in assemble(events, stop=BinlogPosition(FILE, 599))] == [300]
    assert [t.end.offset for t in assemble(events, stop=BinlogPosition(FILE, 600))] == [300, 600]


def test_a_reconnect_inside_a_transaction_aborts_instead_of_resuming_mid_transaction():
    events = [rotate(), gtid(100, 1), insert(200, "orders", 1), rotate(), insert(300, "orders", 2), xid(400)]
    with pytest.raises(SourceUnavailableError, match="inside a transaction"):
        assemble(events)


def test_a_reconnect_between_transactions_is_harmless():
    txs = assemble([rotate(), gtid(100, 1), insert(200, "orders", 1), xid(300), rotate(),
                    gtid(400, 2), insert(500, "orders", 2), xid(600)])
    assert [len(t.changes) for t in txs] == [1, 1]


def test_a_key_changing_update_becomes_a_delete_of_the_old_key_and_an_update():
    update = rows(UpdateRowsEvent, 200, "orders", [
        {"before_values": {"id": 1, "v": "a"}, "after_values": {"id": 9, "v": "a"},
         "before_none_sources": {}, "after_none_sources": {}},
        {"before_values": {"id": 2, "v": "a"}, "after_values": {"id": 2, "v": "b"},
         "before_none_sources": {}, "after_none_sources": {}},
    ])
    (tx,) = assemble([rotate(), gtid(100, 1), update, xid(300)])
    assert [(c.op, c.values["id"], c.row_index) for c in tx.changes] == [("d", 1, 1), ("u", 9, 2), ("u", 2, 3)]


@pytest.mark.parametrize("cls", [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
def test_a_row_image_without_every_column_is_a_problem_of_its_table_not_a_change(cls):
    images = ([{"before_values": {"id": 1, "v": None}, "after_values": {"id": 1, "v": None}}]
              if cls is UpdateRowsEvent else [{"values": {"id": 1, "v": None}}])
    (tx,) = assemble([rotate(), gtid(100, 1), rows(cls, 200, "orders", images, minimal=True), xid(300)])
    assert tx.changes == ()
    assert [p.table for p in tx.problems] == ["orders"] and "binlog_row_image" in tx.problems[0].reason


def test_a_rows_event_the_fast_decoder_cannot_read_stops_its_table_only(monkeypatch):
    def decode(event):
        if event.table == "orders":
            raise rowimage.RowImageError("a rows event of demo.orders could not be decoded (struct.error)")
        return None  # the library decodes the other table's rows

    monkeypatch.setattr(rowimage, "decode", decode)
    source = BinlogSource(SourceProfile("h", 1, "u", "p", "demo"), 1, "demo", {"orders": ("id",), "items": ("id",)})
    events = [rotate(), gtid(100, 1), insert(200, "orders", 1), insert(250, "items", 7), xid(300)]
    (tx,) = source._read(FakeStream(events), FAR)
    assert [(c.table, c.values["id"]) for c in tx.changes] == [("items", 7)]
    assert [(p.table, p.position.offset) for p in tx.problems] == [("orders", 200)]
    assert "could not be decoded" in tx.problems[0].reason


def test_statement_logged_dml_on_a_captured_table_is_a_problem_and_not_a_boundary():
    (tx,) = assemble([rotate(), gtid(100, 1), query(200, "UPDATE orders SET v = 'y'"), xid(300)])
    assert tx.end.offset == 300
    assert [p.table for p in tx.problems] == ["orders"] and "binlog_format=ROW" in tx.problems[0].reason


def test_an_unknown_table_id_is_a_fatal_error_the_library_cannot_swallow():
    table_map = _TableMap()
    with pytest.raises(UnknownTableIdError) as excinfo:
        table_map[42]
    assert isinstance(excinfo.value, FatalError) and not isinstance(excinfo.value, KeyError)


# -- the exactly-once filter -----------------------------------------------------------------


class ByFirstKey:
    """A chunk locator for integer keys: chunk i holds keys in [10*i, 10*(i+1))."""

    def __init__(self, chunks):
        self.chunks = chunks

    def locate(self, keys):
        return [self.chunks[k[0] // 10] for k in keys]


def _capture(done: dict[int, int]) -> TableCapture:
    chunks = tuple(Chunk(i, None if i == 0 else (10 * i,), None if i == 2 else (10 * (i + 1),)) for i in range(3))
    progress = SnapshotProgress(("id",), chunks, {i: BinlogPosition(FILE, p) for i, p in done.items()})
    schema = TableSchema("demo", "orders", (ColumnInfo("id", "int", "int", False),), ("id",))
    checkpoint = Checkpoint("orders", 3, Phase.SNAPSHOT, "r", snapshot=progress)
    start = min(progress.done.values())
    return TableCapture(TableSpec("orders", "orders"), schema, checkpoint, start, ByFirstKey(chunks))


def _change(key: int, pos: int):
    from lakehouse_engine.cdc.binlog import RowChange

    return RowChange("orders", "u", {"id": key}, BinlogPosition(FILE, pos), 1, 0)


def _kept(capture, changes):
    from lakehouse_engine.cdc.binlog import row_images

    return [c for event in after_watermarks(capture, list(row_images(changes))) for c in event.changes()]


def test_a_change_already_in_its_chunks_snapshot_is_dropped_and_a_later_one_kept():
    capture = _capture({0: 100, 1: 500, 2: 300})
    changes = [_change(5, 100), _change(5, 101), _change(15, 400), _change(15, 500), _change(15, 501),
               _change(25, 299), _change(25, 350)]
    kept = _kept(capture, changes)
    assert [(c.values["id"], c.position.offset) for c in kept] == [(5, 101), (15, 501), (25, 350)]


def test_an_event_whose_middle_image_is_in_its_chunks_read_keeps_the_others_with_their_row_index():
    from lakehouse_engine.cdc.binlog import RowChange

    capture = _capture({0: 100, 1: 500, 2: 300})
    at = BinlogPosition(FILE, 200)  # chunk 0 was read before it, chunk 1 after it
    changes = [RowChange("orders", "u", {"id": key}, at, i, 0) for i, key in enumerate((1, 2, 15, 3), 1)]
    kept = _kept(capture, changes)
    assert [(c.values["id"], c.row_index) for c in kept] == [(1, 1), (2, 2), (3, 4)]


def test_an_image_without_its_key_columns_stops_the_table_as_a_schema_change():
    from lakehouse_engine.cdc.binlog import RowChange
    from lakehouse_engine.errors import FatalError

    capture = _capture({0: 100, 1: 500, 2: 300})
    with pytest.raises(FatalError, match="schema change .*lacks key columns"):
        _kept(capture, [RowChange("orders", "u", {"other": 1}, BinlogPosition(FILE, 50), 1, 0)])


def test_past_the_highest_watermark_every_change_is_kept():
    capture = _capture({0: 100, 1: 500, 2: 300})
    changes = [_change(5, 600), _change(15, 501)]
    assert _kept(capture, changes) == changes


def test_a_chunk_to_be_read_again_drops_every_change_of_its_keys_even_past_the_other_watermarks():
    # Chunk 1 was read after a DDL: its read is forgotten and it will be read again later,
    # at a position past every change read now, so that read holds all of them.
    capture = _capture({0: 100, 2: 300})
    changes = [_change(5, 101), _change(15, 50), _change(15, 900), _change(25, 301)]
    kept = _kept(capture, changes)
    assert [(c.values["id"], c.position.offset) for c in kept] == [(5, 101), (25, 301)]


def test_without_a_locator_at_least_once_keeps_every_change():
    capture = _capture({0: 100, 1: 500, 2: 300})
    capture.locator = None
    changes = [_change(5, 50), _change(15, 100)]
    assert _kept(capture, changes) == changes


def test_a_transaction_crosses_the_process_boundary_whole_with_its_row_images_as_they_were():
    import datetime as dt
    import pickle
    from decimal import Decimal

    from lakehouse_engine.cdc.binlog import ParentChange, RowChange, RowImages, SchemaChange, TableProblem, Transaction
    from lakehouse_engine.ops import Op

    end = BinlogPosition(FILE, 900)
    values = {"id": 1, "price": Decimal("9.99"), "at": dt.datetime(2026, 1, 2, 3, 4, 5), "note": None}
    transaction = Transaction.of_changes(
        (RowChange("t", Op.DELETE, values, end, 1, 7), RowChange("t", Op.UPDATE, {**values, "id": 2}, end, 2, 7)),
        end, (SchemaChange("t", "ALTER TABLE t ADD c INT", end),), (TableProblem("u", "statement-logged", end),),
        "0-1-5", 7, (ParentChange("p", {"id": 1}, None, end, 7, True),))
    back = pickle.loads(pickle.dumps(transaction, protocol=pickle.HIGHEST_PROTOCOL))
    assert back == transaction
    assert [type(event) for event in back.events] == [RowImages]  # one event: one position, consecutive rows
    assert back.events[0].ops == "du" and back.events[0].columns == ("id", "price", "at", "note")
    assert all(type(change) is RowChange for change in back.changes)
    assert back.changes[1].values["id"] == 2 and back.changes[0].op is Op.DELETE and back.changes[0].position == end
