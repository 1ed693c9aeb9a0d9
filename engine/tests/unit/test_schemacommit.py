"""Which schema changes Delta can record without rewriting files, and the schema they make."""

from __future__ import annotations

import json

import pytest

from lakehouse_engine.config.defaults import TABLE_FEATURES
from lakehouse_engine.errors import ConfigError
from lakehouse_engine.sink import columnmap
from lakehouse_engine.sink.schemacommit import (
    FEATURES,
    TYPE_CHANGES,
    TYPE_WIDENING,
    evolved_fields,
    json_type,
    needed_features,
    widens,
)
from lakehouse_engine.state.lakechange import Kind, LakeChange

META = ("_op", "_batch")


def field(name: str, type_: str = "integer", physical: str | None = None, **metadata: object) -> dict:
    meta = dict(metadata)
    if physical is not None:
        meta |= {"delta.columnMapping.id": hash(physical) % 1000, columnmap.PHYSICAL_NAME: physical}
    return {"name": name, "type": type_, "nullable": True, "metadata": meta}


def table() -> list[dict]:
    return [field("id", physical="col-id"), field("name", "string", physical="col-name"),
            field("qty", physical="col-qty"), field("_op", "string", physical="col-op"),
            field("_batch", "long", physical="col-batch")]


@pytest.mark.parametrize(("old", "new"), [
    ("byte", "short"), ("short", "integer"), ("integer", "long"), ("byte", "long"),
    ("integer", "decimal(10,0)"), ("short", "decimal(10,0)"), ("byte", "decimal(12,2)"), ("long", "decimal(20,0)"),
    ("integer", "double"),
    ("decimal(10,2)", "decimal(12,4)"), ("decimal(10,2)", "decimal(11,2)"), ("float", "double"),
    ("date", "timestamp_ntz"),
])
def test_delta_widens_types_that_keep_every_value(old, new):
    assert widens(old, new)


@pytest.mark.parametrize(("old", "new"), [
    ("long", "integer"), ("integer", "integer"), ("integer", "decimal(9,0)"), ("integer", "decimal(12,3)"),
    ("short", "decimal(7,2)"), ("byte", "decimal(5,0)"),  # Delta asks 10 integer digits of every integer below long
    ("long", "decimal(19,0)"), ("long", "double"), ("decimal(10,2)", "decimal(11,4)"),
    ("decimal(10,2)", "decimal(10,1)"), ("decimal(10,2)", "decimal(12,1)"), ("double", "float"),
    ("integer", "string"), ("string", "binary"), ("timestamp", "timestamp_ntz"),
])
def test_delta_does_not_widen_changes_that_could_lose_a_value(old, new):
    assert not widens(old, new)


def test_sql_type_names_become_delta_schema_type_names():
    assert [json_type(t) for t in ("tinyint", "smallint", "int", "bigint", "decimal(12,3)", "string")] == [
        "byte", "short", "integer", "long", "decimal(12,3)", "string"]


def test_a_rename_keeps_the_physical_name_so_existing_files_still_read():
    fields = evolved_fields(table(), [LakeChange(Kind.RENAME, "name", to="label")], META)
    assert [f["name"] for f in fields] == ["id", "label", "qty", "_op", "_batch"]
    assert fields[1]["metadata"][columnmap.PHYSICAL_NAME] == "col-name"


def test_a_drop_removes_the_field_and_keeps_the_others_mapping():
    fields = evolved_fields(table(), [LakeChange(Kind.DROP, "qty")], META)
    assert [(f["name"], f["metadata"][columnmap.PHYSICAL_NAME]) for f in fields] == [
        ("id", "col-id"), ("name", "col-name"), ("_op", "col-op"), ("_batch", "col-batch")]


def test_an_added_null_column_goes_before_the_lake_columns_without_a_physical_name_of_its_own():
    fields = evolved_fields(table(), [LakeChange(Kind.ADD, "note", type="string")], META)
    assert [f["name"] for f in fields] == ["id", "name", "qty", "note", "_op", "_batch"]
    assert fields[3] == {"name": "note", "type": "string", "nullable": True, "metadata": {}}


