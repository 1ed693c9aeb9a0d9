"""Readers outside Spark, per Delta table feature: the lake's tables in each state the engine
leaves them in, read by Spark, delta-rs (``QueryBuilder`` and ``to_pyarrow_table``), DuckDB's
delta extension and Polars, at the versions pinned in requirements-dev.txt.

Each reader either returns exactly Spark's rows (deletion vectors applied, renamed and widened
columns as Spark shows them) or refuses the table with its own message naming the feature: a
newer reader that starts reading a feature fails here, and then ``REFUSES``, the README's reader
table and perhaps ``defaults.table_features`` move with it. The default features are the ones
every reader here reads (``test_the_default_table_features_are_the_ones_every_reader_reads``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import duckdb
import duckdb_extension_delta
import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from lakehouse_engine.config.defaults import DEFAULTS
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.sink.log import deltalog, logstate
from lakehouse_engine.source import embedded
from lakehouse_engine.tables import TableSpec

from .conftest import PASSWORD, USER
from .helpers import assert_silver_equals_source

pytestmark = pytest.mark.integration

SCHEMA = """
CREATE TABLE {table} (
  id INT NOT NULL PRIMARY KEY,
  name VARCHAR(40) NOT NULL,
  country CHAR(2) NULL,
  qty INT NULL,
  amount DECIMAL(8,2) NULL,
  created_at DATETIME(3) NOT NULL,
  updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
);
INSERT INTO {table} (id, name, country, qty, amount, created_at)
SELECT seq, CONCAT('n', seq), ELT(1 + seq % 3, 'DE', 'FR', NULL), seq * 3, seq * 1.25,
       TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq HOUR FROM seq_1_to_12;
"""
# Silver's MERGE of these marks the updated and deleted rows with deletion vectors.
CHANGES = """
UPDATE {table} SET name = 'changed' WHERE id IN (2, 5);
DELETE FROM {table} WHERE id IN (3, 7, 8);
INSERT INTO {table} (id, name, created_at) VALUES (100, 'new', NOW(3));
"""
RENAME_DROP = """
ALTER TABLE {table} RENAME COLUMN name TO full_name;
ALTER TABLE {table} DROP COLUMN country;
UPDATE {table} SET full_name = 'renamed' WHERE id = 4;
"""
WIDEN = """
ALTER TABLE {table} MODIFY qty BIGINT NULL;
ALTER TABLE {table} MODIFY amount DECIMAL(12,3) NULL;
UPDATE {table} SET qty = 1099511627776, amount = 123456789.125 WHERE id = 4;
"""
# Table (= state) -> (its DDLs after the changes, the Delta reader features they must leave on
# both layers). ``defaults`` gets every DDL under the project's default table_features.
STATES = {
    "deletion_vectors": ("", set()),
    "column_mapping": (RENAME_DROP, {"columnMapping"}),
    "type_widening": (WIDEN, {"typeWidening"}),
    "defaults": (RENAME_DROP + WIDEN, set()),
}
LAYERS = ("bronze", "silver")
# A table feature as defaults.table_features names it, and as the Delta protocol does.
PROTOCOL_NAMES = {"column_mapping": "columnMapping", "type_widening": "typeWidening"}


def _duckdb(path: str) -> pa.Table:
    """DuckDB's delta extension from its PyPI package, loaded by path (no download at run time)."""
    extension = next(Path(duckdb_extension_delta.__file__).parent.glob("extensions/*/delta.duckdb_extension"))
    with duckdb.connect() as con:
        con.execute(f"LOAD '{extension}'")
        return con.sql("SELECT * FROM delta_scan(?)", params=[path]).to_arrow_table()


def _query_builder(path: str) -> pa.Table:
    return pa.table(QueryBuilder().register("t", DeltaTable(path)).execute("SELECT * FROM t").read_all())


READERS: dict[str, Callable[[str], pa.Table]] = {
    "deltalake.QueryBuilder": _query_builder,
    "deltalake.to_pyarrow_table": lambda path: DeltaTable(path).to_pyarrow_table(),
    "duckdb.delta_scan": _duckdb,
    "polars.read_delta": lambda path: pl.read_delta(path).to_arrow(),
    "polars.scan_delta": lambda path: pl.scan_delta(path).collect().to_arrow(),
}
# The reader features each reader refuses (a table with any of them is refused as a whole,
# with a message naming it), and the start of its message. Every other table it reads.
REFUSES: dict[str, tuple[set[str], str]] = {
    "deltalake.QueryBuilder": ({"typeWidening"}, "Unsupported table features required"),
    "deltalake.to_pyarrow_table": ({"deletionVectors", "columnMapping", "typeWidening"},
                                   "The table has set these reader features"),
    "duckdb.delta_scan": (set(), ""),
    "polars.read_delta": ({"columnMapping", "typeWidening"}, "delta table requires reader features"),
    "polars.scan_delta": ({"columnMapping", "typeWidening"}, "delta table requires reader features"),
}


