from decimal import Decimal

import pytest

from lakehouse_engine.snapshot.chunking import (
    Chunk,
    chunk_predicate,
    chunks_from_boundaries,
    even_boundaries,
    even_step,
    lower_bound,
    reading_order,
    refine_even,
    upper_bound,
)


def test_even_boundaries_stay_strictly_inside_the_key_range():
    assert even_boundaries(1, 10, 3) == [(4,), (7,), (10,)]
    assert even_boundaries(5, 5, 100) == []


def test_even_split_handles_bigint_unsigned_max_exactly():
    top = 2**64 - 1
    bounds = even_boundaries(top - 10, top, 5)
    assert bounds == [(top - 5,), (top,)]


def test_even_step_uses_the_distribution_factor_within_bounds():
    assert even_step(1, 1000, 1000, 100, (0.05, 1000.0)) == 100  # dense
    assert even_step(1, 10_000, 1000, 100, (0.05, 1000.0)) == 1000  # 10x sparse


def test_even_step_refuses_too_sparse_or_too_dense_keys():
    assert even_step(1, 10**9, 100, 10, (0.05, 1000.0)) is None
    assert even_step(1, 10, 1000, 10, (0.05, 1000.0)) is None


def test_chunks_are_open_at_both_ends_and_contiguous():
    chunks = chunks_from_boundaries([(10,), (20,)])
    assert chunks == [Chunk(0, None, (10,)), Chunk(1, (10,), (20,)), Chunk(2, (20,), None)]


def test_a_table_without_boundaries_is_one_unbounded_chunk():
    assert chunks_from_boundaries([]) == [Chunk(0, None, None)]


def test_the_unbounded_last_chunk_is_read_first():
    chunks = chunks_from_boundaries([(10,), (20,)])
    assert [c.index for c in reading_order(chunks)] == [2, 0, 1]


def test_composite_bounds_expand_to_or_and_terms_not_row_constructors():
    sql, args = lower_bound(["a", "b"], (1, "x"))
    assert sql == "((`a` > %s) OR (`a` = %s AND `b` >= %s))"
    assert args == [1, 1, "x"]
    sql, args = upper_bound(["a", "b", "c"], (1, 2, 3))
    assert sql == "((`a` < %s) OR (`a` = %s AND `b` < %s) OR (`a` = %s AND `b` = %s AND `c` < %s))"
    assert args == [1, 1, 2, 1, 2, 3]


def test_chunk_predicate_binds_values_and_quotes_identifiers():
    sql, args = chunk_predicate(["we`ird"], Chunk(1, (Decimal("1.5"),), (Decimal("9"),)))
    assert sql == "((`we``ird` >= %s)) AND ((`we``ird` < %s))"
    assert args == [Decimal("1.5"), Decimal("9")]
    assert chunk_predicate(["id"], Chunk(0, None, None)) == ("TRUE", [])


def test_even_boundaries_reject_a_non_positive_step():
    with pytest.raises(ValueError):
        even_boundaries(1, 10, 0)


def _refine(keys: list[int], boundaries: list[int], step: int, chunk_size: int) -> list[int]:
    """refine_even over an in-memory key set: exact estimates, walks like the server's."""
    def inside(chunk: Chunk) -> list[int]:
        return [k for k in keys if (chunk.start is None or k >= chunk.start[0])
                and (chunk.end is None or k < chunk.end[0])]

    asked: list[Chunk] = []

    def estimate(chunk: Chunk) -> int:
        asked.append(chunk)
        return len(inside(chunk))

    def walk(chunk: Chunk) -> list[tuple[int]]:
        return [(k,) for k in inside(chunk)[chunk_size::chunk_size]]

    refined = refine_even([(b,) for b in boundaries], step, chunk_size, estimate, walk)
    _refine.asked = asked  # type: ignore[attr-defined]
    return [b for (b,) in refined]


def _sizes(keys: list[int], boundaries: list[int]) -> list[int]:
    edges = [None, *boundaries, None]
    return [sum(1 for k in keys if (lo is None or k >= lo) and (hi is None or k < hi))
            for lo, hi in zip(edges, edges[1:], strict=False)]


def test_sparse_keys_dense_in_one_place_get_chunks_near_chunk_size():
    # 100 keys spread over 1..100_000 and 5,000 dense keys at 50_000..54_999: an even split
    # by the average density puts ~5,000 rows in one chunk of 1,000 wanted.
    keys = sorted({*range(1, 100_001, 1000), *range(50_000, 55_000)})
    step = 20_000
    even = list(range(1 + step, 100_001, step))
    assert max(_sizes(keys, even)) > 4000
    refined = _refine(keys, even, step, 1000)
    assert set(even) <= set(refined) and refined == sorted(refined)
    assert max(_sizes(keys, refined)) <= 2 * 1000
    assert sum(_sizes(keys, refined)) == len(keys)


def test_dense_keys_are_not_estimated_their_step_bounds_every_chunk():
    keys = list(range(1, 10_001))
    even = list(range(1001, 10_001, 1000))
    assert _refine(keys, even, 1000, 1000) == even
    assert _refine.asked == []  # type: ignore[attr-defined]


def test_a_batch_of_chunks_is_read_by_at_most_two_spark_tasks_per_core():
    from lakehouse_engine.snapshot.reader import task_count

    assert task_count(20, 2) == 4  # each task reads 5 chunks in a row
    assert task_count(3, 2) == 3  # never a task without a chunk
    assert task_count(1, 64) == 1
    assert task_count(40, 0) == 2  # an unknown core count still reads