def test_a_supported_widening_changes_the_type_and_records_the_change_as_delta_does():
    fields = evolved_fields(table(), [LakeChange(Kind.CAST, "qty", type="bigint")], META)
    assert fields[2]["type"] == "long" and fields[2]["metadata"][columnmap.PHYSICAL_NAME] == "col-qty"
    assert fields[2]["metadata"][TYPE_CHANGES] == [{"toType": "long", "fromType": "integer"}]
    again = evolved_fields(fields, [LakeChange(Kind.CAST, "qty", type="decimal(20,0)")], META)
    assert again[2]["metadata"][TYPE_CHANGES] == [{"toType": "long", "fromType": "integer"},
                                                  {"toType": "decimal(20,0)", "fromType": "long"}]


def test_a_column_dropped_and_added_again_with_another_type_records_no_type_change():
    changes = [LakeChange(Kind.DROP, "name"), LakeChange(Kind.ADD, "name", type="int")]
    fields = evolved_fields(table(), changes, META)
    assert fields[2] == {"name": "name", "type": "integer", "nullable": True, "metadata": {}}


def test_a_renamed_and_widened_column_records_its_type_change_under_its_new_name():
    changes = [LakeChange(Kind.RENAME, "qty", to="amount"), LakeChange(Kind.CAST, "amount", type="bigint")]
    fields = evolved_fields(table(), changes, META)
    assert fields[2]["name"] == "amount"
    assert fields[2]["metadata"][TYPE_CHANGES] == [{"toType": "long", "fromType": "integer"}]


@pytest.mark.parametrize("change", [
    LakeChange(Kind.ADD, "note", type="string", value="'n/a'"),  # existing rows hold a value
    LakeChange(Kind.FILL, "qty", value="0"),
    LakeChange(Kind.FORGET, "", value="123"),
    LakeChange(Kind.CAST, "qty", type="decimal(5,0)"),  # Delta cannot widen int to it
    LakeChange(Kind.RENAME, "missing", to="other"),
    LakeChange(Kind.DROP, "missing"),
    LakeChange(Kind.ADD, "qty", type="int"),  # exists already: another run applied the change
    LakeChange(Kind.RENAME, "name", to="qty"),
])
def test_changes_of_values_or_that_delta_cannot_record_need_a_rewrite(change):
    assert evolved_fields(table(), [change], META) is None


def test_changes_apply_in_order_a_renamed_column_can_then_be_widened():
    changes = [LakeChange(Kind.RENAME, "qty", to="amount"), LakeChange(Kind.CAST, "amount", type="bigint"),
               LakeChange(Kind.DROP, "name"), LakeChange(Kind.ADD, "name", type="string")]
    fields = evolved_fields(table(), changes, META)
    assert [(f["name"], f["type"]) for f in fields] == [
        ("id", "integer"), ("amount", "long"), ("name", "string"), ("_op", "string"), ("_batch", "long")]
    assert fields[1]["metadata"][columnmap.PHYSICAL_NAME] == "col-qty"
    assert columnmap.PHYSICAL_NAME not in fields[2]["metadata"], "a re-added column must not read the dropped one"


def test_the_source_description_replaces_the_fields_descriptions_in_the_lakes_order():
    described = [field("id", source={"column_type": "int"}), field("qty", source={"column_type": "int(11)"}),
                 field("label", "string", source={"column_type": "varchar(20)"})]
    fields = evolved_fields(table(), [LakeChange(Kind.RENAME, "name", to="label")], META, described)
    assert [f["name"] for f in fields] == ["id", "label", "qty", "_op", "_batch"]
    assert fields[1]["metadata"] == {"source": {"column_type": "varchar(20)"},
                                     "delta.columnMapping.id": table()[1]["metadata"]["delta.columnMapping.id"],
                                     columnmap.PHYSICAL_NAME: "col-name"}


def test_a_description_only_change_is_recorded_without_a_rewrite():
    described = [field("id"), field("name", "string", source={"column_type": "enum('a','b','c')"}), field("qty")]
    fields = evolved_fields(table(), [LakeChange(Kind.DESCRIBE, "name")], META, described)
    assert fields is not None and fields[1]["metadata"]["source"] == {"column_type": "enum('a','b','c')"}


