"""The count dq compares silver with: the source count carried through the binlog to the
position silver is at, and the tables it refuses to compare."""

from __future__ import annotations

import pytest

from lakehouse_engine.cdc.binlog import RowChange, SchemaChange, TableProblem, Transaction
from lakehouse_engine.quality.dq import NotComparable, SilverState, count_change, net_row_change
from lakehouse_engine.state.positions import BinlogPosition


def at(offset: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000001", offset)


def change(op: str, key: int, offset: int, index: int = 1, table: str = "t") -> RowChange:
    return RowChange(table, op, {"id": key}, at(offset), index, 0)  # type: ignore[arg-type]


def tx(end: int, *changes: RowChange, **extra) -> Transaction:
    return Transaction.of_changes(changes, at(end), **extra)


def silver(position: int, window_end: int | None = None) -> SilverState:
    return SilverState(version=3, batch=2, position=at(position), window_end=at(window_end or position))


def test_inserts_add_deletes_remove_and_updates_keep_the_count():
    changes = [change("c", 1, 10), change("c", 2, 10, 2), change("d", 3, 20), change("u", 4, 30)]
    assert net_row_change(changes) == 1


def test_a_key_changing_update_keeps_the_count():
    # UPDATE t SET id = 9 WHERE id = 5: a delete of the old key, then the new key, in one event.
    assert net_row_change([change("d", 5, 40, 1), change("u", 9, 40, 2)]) == 0
    # A delete followed by an unrelated update in another event still removes a row.
    assert net_row_change([change("d", 5, 40, 1), change("u", 6, 50, 1)]) == -1


def test_silver_behind_the_count_subtracts_the_changes_in_between():
    log = [tx(100, change("c", 1, 90)), tx(200, change("c", 2, 190)), tx(300, change("d", 3, 290))]
    # Counted at 300; silver is at 100: +1 and -1 happened after it, at 200 only the -1.
    assert count_change(at(300), silver(100), "t", log) == 0
    assert count_change(at(300), silver(200), "t", log) == 1


def test_silver_ahead_of_the_count_adds_the_changes_in_between():
    log = [tx(200, change("c", 2, 190)), tx(300, change("c", 3, 290, table="other"))]
    assert count_change(at(100), silver(300), "t", log) == 1


def test_changes_of_other_tables_and_outside_the_range_are_ignored():
    log = [tx(50, change("c", 1, 40)), tx(150, change("c", 2, 140, table="other")), tx(400, change("d", 1, 390))]
    assert count_change(at(200), silver(100), "t", log) == 0


def test_a_change_inside_the_open_watermark_window_is_not_comparable():
    log = [tx(150, change("u", 1, 140))]
    with pytest.raises(NotComparable, match="watermark window"):
        count_change(at(300), silver(100, window_end=200), "t", log)
    # The same change after the window's end is only counted.
    assert count_change(at(300), silver(100, window_end=120), "t", log) == 0


@pytest.mark.parametrize("extra", [
    {"schema_changes": (SchemaChange("t", "TRUNCATE TABLE t", at(150)),)},
    {"problems": (TableProblem("t", "a row image lacks columns", at(150)),)},
])
def test_a_table_whose_changes_cannot_be_counted_is_not_comparable(extra):
    with pytest.raises(NotComparable, match="cannot be counted"):
        count_change(at(300), silver(100), "t", [tx(150, **extra)])
