"""on_cascade='apply': which child rows a parent change cascades into, from the child's state at
the parent change's position (pure logic; the integration test runs it against InnoDB)."""

from decimal import Decimal

import pytest

from lakehouse_engine.cdc import cascading
from lakehouse_engine.cdc.binlog import ParentChange
from lakehouse_engine.ops import Op
from lakehouse_engine.source.cascades import Cascade, compared_exactly
from lakehouse_engine.source.introspect import ColumnInfo
from lakehouse_engine.state.positions import BinlogPosition, sequence

COLUMNS = ("id", "parent_id", "note")
DELETE_CASCADE = Cascade("shop", "child", "fk", "shop", "parent", ("parent_id",), ("id",), "CASCADE", "RESTRICT")
SET_NULL = Cascade("shop", "child", "fk", "shop", "parent", ("parent_id",), ("id",), "SET NULL", "CASCADE")
CONVERT = {c: (lambda v: v) for c in COLUMNS}


def at(offset: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000001", offset)


def parent_delete(parent_id: int, offset: int, *, checked: bool = True) -> ParentChange:
    return ParentChange("parent", {"id": parent_id}, None, at(offset), 1_700_000_000, checked)


def parent_update(old: int, new: int, offset: int) -> ParentChange:
    return ParentChange("parent", {"id": old}, {"id": new}, at(offset), 1_700_000_000, True)


def row(values: tuple, op: Op, offset: int, index: int = 1) -> tuple:
    """A buffered bronze row: data columns, then _op and _seq (the rest of the meta is unused)."""
    return (*values, op.value, sequence(at(offset), index))


def meta(op: Op, change: ParentChange, index: int) -> tuple:
    return (op.value, sequence(change.position, index))


def derive(cascade: Cascade, current, batch, changes, stale=None) -> list[tuple]:
    pending = [cascading.Pending(cascade, c, a) for c in changes if (a := cascading.action(cascade, c)) is not None]
    return cascading.derive(COLUMNS, ("id",), current, batch, pending, CONVERT, meta, stale)


def test_a_parent_delete_deletes_each_child_referencing_it_as_of_that_position_not_as_of_the_batch_start():
    current = [(10, 1, "x"), (11, 1, "y"), (20, 2, "z")]
    batch = [
        row((11, 2, "y"), Op.UPDATE, 100),  # moved away from parent 1 before its delete: kept
        row((20, 1, "z"), Op.UPDATE, 200),  # moved to parent 1 before its delete: deleted
        row((12, 1, "n"), Op.INSERT, 300),  # inserted under parent 1 before its delete: deleted
        row((13, 1, "m"), Op.INSERT, 500),  # after the delete (parent 1 inserted again): kept
    ]
    derived = derive(DELETE_CASCADE, current, batch, [parent_delete(1, 400)])
    assert derived == [
        (10, 1, "x", "d", sequence(at(400), 1)),
        (12, 1, "n", "d", sequence(at(400), 2)),
        (20, 1, "z", "d", sequence(at(400), 3)),
    ]


def test_set_null_and_update_cascade_write_the_whole_row_with_only_the_key_columns_changed():
    current = [(10, 1, "x"), (20, 2, "z")]
    changes = [parent_update(1, 7, 100), parent_delete(7, 200), parent_delete(2, 300)]
    assert derive(SET_NULL, current, [], changes) == [
        (10, 7, "x", "u", sequence(at(100), 1)),  # ON UPDATE CASCADE: follows the parent's new key
        (10, None, "x", "u", sequence(at(200), 1)),  # ...whose delete then sets it NULL
        (20, None, "z", "u", sequence(at(300), 1)),
    ]


def test_a_parent_change_logged_without_foreign_key_checks_or_keeping_its_key_cascades_nothing():
    current = [(10, 1, "x")]
    assert derive(DELETE_CASCADE, current, [], [parent_delete(1, 100, checked=False)]) == []
    same_key = ParentChange("parent", {"id": 1, "name": "a"}, {"id": 1, "name": "b"}, at(100), 0, True)
    assert derive(SET_NULL, current, [], [same_key]) == []
    assert derive(DELETE_CASCADE, current, [], [parent_update(1, 2, 100)]) == []  # ON UPDATE RESTRICT


def test_a_child_deleted_before_the_parent_delete_gets_no_second_delete():
    current = [(10, 1, "x"), (11, 1, "y")]
    batch = [row((10, 1, "x"), Op.DELETE, 100)]
    assert derive(DELETE_CASCADE, current, batch, [parent_delete(1, 200)]) == [
        (11, 1, "y", "d", sequence(at(200), 1))]


def test_keys_whose_snapshot_chunk_holds_the_change_get_no_derived_row():
    current = [(10, 1, "x"), (11, 1, "y")]
    asked = []

    def stale(keys, position):
        asked.append((list(keys), position))
        return [k == (11,) for k in keys]

    assert derive(DELETE_CASCADE, current, [], [parent_delete(1, 200)], stale) == [
        (10, 1, "x", "d", sequence(at(200), 1))]
    assert asked == [([(10,), (11,)], at(200))]


def test_binary_values_match_whether_spark_returns_bytearray_or_the_binlog_bytes():
    cascade = Cascade("s", "child", "fk", "s", "parent", ("parent_id",), ("id",), "CASCADE", "RESTRICT")
    current = [(bytearray(b"\x01"), bytearray(b"\xff"), "x")]
    change = ParentChange("parent", {"id": b"\xff"}, None, at(100), 0, True)
    derived = derive(cascade, current, [], [change])
    assert [r[3] for r in derived] == ["d"]


@pytest.mark.parametrize(("column", "exact"), [
    (ColumnInfo("a", "int", "int(11)", False), True),
    (ColumnInfo("a", "decimal", "decimal(10,2)", False), True),
    (ColumnInfo("a", "varbinary", "varbinary(8)", False), True),
    (ColumnInfo("a", "char", "char(2)", False, collation="utf8mb4_bin"), True),
    (ColumnInfo("a", "char", "char(2)", False, collation="utf8mb4_general_ci"), False),
    (ColumnInfo("a", "varchar", "varchar(8)", False, collation="utf8mb4_bin"), False),  # PAD SPACE
    (ColumnInfo("a", "varchar", "varchar(8)", False, collation="utf8mb4_nopad_bin"), True),
    (ColumnInfo("a", "datetime", "datetime", False), False),
    (ColumnInfo("a", "double", "double", False), False),
])
def test_only_columns_compared_without_a_collation_or_rounding_can_be_matched_in_python(column, exact):
    assert compared_exactly(column) is exact


def test_derived_rows_sort_between_the_parent_event_and_anything_after_it():
    change = parent_delete(1, 400)
    derived = derive(DELETE_CASCADE, [(10, 1, "x")], [], [change])
    assert sequence(at(400), 0) < Decimal(derived[0][-1]) < sequence(at(401), 0)


def test_an_update_cascade_into_a_key_column_deletes_the_old_key_and_writes_the_new_one():
    """An association table keyed by (parent_id, n): silver must not keep the old key."""
    cascade = Cascade("s", "child", "fk", "s", "parent", ("parent_id",), ("id",), "RESTRICT", "CASCADE")
    pending = [cascading.Pending(cascade, parent_update(1, 7, 100), cascading.SET_NEW)]
    derived = cascading.derive(COLUMNS, ("parent_id", "id"), [(10, 1, "x")], [], pending, CONVERT, meta)
    assert derived == [
        (10, 1, "x", "d", sequence(at(100), 1)),
        (10, 7, "x", "u", sequence(at(100), 2)),
    ]
