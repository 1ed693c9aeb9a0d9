"""Silver's pass over Arrow parts (``localpass``): the bucket sums without the changed keys'
rows, those rows' key facts counted apart, rows in no bucket, and keys of several columns
matched as tuples, not column by column."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse_engine.quality.arrowprint import Unprintable, row_hashes
from lakehouse_engine.quality.bucketing import Bucketing
from lakehouse_engine.quality.localpass import holds, local_pass
from lakehouse_engine.source.introspect import ColumnInfo, TableSchema

ID = ColumnInfo("id", "int", "int(11)", False)
LINE = ColumnInfo("line", "int", "int(11)", False)
NAME = ColumnInfo("name", "varchar", "varchar(20)", True)
SCHEMA = TableSchema("shop", "t", (ID, NAME), ("id",))
PAIRS = TableSchema("shop", "p", (ID, LINE, NAME), ("id", "line"))
TENS = Bucketing((ID,), width=10)


def part(ids: list[int | None], names: list[str | None]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int32()), "name": pa.array(names, pa.string())})


def expected_sums(table: pa.Table, schema: TableSchema, left_out: set[int]) -> dict[int, tuple[int, int]]:
    """Each bucket's rows and XOR of fingerprints, row by row in Python."""
    hashes = row_hashes(schema.columns, table).tolist()
    sums: dict[int, tuple[int, int]] = {}
    for key, fingerprint in zip(table.column("id").to_pylist(), hashes, strict=True):
        if key is None or key in left_out:
            continue
        rows, xor = sums.get(key // 10, (0, 0))
        sums[key // 10] = (rows + 1, xor ^ fingerprint)
    return sums


def test_parts_sum_per_bucket_as_one_table_would_without_the_changed_keys():
    first = part([1, 2, 11, 25], ["a", "b", None, "d"])
    second = part([3, 12, 13, 29], ["e", "f", "g", ""])
    summed = local_pass([first, second], SCHEMA, TENS, [(2,), (29,), (404,)])
    assert summed.sums == expected_sums(pa.concat_tables([first, second]), SCHEMA, {2, 29})
    assert summed.changed_facts is not None and summed.changed_facts.rows == 2  # 404 is not in silver
    assert summed.changed_facts.shared_rows == 0 and summed.unbucketed_rows == 0


def test_a_changed_key_held_twice_is_counted_as_shared_and_named():
    summed = local_pass([part([5, 5, 6], ["x", "y", "z"])], SCHEMA, TENS, [(5,)])
    facts = summed.changed_facts
    assert facts is not None and (facts.rows, facts.shared_rows) == (2, 2) and facts.examples == ("id=5: 2 rows",)
    assert summed.sums == expected_sums(part([6], ["z"]), SCHEMA, set())
    assert summed.facts_where_equal(["id"]).shared_rows == 2  # so the key check fails, naming it


def test_a_null_first_key_column_lies_in_no_bucket_and_withholds_the_facts():
    summed = local_pass([part([None, 1], ["x", "y"])], SCHEMA, TENS, [])
    assert summed.unbucketed_rows == 1 and summed.sums == expected_sums(part([1], ["y"]), SCHEMA, set())
    assert summed.facts_where_equal(["id"]) is None  # Spark's pass must count this table


def test_keys_of_several_columns_are_matched_as_tuples():
    table = pa.table({"id": pa.array([1, 1, 2, 2], pa.int32()), "line": pa.array([1, 2, 1, 2], pa.int32()),
                      "name": pa.array(["a", "b", "c", "d"])})
    # (1, 2) and (2, 1) match the changed keys column by column, but neither is one of them.
    assert holds(table, PAIRS.key, {(1, 1), (2, 2)}).tolist() == [True, False, False, True]
    summed = local_pass([table], PAIRS, TENS, [(1, 1), (2, 2)])
    assert sum(rows for rows, _ in summed.sums.values()) == 2 and summed.changed_facts.rows == 2


def test_a_key_column_whose_arrow_equality_may_not_be_sparks_is_refused():
    at = ColumnInfo("at", "double", "double", False)
    table = pa.table({"id": pa.array([1], pa.int32()), "at": pa.array([1.5], pa.float64()), "name": pa.array(["a"])})
    with pytest.raises(Unprintable, match="key column at"):
        local_pass([table], TableSchema("shop", "f", (ID, at, NAME), ("id", "at")), TENS, [])
