"""The fingerprint's arithmetic stays inside a signed BIGINT on both sides, and one changed value
always changes a row's fingerprint (the SQL and Spark halves agreeing is proven on a real server
and Spark in integration/test_fingerprint_literals.py and test_full_types.py)."""

from __future__ import annotations

import random

from lakehouse_engine.quality.fingerprint import (
    INT_OFFSET,
    LOW_BITS,
    MODULUS,
    NULL_VALUE,
    REFUSED_VALUE,
    TERMS_PER_REDUCTION,
    WEIGHT_BITS,
    _fold,
    column_weight,
    sql_row_hash,
    sql_term,
)
from lakehouse_engine.source.introspect import ColumnInfo

POSITIONS = range(4096)
SIGNED_BIGINT_MAX = 2**63 - 1


def test_every_column_and_bigint_half_has_its_own_odd_weight_under_the_bound():
    weights = [column_weight(p) for p in POSITIONS] + [column_weight(p, high_half=True) for p in POSITIONS]
    assert len(set(weights)) == len(weights)
    assert all(w % 2 == 1 and 0 < w < 2**WEIGHT_BITS for w in weights)


def test_no_term_and_no_running_sum_can_overflow_a_signed_bigint():
    biggest_weight = 2**WEIGHT_BITS - 1
    largest_value = max(REFUSED_VALUE, NULL_VALUE, 2**32 - 1 + INT_OFFSET)  # unsigned INT + offset, CRC-32
    largest_term = max(largest_value * biggest_weight, 2 * (LOW_BITS - 1) * biggest_weight)  # a BIGINT's halves
    assert largest_term < 2**61
    assert (MODULUS - 1) + TERMS_PER_REDUCTION * largest_term <= SIGNED_BIGINT_MAX


def test_one_changed_value_always_changes_the_sum_modulo_the_prime():
    # A term moves by weight * (difference of values): non-zero and smaller than the prime.
    largest_move = (2**WEIGHT_BITS - 1) * (REFUSED_VALUE + INT_OFFSET)
    assert largest_move < MODULUS
    assert MODULUS == 2**61 - 1  # a Mersenne prime: no move smaller than it is a multiple of it


def test_the_fold_is_the_sum_modulo_the_prime_and_adds_at_most_a_reduction_of_terms_at_once():
    rng = random.Random(7)
    widths: list[int] = []

    def reduce(parts):
        widths.append(len(parts))
        return f"(({' + '.join(parts)}) % {MODULUS})"

    for count in (1, 2, 3, 4, 7, 40, 48, 49, 200):
        terms = [rng.randrange(2**61) for _ in range(count)]
        assert eval(_fold([str(t) for t in terms], reduce)) == sum(terms) % MODULUS  # noqa: S307 - our own digits
        assert max(widths) <= TERMS_PER_REDUCTION + 1


def test_integers_are_weighed_as_numbers_and_text_by_its_crc_never_spelled_as_hex():
    number = ColumnInfo("n", "int", "int(11)", True)
    big = ColumnInfo("b", "bigint", "bigint(20)", True)
    name = ColumnInfo("s", "varchar", "varchar(20)", True)
    assert sql_term(number, 0) == f"COALESCE(`n` + {INT_OFFSET}, {NULL_VALUE}) * {column_weight(0)}"
    assert "`b` >> 32" in sql_term(big, 1) and str(column_weight(1, high_half=True)) in sql_term(big, 1)
    assert "CRC32(CONVERT(`s` USING utf8mb4))" in sql_term(name, 2)
    assert "HEX" not in sql_row_hash((number, big, name)) and "MD5" not in sql_row_hash((number, big, name))


def test_the_sql_half_drops_the_guards_a_column_cannot_need_and_keeps_its_arithmetic_grouped():
    not_null = ColumnInfo("n", "int", "int(11)", False)
    big = ColumnInfo("b", "bigint", "bigint(20)", False)
    utf8 = ColumnInfo("s", "varchar", "varchar(20)", True, charset="utf8mb4")
    utf8_not_null = ColumnInfo("t", "text", "text", False, charset="utf8mb4")
    latin1 = ColumnInfo("l", "varchar", "varchar(20)", True, charset="latin1")
    assert sql_term(not_null, 0) == f"(`n` + {INT_OFFSET}) * {column_weight(0)}"  # never `n` + (offset * weight)
    assert sql_term(big, 1).startswith("((`b` & ") and "COALESCE" not in sql_term(big, 1)
    assert sql_term(utf8, 2) == f"COALESCE(CRC32(`s`), {NULL_VALUE}) * {column_weight(2)}"
    assert sql_term(utf8_not_null, 3) == f"(CRC32(`t`)) * {column_weight(3)}"
    assert "CRC32(CONVERT(`l` USING utf8mb4))" in sql_term(latin1, 4)

