"""Writers keep changing the source while chunks are read: exactly once still holds."""

from __future__ import annotations

import random
import threading
from dataclasses import replace

import pytest

from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.source import embedded

from .helpers import assert_silver_equals_source, bronze_duplicate_changes, demo_specs

pytestmark = pytest.mark.integration


def _write_until(stop: threading.Event, server: embedded.EmbeddedServer, database: str, seed: int) -> int:
    rng = random.Random(seed)
    statements = 0
    with embedded.root_connection(server, database) as conn, conn.cursor() as cur:
        while not stop.is_set():
            n = rng.randrange(1, 2000)
            cur.execute("UPDATE orders SET total = total + 1 WHERE order_id = 10000000000000000000 + %s * 7", (n,))
            cur.execute("DELETE FROM orders WHERE order_id = 10000000000000000000 + %s * 7", (rng.randrange(1, 2000),))
            cur.execute(
                "INSERT IGNORE INTO orders (order_id, customer_id, status, total, ordered_at)"
                " VALUES (10000000000000000000 + %s * 7, 1, 'new', 1.00, NOW(6))",
                (rng.randrange(1, 2000),),
            )
            sku = f"{rng.choice(['ab', 'AB', 'Éc', 'ed', 'zz'])}-{rng.randrange(1, 300):05d}"
            cur.execute("UPDATE products SET stock = stock + 1, title = CONCAT(title, '+') WHERE sku = %s", (sku,))
            cur.execute("START TRANSACTION")
            cur.execute("DELETE FROM products WHERE sku = %s", (f"zz-{rng.randrange(1, 300):05d}",))
            cur.execute(
                "INSERT IGNORE INTO products (sku, title, price) VALUES (%s, 'new', 9.99)",
                (f"{rng.choice(['ne', 'NE', 'Ñe'])}-{rng.randrange(1, 500):05d}",),
            )
            cur.execute("COMMIT")
            statements += 6
    return statements


@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
def test_changes_during_the_snapshot_keep_silver_exact_and_bronze_free_of_repeats(spark, config, mariadb, delivery):
    """exactly_once: bronze holds no change twice; at_least_once: bronze may, silver is exact."""
    defaults = replace(config.defaults, chunk_size=120, commit_rows=240, delivery=delivery)
    config = replace(config, defaults=defaults)
    specs = [s for s in demo_specs() if s.name in {"orders", "products"}]
    stop = threading.Event()
    written: list[int] = []
    writer = threading.Thread(
        target=lambda: written.append(_write_until(stop, mariadb, config.source.database, seed=7))
    )
    writer.start()
    try:
        Pipeline(config, spark, "run-1").ingest(specs)
    finally:
        stop.set()
        writer.join()
    assert written and written[0] > 0
    Pipeline(config, spark, "run-2").ingest(specs)  # picks up what was written after run 1's stop
    for spec in specs:
        assert_silver_equals_source(spark, config, spec.name)
        if delivery == "exactly_once":
            assert bronze_duplicate_changes(spark, config, spec.name) == 0
