"""Reconciliation's bookkeeping: key buckets, sums with rows taken out, the buckets and keys that
differ, the keys left out because they changed between the compared positions, and the report."""

from __future__ import annotations

import pytest

from lakehouse_engine.cdc.binlog import RowChange, Transaction
from lakehouse_engine.quality.bucketing import MAX_BUCKETS, Bucketing, is_ranged, plan_bucketing
from lakehouse_engine.quality.dq import changed_keys, compares_values
from lakehouse_engine.quality.fingerprint import sql_field, sql_row_hash
from lakehouse_engine.quality.reconcile import (
    DRILLED_BUCKETS,
    NAMED_KEYS,
    BucketDifference,
    KeyDifference,
    KeyRow,
    Reconciliation,
    add_rows,
    bucket_sums_sql,
    differing_buckets,
    key_differences,
    merged_sums,
    shown_key,
)
from lakehouse_engine.source.introspect import ColumnInfo, TableSchema
from lakehouse_engine.state.positions import BinlogPosition
from lakehouse_engine.tables import TableSpec

ID = ColumnInfo("id", "int", "int(11)", False)
NAME = ColumnInfo("name", "varchar", "varchar(20)", True, collation="utf8mb4_general_ci")


def mysql_div(value: int, width: int) -> int:
    """MySQL's ``DIV`` (and Spark's ``div``): integer division truncating toward zero."""
    quotient = abs(value) // width
    return quotient if value >= 0 else -quotient


@pytest.mark.parametrize("width", [1, 3, 10])
def test_every_key_lies_in_the_range_its_bucket_describes(width):
    bucketing = Bucketing((ID,), width=width)
    for key in range(-35, 36):
        low, high = bucketing.bounds(mysql_div(key, width))
        assert low <= key <= high, (key, width, low, high)


def test_ranges_of_neighbouring_buckets_neither_overlap_nor_leave_gaps():
    bucketing = Bucketing((ID,), width=10)
    spans = [bucketing.bounds(b) for b in range(-3, 4)]
    for (_, high), (low, _) in zip(spans, spans[1:], strict=False):
        assert low == high + 1
    assert bucketing.describe(2) == "id 20..29"


def _part_of(predicate: str, key: int) -> bool:
    """A ranged part's predicate (``id < a``, ``id >= a AND id < b``, ``id >= b``) evaluated."""
    held = True
    for term in predicate.split(" AND "):
        name, op, bound = term.split()
        assert name == "`id`"
        held = held and (key < int(bound) if op == "<" else key >= int(bound))
    return held


@pytest.mark.parametrize(("low", "high", "parts"), [(1, 100, 2), (-50, 49, 3), (7, 9, 3), (0, 2**40, 4)])
def test_ranged_parts_hold_every_key_once_and_split_the_planned_range_evenly(low, high, parts):
    wheres = plan_bucketing([ID], rows=high - low + 1, low=low, high=high).sql_parts(parts)
    assert len(wheres) == parts
    span = high - low + 1
    keys = list(range(low - 3, min(high, low + 300) + 4)) + [high - 1, high, high + 5]
    for key in keys:  # beyond the planned range too: rows are in the outer two parts
        assert sum(_part_of(w, key) for w in wheres) == 1, (key, wheres)
    if span <= 300:
        sizes = [sum(_part_of(w, k) for k in range(low, high + 1)) for w in wheres]
        assert max(sizes) - min(sizes) <= 1, sizes


def test_a_table_too_small_or_empty_to_split_is_one_part():
    assert plan_bucketing([ID], rows=2, low=5, high=6).sql_parts(3) == [None]
    assert plan_bucketing([ID], rows=0, low=None, high=None).sql_parts(2) == [None]
    assert plan_bucketing([ID], rows=10, low=1, high=10).sql_parts(1) == [None]
    assert plan_bucketing([NAME], rows=5, low=None, high=None).sql_parts(2) == [None]  # one bucket


def test_hashed_parts_are_the_buckets_by_their_remainder():
    hashed = plan_bucketing([NAME], rows=95_000, low=None, high=None)
    assert hashed.sql_parts(2) == [f"{hashed.sql()} % 2 = 0", f"{hashed.sql()} % 2 = 1"]


def test_sums_of_parts_add_counts_and_xor_fingerprints_of_a_bucket_two_parts_share():
    assert merged_sums([{0: (2, 0b1100), 1: (1, 7)}, {1: (3, 5), 2: (1, 9)}, {}]) == {
        0: (2, 0b1100), 1: (4, 7 ^ 5), 2: (1, 9)}
    assert merged_sums([]) == {}


