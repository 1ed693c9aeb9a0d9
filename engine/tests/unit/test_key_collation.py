"""Key uniqueness in the source's collation: the rule read from a collation's name, the Spark
collation and folds that find candidates, and what the source's answer makes of them."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from lakehouse_engine.quality.collation import collation_rule
from lakehouse_engine.quality.uniqueness import (
    Collision,
    KeyColumn,
    _partition_sql,
    canonical,
    collision_message,
    collisions_of,
    key_columns,
    unused_name,
)
from lakehouse_engine.source.introspect import ColumnInfo, TableSchema


@pytest.mark.parametrize("name, case_insensitive, accent_insensitive, pad_space, spark", [
    # MariaDB's defaults and their NO PAD twins.
    ("utf8mb4_general_ci", True, True, True, "UNICODE_CI_AI_RTRIM"),
    ("utf8mb4_general_nopad_ci", True, True, False, "UNICODE_CI_AI"),
    ("utf8mb4_unicode_ci", True, True, True, "UNICODE_CI_AI_RTRIM"),
    ("utf8mb4_unicode_520_nopad_ci", True, True, False, "UNICODE_CI_AI"),
    ("latin1_swedish_ci", True, True, True, "UNICODE_CI_AI_RTRIM"),
    # Byte comparisons: PAD SPACE still makes 'abc' and 'abc ' one key in the old _bin ones.
    ("utf8mb4_bin", False, False, True, "UTF8_BINARY_RTRIM"),
    ("latin1_bin", False, False, True, "UTF8_BINARY_RTRIM"),
    ("utf8mb4_nopad_bin", False, False, False, None),
    ("utf8mb4_0900_bin", False, False, False, None),
    ("binary", False, False, False, None),
    # Case-sensitive ones keep accents apart; _as_ / _ai_ / _w2 say it outright.
    ("latin1_general_cs", False, False, True, "UNICODE_RTRIM"),
    ("utf8mb4_0900_ai_ci", True, True, False, "UNICODE_CI_AI"),
    ("utf8mb4_0900_as_ci", True, False, False, "UNICODE_CI"),
    ("utf8mb4_0900_as_cs", False, False, False, "UNICODE"),
    ("utf8mb4_ja_0900_as_cs_ks", False, False, False, "UNICODE"),
    ("utf8mb4_thai_520_w2", True, False, True, "UNICODE_CI_RTRIM"),
    ("utf8mb4_uca1400_ai_ci", True, True, True, "UNICODE_CI_AI_RTRIM"),
    ("utf8mb4_uca1400_nopad_as_cs", False, False, False, "UNICODE"),
])
def test_the_rule_and_spark_collation_of_a_collation_name(name, case_insensitive, accent_insensitive, pad_space,
                                                            spark):
    rule = collation_rule(name)
    assert (rule.case_insensitive, rule.accent_insensitive, rule.pad_space) == (
        case_insensitive, accent_insensitive, pad_space)
    assert rule.spark_collation == spark
    assert rule.exact == (spark is None)


def test_names_that_could_carry_sql_are_refused():
    # Collation names are spliced into the confirming query (they cannot be bound).
    for name in ("utf8mb4_general_ci; DROP TABLE t", "utf8mb4_general_ci`", "utf8mb4 general_ci"):
        with pytest.raises(ValueError, match="unexpected collation"):
            collation_rule(name)


def test_folds_add_only_the_equalities_icu_lacks_for_that_family():
    general = collation_rule("utf8mb4_general_ci")
    assert general.folds == (("ßı", "si"),) and general.supplementary_equal
    # unicode_ci: 'ß' = 'ss', which folding 'ß' to 's' would hide; emoji equal, NBSP = space.
    unicode = collation_rule("utf8mb4_unicode_ci")
    assert unicode.folds == (("\u00a0", " "),) and unicode.supplementary_equal
    assert "ß" not in "".join(s for s, _ in collation_rule("utf8mb4_swedish_ci").folds)
    # UCA 5.2.0 weighs every emoji apart; utf8mb3 cannot hold one; byte collations fold nothing.
    assert not collation_rule("utf8mb4_unicode_520_ci").supplementary_equal
    assert not collation_rule("utf8mb3_general_ci").supplementary_equal
    assert collation_rule("utf8mb4_bin").folds == () and not collation_rule("utf8mb4_bin").supplementary_equal
    assert collation_rule("latin1_general_cs").folds == ()


def test_the_description_names_what_the_collation_ignores():
    assert collation_rule("utf8mb4_general_ci").describe() == "case-, accent- and trailing-space-insensitive"
    assert collation_rule("utf8mb4_bin").describe() == "trailing-space-insensitive"
    assert collation_rule("utf8mb4_0900_as_ci").describe() == "case-insensitive"
    assert collation_rule("utf8mb4_0900_ai_ci").describe() == "case- and accent-insensitive"
    assert collation_rule("utf8mb4_nopad_bin").describe() == "byte for byte"


def _column(name: str, data_type: str, collation: str | None = None) -> ColumnInfo:
    charset = collation.split("_", 1)[0] if collation else None
    return ColumnInfo(name, data_type, data_type, False, collation=collation, charset=charset)


def test_only_string_key_columns_whose_collation_equates_other_bytes_are_compared_by_class():
    schema = TableSchema("db", "t", (
        _column("id", "int"), _column("sku", "varchar", "utf8mb4_general_ci"),
        _column("code", "varchar", "utf8mb4_nopad_bin"), _column("raw", "varbinary", "binary"),
        _column("tag", "varchar", "utf8mb4_bin"), _column("note", "varchar", "utf8mb4_general_ci"),
    ), key=("id", "sku", "code", "raw", "tag"))
    frame = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("sku", T.StringType()),
                          T.StructField("code", T.StringType()), T.StructField("raw", T.BinaryType()),
                          T.StructField("tag", T.StringType())])
    columns = key_columns(schema, frame)
    assert [c.checked for c in columns] == ["id", "sku in utf8mb4_general_ci", "code", "raw", "tag in utf8mb4_bin"]
    # A transform that made the key a number in silver: nothing to compare by collation.
    numbers = T.StructType([f if f.name != "sku" else T.StructField("sku", T.LongType()) for f in frame.fields])
    assert key_columns(schema, numbers)[1].rule is None


def test_a_class_column_never_takes_the_name_of_a_column_of_silver():
    sku = ColumnInfo("sku", "varchar", "varchar(9)", False, collation="utf8mb4_general_ci", charset="utf8mb4")
    schema = TableSchema("db", "t", (sku,), ("sku",))
    # Spark compares names case-insensitively: a column spelled in other case is taken too.
    frame = T.StructType([T.StructField("sku", T.StringType()),
                          T.StructField("SKU in utf8mb4_general_ci", T.LongType()),
                          T.StructField("sku in utf8mb4_general_ci (2)", T.LongType())])
    (column,) = key_columns(schema, frame)
    assert column.checked == "sku in utf8mb4_general_ci (3)"
    assert unused_name("_s0", ["a", "b"]) == "_s0" and unused_name("_s0", ["_S0"]) == "_s0 (2)"


def test_the_source_decides_which_candidates_are_one_key():
    groups = [[("ABC",), ("abc",), ("abd ",)], [("straße",), ("strasse",)]]
    # The server's answer: (group, spelling, first equal spelling). 'abd ' is alone in its class.
    answer = [(0, 0, 0), (0, 1, 0), (0, 2, 2), (1, 0, 0), (1, 1, 1)]
    classes = canonical(groups, answer)
    assert classes == {("ABC",): ("ABC",), ("abc",): ("ABC",)}

    counted = [{("ABC",): 1, ("abc",): 2, ("abd ",): 1}, {("straße",): 1, ("strasse",): 1}, {("x",): 3}]
    assert collisions_of(counted, classes) == (
        Collision((("ABC",), ("abc",)), 3),
        Collision((("x",),), 3),  # a byte-exact duplicate needs no confirmation
    )
    # Spellings the source keeps apart are no collision, but one of them on two rows is.
    assert collisions_of([{("straße",): 2, ("strasse",): 1}], {}) == (Collision((("straße",),), 2),)


def test_the_confirming_query_groups_each_candidate_group_apart_in_the_columns_collation():
    columns = [KeyColumn("id"), KeyColumn("code", collation_rule("latin1_swedish_ci"))]
    sql, args = _partition_sql(columns, [(0, 0, ["abc"]), (0, 1, ["ABC"]), (1, 0, ["abc"])])
    assert sql.startswith("SELECT g, n, MIN(n) OVER (PARTITION BY g, v0) FROM (")
    assert sql.count("CONVERT(%s USING latin1) COLLATE latin1_swedish_ci AS v0") == 3
    assert args == [0, 0, "abc", 0, 1, "ABC", 1, 0, "abc"]


def test_the_message_names_the_table_key_collation_an_example_and_the_fix():
    sku = [KeyColumn("sku", collation_rule("utf8mb4_general_ci"))]
    message = collision_message("products", sku, [Collision((("x",),), 2), Collision((("ABC",), ("abc ",)), 2)])
    assert message.startswith("table products: 2 keys of silver held by more than one row")
    assert "(utf8mb4_general_ci: case-, accent- and trailing-space-insensitive)" in message
    assert "e.g. sku 'ABC' and 'abc ' are one key (2 rows)" in message  # differing spellings first
    assert message.endswith("write silver anew from bronze with `make rebuild TABLE=products` (a row held "
                            "twice is not re-read away), then `make repair TABLE=products` if a spelling the "
                            "source does not hold remains")  # x is held twice byte for byte
    spellings = collision_message("products", sku, [Collision((("ABC",), ("abc ",)), 2)])
    assert spellings.endswith("re-read those keys with `make repair TABLE=products` (it deletes the spellings "
                              "the source does not hold)")

    pair = [KeyColumn("order_id"), KeyColumn("sku", collation_rule("utf8mb4_bin"))]
    message = collision_message("items", pair, [Collision(((7, "a"), (7, "a ")), 2)], complete=False)
    assert "1 or more keys of silver" in message
    assert "utf8mb4_bin: trailing-space-insensitive, for sku" in message
    assert "(order_id, sku) (7, 'a') and (7, 'a ') are one key" in message
    assert "sku 'x' is held by 2 rows" in collision_message("products", sku, [Collision((("x",),), 2)])
