import ast
import datetime as dt
import importlib
import os
import sys

import pytest
from acme_lakehouse import tables

from lakehouse_engine.config.project import Delivery, Startup
from lakehouse_engine.errors import ConfigError
from lakehouse_engine.run.scaffold import TableModuleSpec, render_table_module
from lakehouse_engine.state.positions import BinlogPosition
from lakehouse_engine.tables import TableSpec, discover


def test_every_generated_table_module_is_discovered():
    found = discover(tables)
    assert found, "the template should have generated at least one table module"
    assert all(spec.source_table for spec in found.values())


def test_a_table_module_written_after_the_first_look_is_found_even_when_its_folder_mtime_did_not_move(
        tmp_path, monkeypatch):
    package = tmp_path / "late_pkg" / "tables"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    module = "from lakehouse_engine.tables import TableSpec\n\nTABLE = TableSpec({0!r}, {0!r})\n"
    (package / "first.py").write_text(module.format("first"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))  # the package is forgotten after the test
    found = importlib.import_module("late_pkg.tables")
    assert set(discover(found)) == {"first"}
    # follow looks again while it runs; a file added within the folder's mtime resolution leaves
    # the import system's cached listing of the folder as it was
    before = package.stat()
    (package / "second.py").write_text(module.format("second"))
    os.utime(package, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert set(discover(found)) == {"first", "second"}


def test_scaffolded_modules_are_valid_python_with_the_key():
    text = render_table_module(TableModuleSpec("Orders", key=("id",), columns=(("id", "int"),)))
    ast.parse(text)
    assert 'name="orders"' in text and "key=('id',)" in text and "#   id: int" in text


def test_a_misspelt_delivery_mode_is_refused_naming_the_table_not_treated_as_another_mode():
    with pytest.raises(ConfigError, match=r"table 'orders': delivery is 'exactly-once'; use one of 'exactly_once'"):
        TableSpec("orders", "orders", delivery="exactly-once")


def test_a_delivery_given_as_text_becomes_the_mode_and_overrides_the_project_default():
    spec = TableSpec("orders", "orders", delivery="at_least_once")
    assert spec.delivery is Delivery.AT_LEAST_ONCE
    assert spec.delivery_or(Delivery.EXACTLY_ONCE) is Delivery.AT_LEAST_ONCE
    assert TableSpec("orders", "orders").delivery_or(Delivery.EXACTLY_ONCE) is Delivery.EXACTLY_ONCE


def test_a_single_key_column_given_as_text_is_one_column_not_its_letters():
    assert TableSpec("orders", "orders", key="id").key == ("id",)
    assert TableSpec("orders", "orders", key=["a", "b"]).key == ("a", "b")


@pytest.mark.parametrize("key", [(), ("",), (1,)])
def test_an_empty_or_non_text_key_is_refused(key):
    with pytest.raises(ConfigError, match="table 'orders': key is"):
        TableSpec("orders", "orders", key=key)


@pytest.mark.parametrize("size", [0, -5, 2.5, True, "100"])
def test_a_chunk_size_that_is_not_a_positive_whole_number_is_refused(size):
    with pytest.raises(ConfigError, match=f"table 'orders': chunk_size is {size!r}"):
        TableSpec("orders", "orders", chunk_size=size)


def test_a_refused_table_argument_carries_the_table_and_setting_as_fields():
    with pytest.raises(ConfigError) as refused:
        TableSpec("orders", "orders", chunk_size=0)
    assert refused.value.fields() == {"category": "configuration", "table": "orders", "setting": "chunk_size"}


def test_a_startup_position_needs_a_parseable_start_position_and_only_then():
    spec = TableSpec("orders", "orders", startup="position", start_position="mysql-bin.000003:1234")
    assert spec.startup is Startup.POSITION and not spec.snapshots
    assert spec.start_at() == BinlogPosition("mysql-bin.000003", 1234)
    assert TableSpec("orders", "orders").snapshots and TableSpec("orders", "orders").start_at() is None
    for bad in ({"startup": "position"}, {"start_position": "mysql-bin.000003:4"},
                {"startup": "position", "start_position": "mysql-bin.000003"},
                {"startup": "position", "start_position": "nonumber:4"}):
        with pytest.raises(ConfigError, match="start_position") as refused:
            TableSpec("orders", "orders", **bad)
        assert refused.value.setting == "start_position"


def test_a_startup_gtid_needs_a_mariadb_gtid_or_gtid_position_and_only_then():
    spec = TableSpec("orders", "orders", startup="gtid", start_gtid="0-1-1234")
    assert spec.startup is Startup.GTID and not spec.snapshots and spec.start_at() is None
    assert TableSpec("orders", "orders", startup="gtid", start_gtid="0-1-5, 1-1-7").start_gtid == "0-1-5, 1-1-7"
    for bad in ({"startup": "gtid"}, {"start_gtid": "0-1-5"}, {"startup": "gtid", "start_gtid": "0-1"},
                {"startup": "gtid", "start_gtid": "0-1-5,0-2-7"}, {"startup": "gtid", "start_gtid": "uuid:5"},
                {"startup": "gtid", "start_gtid": "0-1-5,"},
                {"startup": "position", "start_position": "mysql-bin.000003:4", "start_gtid": "0-1-5"}):
        with pytest.raises(ConfigError, match="start_gtid") as refused:
            TableSpec("orders", "orders", **bad)
        assert refused.value.setting == "start_gtid"


def test_a_startup_timestamp_needs_a_time_with_its_zone():
    spec = TableSpec("orders", "orders", startup="timestamp", start_timestamp="2026-11-23T10:00:00+01:00")
    assert spec.startup is Startup.TIMESTAMP and not spec.snapshots
    assert spec.start_epoch() == dt.datetime(2026, 11, 23, 9, 0, tzinfo=dt.UTC).timestamp()
    utc = TableSpec("orders", "orders", startup="timestamp", start_timestamp="2026-11-23T10:00:00Z")
    assert utc.start_epoch() == dt.datetime(2026, 11, 23, 10, 0, tzinfo=dt.UTC).timestamp()
    assert TableSpec("orders", "orders").start_epoch() is None
    for bad, says in ((None, "goes with startup='timestamp'"), ("2026-11-23T10:00:00", "has no zone"),
                      ("yesterday", "not an ISO 8601 time"), (1700000000, "use an ISO 8601 time")):
        with pytest.raises(ConfigError, match=says) as refused:
            TableSpec("orders", "orders", startup="timestamp", start_timestamp=bad)
        assert refused.value.setting == "start_timestamp"


def test_an_unknown_startup_mode_is_refused_naming_the_modes():
    with pytest.raises(ConfigError, match="startup is 'earliest'; use one of 'initial', 'latest', 'position', "
                                          "'gtid', 'timestamp', 'snapshot'"):
        TableSpec("orders", "orders", startup="earliest")


def test_snapshot_only_is_copied_but_not_followed():
    once = TableSpec("orders", "orders", startup="snapshot")
    assert once.snapshots and not once.followed
    assert TableSpec("orders", "orders").followed and TableSpec("orders", "orders", startup="latest").followed


@pytest.mark.parametrize("kind", [0, 3, "2", True, 2.0])
def test_an_scd_type_other_than_1_or_2_is_refused(kind):
    with pytest.raises(ConfigError, match=f"table 'orders': scd_type is {kind!r}"):
        TableSpec("orders", "orders", scd_type=kind)


def test_scd_type_2_is_accepted():
    assert TableSpec("orders", "orders", scd_type=2).scd_type == 2


def test_cluster_by_takes_one_name_or_a_tuple_of_names_and_refuses_anything_else():
    assert TableSpec("orders", "orders", cluster_by="country").cluster_by == ("country",)
    spec = TableSpec("orders", "orders", cluster_by=["country", "tier"], change_data_feed=True)
    assert spec.layout.cluster_by == ("country", "tier") and spec.layout.change_data_feed
    for bad in [("",), (1,), None]:
        with pytest.raises(ConfigError, match="table 'orders': cluster_by is"):
            TableSpec("orders", "orders", cluster_by=bad)