def test_buckets_are_ranges_for_an_integer_key_and_hashes_otherwise():
    ranged = plan_bucketing([ID], rows=95_000, low=1, high=100_000)
    assert ranged.width == 10_000 and "DIV 10000" in ranged.sql()
    hashed = plan_bucketing([NAME], rows=95_000, low=None, high=None)
    assert hashed.width is None and hashed.count == 10 and "CRC32(" in hashed.sql()
    assert plan_bucketing([ID], rows=0, low=None, high=None).count == 1  # an empty table
    assert plan_bucketing([NAME], rows=10**12, low=None, high=None).count == MAX_BUCKETS
    unsigned_big = ColumnInfo("id", "bigint", "bigint(20) unsigned", False)
    assert not is_ranged([unsigned_big]) and is_ranged([ID, NAME])


def test_taking_rows_out_undoes_adding_them_and_drops_emptied_buckets():
    sums = {0: (2, 0b0110), 1: (1, 0b1000)}
    added = add_rows(sums, [(0, 0b0011), (2, 0b1111)])
    assert added == {0: (3, 0b0101), 1: (1, 0b1000), 2: (1, 0b1111)}
    assert add_rows(added, [(0, 0b0011), (2, 0b1111)], sign=-1) == sums
    assert add_rows({5: (1, 7)}, [(5, 7)], sign=-1) == {}


def test_a_bucket_differs_by_its_count_its_fingerprints_or_by_being_on_one_side_only():
    source = {0: (2, 9), 1: (3, 4), 2: (1, 1), 4: (1, 5)}
    silver = {0: (2, 9), 1: (2, 4), 2: (1, 3), 3: (1, 8)}
    assert differing_buckets(source, silver) == [1, 2, 3, 4]
    assert differing_buckets(source, dict(source)) == []


def test_keys_are_told_apart_as_missing_extra_or_holding_other_values():
    source = {"A": KeyRow(1, "id=1", (1,)), "B": KeyRow(2, "id=2", (2,)), "C": KeyRow(3, "id=3", (3,))}
    silver = {"A": KeyRow(1, "id=1", (1,)), "B": KeyRow(9, "id=2", (2,)), "D": KeyRow(4, "id=4", (4,))}
    found = key_differences(source, silver)
    assert found == [
        KeyDifference("id=2", "other values"),
        KeyDifference("id=3", "missing from silver"),
        KeyDifference("id=4", "not in the source"),
    ]
    assert [k.values for k in found] == [(2,), (3,), (4,)]  # what repair re-reads