def _rows(table: pa.Table, columns: list[str]) -> list[tuple]:
    return sorted((tuple(row[c] for c in columns) for row in table.to_pylist()), key=repr)


@pytest.fixture(scope="module")
def lake(spark, base_config, mariadb, tmp_path_factory):
    """One table per state, each snapshotted, then changed (and its DDLs applied) by a second
    run; the matrix states under every feature the engine knows, ``defaults`` under the
    project's default features. Spark's rows of each layer, keyed by (state, layer)."""
    database = f"readers_{uuid.uuid4().hex[:8]}"
    embedded.create_ingest_user(mariadb, USER, PASSWORD, database)
    root = tmp_path_factory.mktemp("readers")
    config = replace(base_config, lake_root=str(root / "lake"), target_dir=root / "target", gx_dir=root / "gx",
                     source=replace(base_config.source, database=database))
    every = replace(config, defaults=replace(config.defaults, table_features=frozenset(PROTOCOL_NAMES)))
    for table in STATES:
        embedded.run_sql(mariadb, embedded.split_sql(SCHEMA.format(table=table)), database)
    specs = {table: TableSpec(table, table) for table in STATES}
    Pipeline(config, spark, "readers-1").ingest(list(specs.values()))
    for table, (ddl, _) in STATES.items():
        embedded.run_sql(mariadb, embedded.split_sql((CHANGES + ddl).format(table=table)), database)
    matrix = [specs[t] for t in STATES if t != "defaults"]
    results = [*Pipeline(every, spark, "readers-2").ingest(matrix),
               *Pipeline(config, spark, "readers-3").ingest([specs["defaults"]])]
    assert all(r.status == "success" for r in results), [r.message for r in results]
    spark_rows = {}
    for table in STATES:
        assert_silver_equals_source(spark, config, table)
        for layer in LAYERS:
            spark_rows[table, layer] = spark.read.format("delta").load(config.table_path(layer, table)).toArrow()
    return config, spark_rows


def _reader_features(spark, path: str) -> tuple[set[str], int]:
    """The table's Delta reader features, and how many of its live files have a deletion vector."""
    state = logstate.load(Path(path), deltalog.newest_version(spark, path))
    vectors = sum(1 for add in state.live() if add.get("deletionVector"))
    return set(state.protocol.get("readerFeatures") or ()), vectors


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("state", sorted(STATES))
@pytest.mark.parametrize("reader", sorted(READERS))
def test_each_reader_returns_sparks_rows_or_refuses_the_feature_it_cannot_read(spark, lake, reader, state, layer):
    config, spark_rows = lake
    path = config.table_path(layer, state)
    features, vectors = _reader_features(spark, path)
    # The state is what it claims: its DDLs' features, and silver's MERGE left deletion vectors.
    expected = STATES[state][1] | ({"deletionVectors"} if layer == "silver" else set())
    assert features - {"timestampNtz"} == expected, f"{state} {layer}: {features}"
    assert (vectors > 0) == (layer == "silver"), f"{state} {layer}: {vectors} files with deletion vectors"
    refused, message = REFUSES[reader]
    if features & refused:
        with pytest.raises(Exception, match=message) as refusal:
            READERS[reader](path)
        for feature in features & refused:
            assert feature.lower() in str(refusal.value).lower(), f"{reader} on {state} {layer}: {refusal.value}"
        return
    theirs, spark_table = READERS[reader](path), spark_rows[state, layer]
    assert theirs.column_names == spark_table.column_names, f"{reader} on {state} {layer}"
    assert _rows(theirs, theirs.column_names) == _rows(spark_table, spark_table.column_names), (
        f"{reader} on {state} {layer}")


def test_the_default_table_features_are_the_ones_every_reader_reads():
    defaults = {PROTOCOL_NAMES[f] for f in DEFAULTS.table_features}
    refused = {reader: sorted(defaults & features) for reader, (features, _) in REFUSES.items()}
    assert not any(refused.values()), f"defaults.table_features {DEFAULTS.table_features} excludes {refused}"
