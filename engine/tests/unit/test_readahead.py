"""Which ingests start their binlog reader before Spark: only runs whose every table stands in
the binlog phase behind the source's head, from the lowest checkpoint (source side recorded)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lakehouse_engine.run import readahead
from lakehouse_engine.state.positions import BinlogPosition
from lakehouse_engine.tables import TableSpec

from .test_idle_ingest import AT, LATER, Lake, _Config, binlog
from .test_status import snapshot_checkpoint


@pytest.fixture
def lake(tmp_path, monkeypatch):
    monkeypatch.setattr(readahead, "current_position", lambda conn: AT)  # the source's head
    return Lake(tmp_path)


class _Source:
    database = "shop"


class _Started:
    """What ``readahead.head_start`` would start the reader with (no process, no source)."""

    def __init__(self, source, start, stop, seen_at):
        self.source, self.start, self.stop, self.seen_at = source, start, stop, seen_at


@pytest.fixture
def ahead(lake, monkeypatch):
    """The head start's source side, recorded: keys described, cascades found (none unless set)."""
    found = {"cascades": set(), "described": []}

    def describe(conn, schema, table, key=None):
        found["described"].append((schema, table))
        if table == "broken":
            raise RuntimeError("no such table")
        return type("Schema", (), {"key": (key or ("id",))})()

    monkeypatch.setattr(readahead, "describe_table", describe)
    monkeypatch.setattr(readahead, "find_cascades",
                        lambda conn, schema, table: ("fk",) if table in found["cascades"] else ())
    monkeypatch.setattr(readahead, "binlog_source",
                        lambda config, keys, parents, retry: ("source", keys, tuple(parents)))
    monkeypatch.setattr(readahead, "HeadStart", _Started)
    lake.config_with_source = lambda: _with_source(lake.config())
    return found


def _with_source(config):
    config.source = _Source()
    return config


def test_a_run_with_only_binlog_to_read_starts_its_reader_from_the_lowest_checkpoint_to_the_head(lake, ahead):
    early = BinlogPosition("mysql-bin.000001", 400)
    lake.table("orders", binlog("orders", BinlogPosition("mysql-bin.000002", 100)), 3)  # silver behind: no matter
    lake.table("countries", binlog("countries", early), 4)
    specs = [TableSpec("orders", "orders", key=("order_id",)), TableSpec("countries", "countries_v2")]

    started = readahead.head_start(lake.config_with_source(), specs, None, retry=None)

    assert (started.start, started.stop) == (early, AT)
    assert started.source == ("source", {"orders": ("order_id",), "countries_v2": ("id",)}, ())
    assert ahead["described"] == [("shop", "orders"), ("shop", "countries_v2")]


@pytest.mark.parametrize("case", ["at the head", "snapshot", "never ingested", "refresh", "cascade", "describe fails"])
def test_no_reader_starts_ahead_when_the_run_may_do_more_than_read_the_binlog(lake, ahead, case):
    table = "broken" if case == "describe fails" else "orders"
    specs = [TableSpec("orders", table)]
    behind = BinlogPosition("mysql-bin.000001", 4)
    if case == "at the head":
        lake.table("orders", binlog("orders", AT), 4)
    elif case == "snapshot":
        lake.table("orders", replace(snapshot_checkpoint(4, {}), table="orders"), 4)
    elif case == "refresh":
        lake.table("orders", replace(binlog("orders", behind), generation=4), 4)
    elif case == "cascade":  # its parents' changes are derived by the pipeline: it reads on its own
        ahead["cascades"].add("orders")
        lake.table("orders", binlog("orders", behind), 4)
    elif case != "never ingested":
        lake.table("orders", binlog("orders", behind), 4)
    assert readahead.head_start(lake.config_with_source(), specs, None, retry=None) is None


def test_no_reader_starts_ahead_for_a_lake_only_spark_reads(monkeypatch):
    monkeypatch.setattr(readahead, "current_position", lambda conn: LATER)
    assert readahead.head_start(_Config("s3a://bucket/lake"), [TableSpec("orders", "orders")], None,  # type: ignore[arg-type]
                           retry=None) is None