def at(offset: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000001", offset)


def change(table: str, op: str, values: dict, offset: int, index: int = 1) -> RowChange:
    return RowChange(table, op, values, at(offset), index, 0)  # type: ignore[arg-type]


def test_changed_keys_are_those_of_the_table_inside_the_window_with_both_keys_of_a_key_change():
    schema = TableSchema("db", "t", (ID, NAME), ("id",))
    transactions = [
        Transaction.of_changes((change("t", "u", {"id": 1, "name": "x"}, 10),), at(10)),  # at the low end: applied
        Transaction.of_changes((change("t", "d", {"id": 2, "name": "x"}, 20, 1),
                     change("t", "u", {"id": 3, "name": "x"}, 20, 2)), at(20)),  # id 2 -> 3
        Transaction.of_changes((change("other", "c", {"id": 4}, 30),), at(30)),
        Transaction.of_changes((change("t", "c", {"id": 5, "name": "x"}, 40),
                                change("t", "u", {"id": 5, "name": "y"}, 40, 2)), at(40)),
        Transaction.of_changes((change("t", "c", {"id": 6, "name": "x"}, 50),), at(50)),  # past the high end
    ]
    assert changed_keys(transactions, "t", at(10), at(40), schema) == [(2,), (3,), (5,)]


def test_changed_keys_are_spelled_as_silver_stores_them():
    padded = ColumnInfo("code", "binary", "binary(4)", False)
    schema = TableSchema("db", "t", (padded,), ("code",))
    # The binlog strips BINARY(n)'s trailing zero bytes; silver (and SELECT) keep all n.
    transactions = [Transaction.of_changes((change("t", "c", {"code": b"ab"}, 10),), at(10))]
    assert changed_keys(transactions, "t", at(0), at(10), schema) == [(b"ab\x00\x00",)]


def test_the_report_names_differing_buckets_keys_and_what_was_left_out():
    differences = tuple(
        BucketDifference(f"id {b}0..{b}9", 10, 9, (KeyDifference(f"id={b}3", "missing from silver"),),
                         drilled=b < DRILLED_BUCKETS)
        for b in range(DRILLED_BUCKETS + 2))
    report = Reconciliation(buckets=50, differences=differences, changed_keys=4)
    text = report.observed("orders")
    assert not report.success
    assert text.startswith(f"{DRILLED_BUCKETS + 2} of 50 key buckets differ")
    assert "id 00..09 (10 rows in the source, 9 in silver): id=03: missing from silver" in text
    assert "and 2 more buckets" in text
    assert "4 keys changed between the compared positions" in text
    assert text.endswith("re-read the differing rows with `make repair TABLE=orders`")  # the real name
    twice = Reconciliation(buckets=5, differences=(BucketDifference(
        "id 00..09", 10, 11, (KeyDifference("id=3", "held by 2 rows of silver"),), drilled=True),))
    assert twice.observed("orders").endswith("write silver anew from bronze with `make rebuild TABLE=orders` (a "
                                             "key held twice or a NULL key is not re-read away), then `make repair "
                                             "TABLE=orders` if rows still differ")
    with pytest.raises(ValueError):
        report.differing_keys()  # repair must not act on buckets it did not compare key by key
    many = tuple(KeyDifference(f"id={k}", "other values") for k in range(NAMED_KEYS + 3))
    bucket = BucketDifference("id 0..99", 100, 100, many, drilled=True)
    assert bucket.describe().endswith(f"id={NAMED_KEYS - 1}: other values and 3 more keys")
    assert Reconciliation(buckets=9, differences=(bucket,)).differing_keys() == list(many)
    assert Reconciliation(buckets=3).success
    assert Reconciliation(buckets=3).observed("t") == "all 3 key buckets hold the source's values"
    assert Reconciliation(buckets=1).observed("t") == "the key bucket holds the source's values"
    refused = Reconciliation(not_compared="too many changes")
    assert not refused.success and refused.observed("t") == "not compared: too many changes"


def test_float_and_double_enter_the_fingerprint_as_their_binary_form_not_as_printed_text():
    price = ColumnInfo("price", "double", "double", True)
    ratio = ColumnInfo("ratio", "float", "float", True)
    hashed = sql_row_hash((ID, price, ratio))
    assert "`price`" in hashed and "`ratio`" in hashed
    # Printing (CAST AS CHAR) is what differs between MariaDB and Java: the bits are computed.
    assert "CAST(`price` AS CHAR)" not in hashed and "LOG2" in sql_field(price)


def test_the_source_groups_its_buckets_by_their_expression_never_by_a_name_a_column_may_have():
    # MariaDB reads GROUP BY b as the table's column b before the select list's alias b.
    b = ColumnInfo("b", "int", "int(11)", False)
    ranged = bucket_sums_sql(TableSchema("db", "t", (b, NAME), ("b",)), Bucketing((b,), width=4))
    assert ranged.startswith("SELECT `b` DIV 4, COUNT(*), BIT_XOR(") and ranged.endswith(" GROUP BY `b` DIV 4")
    hashed = bucket_sums_sql(TableSchema("db", "t", (NAME, b), ("name",)), Bucketing((NAME,), count=8))
    bucket = Bucketing((NAME,), count=8).sql()
    assert hashed.startswith(f"SELECT {bucket}, COUNT(*)") and hashed.endswith(f" GROUP BY {bucket}")


def test_zerofill_numbers_enter_the_fingerprint_without_their_padding():
    # CAST AS CHAR of a ZEROFILL column keeps the padding ('005'); silver's number has none.
    tiny = ColumnInfo("t", "tinyint", "tinyint(3) unsigned zerofill", True)
    amount = ColumnInfo("d", "decimal", "decimal(8,4) unsigned zerofill", True, precision=8, scale=4)
    assert "CAST(CAST(`t` AS UNSIGNED) AS CHAR)" in sql_field(tiny)
    assert "CAST(CAST(`d` AS DECIMAL(8, 4)) AS CHAR)" in sql_field(amount)
    assert "CAST(CAST(`id` AS SIGNED) AS CHAR)" in sql_field(ID)


def test_values_are_compared_only_for_snapshotted_tables_in_the_sources_own_columns():
    assert compares_values(TableSpec("t", "t"))
    assert not compares_values(TableSpec("t", "t", startup="latest"))
    assert not compares_values(TableSpec("t", "t", transform=lambda df: df))
    assert not compares_values(TableSpec("t", "t", compare_values=False))


def test_a_key_is_shown_with_its_column_names():
    assert shown_key(("order_id", "line"), (7, 2)) == "order_id=7, line=2"