def test_changes_that_do_not_lead_to_the_source_columns_are_left_to_the_rewrite():
    described = [field("id"), field("name", "string"), field("qty", "long")]  # a type no change gave
    assert evolved_fields(table(), [LakeChange(Kind.DESCRIBE, "name")], META, described) is None
    assert evolved_fields(table(), [], META, [field("id"), field("qty")]) is None


def test_the_input_schema_is_not_modified():
    before = table()
    evolved_fields(before, [LakeChange(Kind.RENAME, "name", to="label"), LakeChange(Kind.CAST, "qty", type="bigint")],
                   META)
    assert before == table()


def test_rename_and_drop_need_column_mapping_widening_needs_type_widening():
    assert needed_features([LakeChange(Kind.ADD, "x", type="int")]) == set()
    assert needed_features([LakeChange(Kind.DROP, "x")]) == {"column_mapping"}
    assert needed_features([LakeChange(Kind.RENAME, "x", to="y"), LakeChange(Kind.CAST, "y", type="bigint")]) == {
        "column_mapping", "type_widening"}
    assert FEATURES["column_mapping"].prop == columnmap.MODE and FEATURES["type_widening"].prop == TYPE_WIDENING
    assert set(FEATURES) == set(TABLE_FEATURES)  # every feature a project may opt into



def test_a_column_added_or_renamed_under_a_name_delta_refuses_needs_column_mapping():
    assert needed_features([LakeChange(Kind.ADD, "loyalty points", type="int")]) == {"column_mapping"}
    assert needed_features([LakeChange(Kind.RENAME, "x", to="a=b")]) == {"column_mapping"}
    plain = [LakeChange(Kind.ADD, "prix€", type="int"), LakeChange(Kind.ADD, "a`b", type="int")]
    assert needed_features(plain) == set()


@pytest.mark.parametrize("name", ["order id", "a,b", "a;b", "{k}", "(n)", "x=y", "a\nb", "a\tb"])
def test_tables_with_a_name_delta_refuses_are_created_with_column_mapping(name):
    assert columnmap.creation_properties(["id", name]) == {columnmap.MODE: "name"}


@pytest.mark.parametrize("name", ["prix€", "select", "a`b", "été", "_op", "x.y"])
def test_tables_whose_names_delta_takes_are_created_without_column_mapping(name):
    assert columnmap.creation_properties(["id", name]) == {}

def test_without_column_mapping_files_hold_each_column_under_its_own_name():
    schema = json.dumps({"type": "struct", "fields": table()})
    assert columnmap.physical_names(schema, {}) == {f["name"]: f["name"] for f in table()}
    assert columnmap.physical_names(schema, {columnmap.MODE: "none"})["name"] == "name"


def test_with_column_mapping_files_hold_columns_under_their_physical_names():
    schema = json.dumps({"type": "struct", "fields": [*table(), field("plain")]})
    names = columnmap.physical_names(schema, {columnmap.MODE: "name"})
    assert names["name"] == "col-name" and names["_batch"] == "col-batch"
    assert names["plain"] == "plain"  # a column from before the upgrade keeps its name
    assert columnmap.renamed([*names][::-1], names) == [*names.values()][::-1]
    assert columnmap.renamed(["id", "name"], None) == ["id", "name"]


def test_a_file_whose_columns_are_not_exactly_the_tables_is_refused():
    names = {"id": "col-id", "y": "x"}  # y was renamed from x: its files hold it as x
    with pytest.raises(columnmap.StaleColumns):
        columnmap.renamed(["id", "y", "x"], names)  # a new x would land where y is read from
    with pytest.raises(columnmap.StaleColumns):
        columnmap.renamed(["id"], names)  # y would read as NULL


def test_a_column_mapping_mode_the_engine_does_not_write_is_a_clear_error():
    schema = json.dumps({"type": "struct", "fields": table()})
    with pytest.raises(ConfigError, match="mode 'id'.*set the table property"):
        columnmap.physical_names(schema, {columnmap.MODE: "id"})


def test_data_columns_an_older_version_added_after_the_lake_columns_move_before_them():
    older = [*table(), field("note", "string")]  # a NULL column added by a mergeSchema append
    fields = evolved_fields(older, [LakeChange(Kind.RENAME, "note", to="remark")], META)
    assert [f["name"] for f in fields] == ["id", "name", "qty", "remark", "_op", "_batch"]
