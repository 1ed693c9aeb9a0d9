"""A configured key must be one the source enforces as unique: the pure decision logic."""

import pytest

from lakehouse_engine.errors import ConfigError
from lakehouse_engine.source.introspect import (
    ColumnInfo,
    UniqueIndex,
    check_key,
    covering_index,
    lower_outside_quotes,
    natural_key,
    unique_indexes,
)


def column(name: str, nullable: bool = False) -> ColumnInfo:
    return ColumnInfo(name=name, data_type="int", column_type="int(11)", nullable=nullable)


COLUMNS = (column("id"), column("email"), column("tenant"), column("line"), column("note", nullable=True))
INDEXES = (
    UniqueIndex("PRIMARY", ("id",)),
    UniqueIndex("uq_email", ("email",)),
    UniqueIndex("uq_tenant_line", ("tenant", "line")),
)


def test_statistics_rows_group_into_indexes_in_index_order():
    rows = [("PRIMARY", "id"), ("uq_tenant_line", "tenant"), ("uq_tenant_line", "line")]
    assert unique_indexes(rows) == (
        UniqueIndex("PRIMARY", ("id",)),
        UniqueIndex("uq_tenant_line", ("tenant", "line")),
    )


def test_a_unique_index_with_an_expression_part_does_not_make_its_columns_unique():
    rows = [("uq_lower_email", None), ("uq_lower_email", "tenant"), ("PRIMARY", "id")]
    assert unique_indexes(rows) == (UniqueIndex("PRIMARY", ("id",)),)


@pytest.mark.parametrize(
    "key",
    [("id",), ("email",), ("tenant", "line"), ("line", "tenant"), ("id", "email"), ("tenant", "line", "email")],
)
def test_a_key_containing_every_column_of_a_unique_index_is_accepted(key):
    assert covering_index(key, INDEXES) is not None
    check_key("demo.t", key, COLUMNS, INDEXES)


def test_key_columns_match_index_columns_case_insensitively_as_the_server_does():
    assert covering_index(("ID",), (UniqueIndex("PRIMARY", ("id",)),)) == UniqueIndex("PRIMARY", ("id",))


@pytest.mark.parametrize("key", [("tenant",), ("line",), ("tenant", "note")])
def test_a_key_only_part_of_a_unique_index_is_not_unique(key):
    assert covering_index(key, INDEXES) is None


def test_a_non_unique_key_is_refused_naming_table_columns_and_fix():
    with pytest.raises(ConfigError) as excinfo:
        check_key("demo.t", ("tenant",), COLUMNS, INDEXES)
    message = str(excinfo.value)
    assert "\n" not in message
    assert message.startswith("table demo.t: key (tenant) is not unique on the source")
    assert "uq_tenant_line (tenant, line)" in message and "PRIMARY (id)" in message
    assert "add-table --key" in message and "add a UNIQUE index on (tenant)" in message


def test_a_table_without_unique_indexes_refuses_every_configured_key():
    with pytest.raises(ConfigError, match=r"key \(id\) is not unique.*unique indexes: none"):
        check_key("demo.t", ("id",), COLUMNS, ())


def test_a_nullable_key_column_is_refused_even_when_unique():
    indexes = (*INDEXES, UniqueIndex("uq_note", ("note",)))
    with pytest.raises(ConfigError, match="key column 'note' is nullable.*declare it NOT NULL"):
        check_key("demo.t", ("note",), COLUMNS, indexes)


def test_an_unknown_or_misspelled_key_column_is_refused():
    with pytest.raises(ConfigError, match="key column 'nope' does not exist"):
        check_key("demo.t", ("nope",), COLUMNS, INDEXES)
    with pytest.raises(ConfigError, match="key column 'ID' does not exist \\(the column is spelled 'id'\\)"):
        check_key("demo.t", ("ID",), COLUMNS, INDEXES)


def test_the_natural_key_is_the_first_unique_index_without_nullable_columns():
    indexes = (UniqueIndex("uq_note", ("note",)), UniqueIndex("uq_email", ("email",)))
    assert natural_key("demo.t", COLUMNS, indexes) == ("email",)
    with pytest.raises(ConfigError, match="no primary key or NOT NULL unique key") as refused:
        natural_key("demo.t", COLUMNS, indexes[:1])
    assert str(refused.value).endswith("or `add-table t --key col1,col2`")  # the scaffold's way too


def test_a_column_type_is_lower_case_outside_its_members_which_keep_their_case():
    described = lower_outside_quotes("SET('A','it''s B','Ã©') ")
    assert described == "set('A','it''s B','Ã©') "
    assert ColumnInfo("s", "set", described, True).members == ("A", "it's B", "Ã©")
    assert lower_outside_quotes("BIGINT(20) UNSIGNED") == "bigint(20) unsigned"
