"""How the source's read views share a table's parts: each table's fate is decided once, a
table dropped after a part was summed hands out no sums, an error stops every reader."""

from __future__ import annotations

import pytest

from lakehouse_engine.quality.bucketing import plan_bucketing
from lakehouse_engine.quality.sourceview import Planned, _Work
from lakehouse_engine.source.introspect import ColumnInfo, TableSchema

ID = ColumnInfo("id", "int", "int(11)", False)


def planned(compared: bool = True) -> Planned:
    bucketing = plan_bucketing([ID], rows=100_000, low=1, high=100_000) if compared else None
    return Planned(TableSchema("db", "t", (ID,), ("id",)), bucketing)


def parts_of(work: _Work) -> list:
    taken = []
    while (part := work.take()) is not None:
        taken.append(part)
    return taken


def test_each_compared_table_is_split_in_parts_and_a_table_not_compared_is_one():
    work = _Work({"a": planned(), "b": planned(compared=False)}, parts=2)
    taken = parts_of(work)
    assert [(p.table, p.index) for p in taken] == [("a", 0), ("a", 1), ("b", 0)]
    assert taken[0].where == "`id` < 50001" and taken[1].where == "`id` >= 50001" and taken[2].where is None


def test_a_tables_parts_added_are_its_sums_and_its_count():
    work = _Work({"a": planned()}, parts=2)
    first, second = parts_of(work)
    assert work.decide("a", "sums") == "sums"
    work.summed(first, {0: (2, 6), 4: (1, 1)})
    assert work.decide("a", "sums") == "sums"
    work.summed(second, {4: (3, 2), 9: (1, 8)})
    sums, rows = work.results()
    assert sums["a"].sums == {0: (2, 6), 4: (4, 3), 9: (1, 8)} and rows == {"a": 7}


def test_a_fate_holds_for_a_tables_later_parts_unless_it_is_dropped():
    work = _Work({"a": planned(), "b": planned()}, parts=2)
    assert work.decide("a", "sums") == "sums"
    assert work.decide("a", "count") == "sums"  # asked to count once its first part was summed
    assert work.decide("b", "count") == "count"
    assert work.decide("b", "sums") == "count"
    assert work.decide("a", None) is None
    assert work.decide("a", "sums") is None  # dropped stays dropped


def test_a_table_dropped_after_one_part_was_summed_hands_out_neither_sums_nor_a_count():
    work = _Work({"a": planned(), "b": planned(compared=False)}, parts=2)
    first, _, _ = parts_of(work)
    work.decide("a", "sums")
    work.summed(first, {0: (5, 5)})
    work.decide("a", None)  # the caller gave up on it before its second part
    assert work.decide("b", "sums") == "count"  # not compared: counted, whatever is asked
    work.counted("b", 12)
    assert work.results() == ({}, {"b": 12})


def test_a_readers_error_stops_the_others_taking_parts_and_is_raised():
    work = _Work({"a": planned(), "b": planned()}, parts=2)
    assert work.take() is not None
    work.fail(RuntimeError("lost the connection"))
    work.fail(RuntimeError("a later error"))
    assert work.take() is None
    with pytest.raises(RuntimeError, match="^lost the connection$"):
        work.raise_error()
