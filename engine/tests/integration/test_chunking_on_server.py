"""Chunks planned on the real server cover every row exactly once, in the column's collation."""

from __future__ import annotations

import pytest

from lakehouse_engine.snapshot.chunking import chunk_predicate, plan_chunks
from lakehouse_engine.source.connection import connection, qualified, query, quote_ident
from lakehouse_engine.source.keyorder import ChunkLocator, SortKeys

from .helpers import run_source_sql, table_schema

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("table", "chunk_size"),
    [("products", 37), ("order_items", 101), ("orders", 150), ("customers", 1000)],
    ids=["ci-string-key", "composite-key", "bigint-unsigned-key", "single-chunk"],
)
def test_chunks_partition_the_table_and_the_locator_agrees_with_sql(config, table, chunk_size):
    schema = table_schema(config, table)
    columns = ", ".join(quote_ident(k) for k in schema.key)
    name = qualified(config.source.database, table)
    with connection(config.source) as conn:
        chunks = plan_chunks(conn, schema, chunk_size, config.defaults.even_distribution)
        seen: dict[tuple, int] = {}
        for chunk in chunks:
            where, args = chunk_predicate(schema.key, chunk)
            for key in query(conn, f"SELECT {columns} FROM {name} WHERE {where}", args):
                assert key not in seen, f"{key} read by chunks {seen[key]} and {chunk.index}"
                seen[key] = chunk.index
        total = query(conn, f"SELECT COUNT(*) FROM {name}")[0][0]
        assert len(seen) == total
        if chunk_size < total:
            assert len(chunks) > 2
        locator = ChunkLocator(chunks, SortKeys(conn, schema.key_columns))
        keys = list(seen)
        assert [c.index for c in locator.locate(keys)] == [seen[k] for k in keys]


def test_case_and_accent_variants_fall_in_the_chunk_sql_puts_them_in(config):
    schema = table_schema(config, "products")
    with connection(config.source) as conn:
        chunks = plan_chunks(conn, schema, 20)
        locator = ChunkLocator(chunks, SortKeys(conn, schema.key_columns))
        # 'ÉC-...' and 'ec-...' compare equal to 'Éc-...' in utf8mb4_general_ci.
        variants = [("Éc-00002",), ("ÉC-00002",), ("ec-00002",), ("eC-00002 ",)]
        assert len({c.index for c in locator.locate(variants)}) == 1


def test_sparse_integer_keys_dense_in_places_are_split_into_chunks_near_chunk_size(config, mariadb):
    # 100 keys over 1..100,000 plus 5,000 dense ones: an even split by the average density
    # (one chunk per ~9,800 key values) would read ~5,000 rows in one chunk of 500 wanted.
    run_source_sql(mariadb, config.source.database, """
        CREATE TABLE sparse_keys (id BIGINT NOT NULL PRIMARY KEY, v INT NOT NULL);
        INSERT INTO sparse_keys SELECT seq, 1 FROM seq_1_to_100000_step_1000;
        INSERT INTO sparse_keys SELECT seq, 2 FROM seq_50000_to_54999 WHERE seq % 1000 <> 1;
        ANALYZE TABLE sparse_keys;
    """)
    schema = table_schema(config, "sparse_keys")
    name = qualified(config.source.database, "sparse_keys")
    with connection(config.source) as conn:
        chunks = plan_chunks(conn, schema, 500, config.defaults.even_distribution)
        sizes = []
        for chunk in chunks:
            where, args = chunk_predicate(schema.key, chunk)
            sizes.append(query(conn, f"SELECT COUNT(*) FROM {name} WHERE {where}", args)[0][0])
        total = query(conn, f"SELECT COUNT(*) FROM {name}")[0][0]
    assert sum(sizes) == total
    assert max(sizes) <= 2 * 500, sizes
