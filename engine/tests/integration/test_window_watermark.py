"""Window-watermark snapshot reads (``snapshot_mode: window``, what MySQL community gets): writes
injected right after a chunk's low watermark (the SELECT sees them, the replay applies them again)
and right before its high watermark (the SELECT misses them, the replay must add them). Silver
ends equal to the source row for row, and bronze holds every change once."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pyarrow.parquet as pq
import pytest

from lakehouse_engine.config.project import SnapshotMode, SourceProfile
from lakehouse_engine.run import snapshots
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.snapshot.window import WindowHooks
from lakehouse_engine.tables import TableSpec

from .helpers import assert_silver_equals_source, bronze_duplicate_changes, run_source_sql, source_rows

pytestmark = pytest.mark.integration

WRITER_PASSWORD = "writer-only-password"

# Chunks of 50 customers (ids 1-400), 2 per commit, read in this order: [351, +inf) and
# (-inf, 51) first, then [51, 101) and [101, 151) (chunk 2, the one the writes target), ...
CHUNK = 2
AFTER_LOW = (
    "UPDATE customers SET tier = 'gold' WHERE customer_id = 110",
    "DELETE FROM customers WHERE customer_id = 111",
    "UPDATE customers SET customer_id = 1000 WHERE customer_id = 112",  # out, into a chunk already read
)
BEFORE_HIGH = (
    "UPDATE customers SET tier = 'silver', credit_limit = 1.50 WHERE customer_id = 120",
    "DELETE FROM customers WHERE customer_id = 121",
    "DELETE FROM customers WHERE customer_id = 122",
    "INSERT INTO customers (customer_id, email, full_name, country, created_at) "
    "VALUES (122, 'again-122@example.com', 'Back Again', 'NL', '2024-05-01 10:00:00')",
    "UPDATE customers SET customer_id = 1001 WHERE customer_id = 130",  # out of the chunk
    "DELETE FROM customers WHERE customer_id = 126",
    "UPDATE customers SET customer_id = 126 WHERE customer_id = 390",  # into the chunk, from one read
    "UPDATE customers SET tier = 'gold' WHERE customer_id IN (10, 340)",  # a chunk read, one not yet
)


@pytest.fixture
def writer(config, mariadb) -> SourceProfile:
    """A user that may write the test database over TCP, as the hooks' connection."""
    run_source_sql(mariadb, None, f"""
        CREATE USER IF NOT EXISTS 'writer'@'127.0.0.1' IDENTIFIED BY '{WRITER_PASSWORD}';
        GRANT ALL ON `{config.source.database}`.* TO 'writer'@'127.0.0.1';
    """)
    return replace(config.source, user="writer", password=WRITER_PASSWORD)


def window_config(config):
    return replace(config, defaults=replace(config.defaults, chunk_size=50, commit_rows=100,
                                            snapshot_mode=SnapshotMode.WINDOW))


def bronze_reads(spark, config, table: str) -> dict[int, list]:
    frame = spark.read.format("delta").load(config.table_path("bronze", table))
    reads: dict[int, list] = {}
    for row in frame.where("_op = 'r'").collect():
        reads.setdefault(row.customer_id, []).append(row)
    return reads


def bronze_changes_of(spark, config, table: str, key: int) -> list:
    frame = spark.read.format("delta").load(config.table_path("bronze", table))
    return frame.where(f"_op != 'r' AND customer_id = {key}").collect()


def test_writes_inside_a_chunks_window_end_in_silver_exactly_once(spark, config, mariadb, writer, monkeypatch,
                                                                    caplog):
    config = window_config(config)
    hooks = WindowHooks(writer, CHUNK, AFTER_LOW, BEFORE_HIGH)
    real = snapshots.snapshot_batch

    def with_hooks(*args, window=None, **kwargs):
        assert window is not None, "window mode was asked for"
        return real(*args, window=replace(window, hooks=hooks), **kwargs)

    monkeypatch.setattr(snapshots, "snapshot_batch", with_hooks)
    spec = TableSpec("customers", "customers")
    with caplog.at_level("INFO"):
        (result,) = Pipeline(config, spark, "run-1").ingest([spec])
    assert result.status == "success", result.message
    assert "between a low and a high watermark" in caplog.text
    assert_silver_equals_source(spark, config, "customers")
    assert bronze_duplicate_changes(spark, config, "customers") == 0

    reads = bronze_reads(spark, config, "customers")
    assert all(len(rows) == 1 for rows in reads.values()), "a key read twice"
    # Missed by the SELECT, put into the chunk by the replay (and not repeated as a change).
    assert reads[120][0].tier == "silver" and bronze_changes_of(spark, config, "customers", 120) == []
    assert reads[122][0].full_name == "Back Again"
    # 390 -> 126: into the chunk from one read before; the delete of 390 is a change.
    assert 126 in reads and bronze_changes_of(spark, config, "customers", 126) == []
    assert [r._op for r in bronze_changes_of(spark, config, "customers", 390)] == ["d"]
    assert 121 not in reads and 130 not in reads and 111 not in reads and 112 not in reads
    # Seen by the SELECT and applied again: still one row.
    assert reads[110][0].tier == "gold"
    # Keys outside the chunk are their own chunks' business: 10 was read before the write, so the
    # write is a change; 340 was read after it, so its read holds it.
    assert reads[10][0].tier != "gold" and len(bronze_changes_of(spark, config, "customers", 10)) == 1
    assert reads[340][0].tier == "gold" and bronze_changes_of(spark, config, "customers", 340) == []
    assert 1000 not in reads and 1001 not in reads  # moved into [351, +inf) after it was read

    run_source_sql(mariadb, config.source.database, "UPDATE customers SET tier = 'bronze' WHERE customer_id = 120;")
    (later,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert later.status == "success" and later.binlog_rows == 1
    assert_silver_equals_source(spark, config, "customers")


def test_a_window_read_of_a_collated_string_key_replays_a_change_of_case(spark, config, mariadb, writer,
                                                                          monkeypatch):
    """'abc' -> 'ABC' is one key in utf8mb4_general_ci but two spellings; the replay must drop
    the old spelling and keep the new one, and leave keys of other chunks alone."""
    config = replace(config, defaults=replace(config.defaults, chunk_size=3, commit_rows=3,
                                              snapshot_mode=SnapshotMode.WINDOW))
    run_source_sql(mariadb, config.source.database, """
        CREATE TABLE coded (
          code VARCHAR(16) NOT NULL PRIMARY KEY,
          note VARCHAR(40) NOT NULL
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
        INSERT INTO coded VALUES ('abc', 'a'), ('Abd', 'b'), ('b1', 'c'), ('B2', 'd'), ('c1', 'e'),
                                 ('C2', 'f'), ('d1', 'g'), ('e1', 'h'), ('f1', 'i'), ('g1', 'j');
    """)
    real = snapshots.snapshot_batch
    seen: list[int] = []

    def with_hooks(*args, chunks, window=None, **kwargs):
        # The writes go into the window of the first chunk whose range starts at or before 'abc'.
        first = sorted(chunks, key=lambda c: c.index)[0]
        seen.append(first.index)
        hooks = WindowHooks(writer, 0, (), (
            "UPDATE coded SET code = 'ABC' WHERE code = 'abc'",
            "UPDATE coded SET note = 'changed' WHERE code = 'Abd'",
            "INSERT INTO coded VALUES ('aaa', 'new')",
            "UPDATE coded SET note = 'elsewhere' WHERE code = 'g1'",
        )) if first.index == 0 else None
        return real(*args, chunks=chunks, window=replace(window, hooks=hooks), **kwargs)

    monkeypatch.setattr(snapshots, "snapshot_batch", with_hooks)
    spec = TableSpec("coded", "coded")
    (result,) = Pipeline(config, spark, "run-1").ingest([spec])
    assert result.status == "success", result.message
    assert 0 in seen
    assert_silver_equals_source(spark, config, "coded")
    frame = spark.read.format("delta").load(config.table_path("bronze", "coded"))
    reads = sorted(r.code for r in frame.where("_op = 'r'").collect())
    assert len(reads) == len(set(reads))
    assert "ABC" in reads and "abc" not in reads and "aaa" in reads
    assert bronze_duplicate_changes(spark, config, "coded") == 0


def test_a_ddl_inside_a_chunks_window_is_applied_and_the_chunk_read_again_in_the_same_run(
        spark, config, mariadb, writer, monkeypatch):
    """The window's replay cannot fold a DDL into the chunk, so the batch fails inside its task;
    the run applies the DDL by its catch-up and reads the batch's chunks again with the new
    columns. Whichever chunk of the batch met the DDL first, the outcome is the same."""
    config = window_config(config)
    hooks = WindowHooks(writer, CHUNK, (), (
        "ALTER TABLE customers ADD COLUMN nick VARCHAR(20) NULL",
        "UPDATE customers SET nick = 'in-window', tier = 'gold' WHERE customer_id = 120",
    ))
    real = snapshots.snapshot_batch
    calls: list[int] = []

    def with_hooks_once(*args, window=None, **kwargs):
        calls.append(1)
        if any(c.index == CHUNK for c in kwargs["chunks"]) and window is not None and len(calls) <= 2:
            window = replace(window, hooks=hooks)
        return real(*args, window=window, **kwargs)

    monkeypatch.setattr(snapshots, "snapshot_batch", with_hooks_once)
    spec = TableSpec("customers", "customers")
    (result,) = Pipeline(config, spark, "run-1").ingest([spec])
    assert result.status == "success", result.message
    assert_silver_equals_source(spark, config, "customers")
    assert bronze_duplicate_changes(spark, config, "customers") == 0
    reads = bronze_reads(spark, config, "customers")
    assert all(len(rows) == 1 for rows in reads.values()), "a key read twice"
    assert reads[120][0].nick == "in-window"


_WINDOW_TASK_PROBE = """
import json, sys
from lakehouse_engine.config.project import SourceProfile
from lakehouse_engine.snapshot.chunktask import ChunkTask, stage_chunk
from lakehouse_engine.snapshot.window import Window, WindowHooks
from lakehouse_engine.source.connection import connection, current_position
from lakehouse_engine.source.introspect import describe_table
from lakehouse_engine.state.chunks import Chunk
host, port, user, password, database, writer_user, writer_password, folder = sys.argv[1:]
profile = SourceProfile(host, int(port), user, password, database)
writer = SourceProfile(host, int(port), writer_user, writer_password, database)
before_high = (
    "UPDATE customers SET credit_limit = -12.34, created_at = '1969-07-20 20:17:40.5', birth_date = '1950-01-02' "
    "WHERE customer_id = 5",
    "DELETE FROM customers WHERE customer_id = 6",
    "INSERT INTO customers (customer_id, email, full_name, country, created_at) "
    "VALUES (5000, 'window@example.com', 'In The Window', 'NL', '2024-05-01 10:00:00')",
)
with connection(profile) as conn:
    schema = describe_table(conn, database, "customers")
    window = Window(current_position(conn), 4242, 30.0, WindowHooks(writer, 0, (), before_high))
    task = ChunkTask(profile, schema, Chunk(0, None, None), "run-1", 1, folder, True, window=window)
    staged = stage_chunk(task, conn)
print(json.dumps({"rows": staged.rows, "pandas": "pandas" in sys.modules}))
"""


def test_a_window_read_replays_its_changes_without_importing_pandas_into_the_task(config, writer, tmp_path):
    # pyarrow's conversion of Python values imports pandas: 0.26 s of CPU and ~48 MB per worker.
    source = config.source
    before = len(source_rows(config, "customers"))
    probe = subprocess.run([sys.executable, "-c", _WINDOW_TASK_PROBE, source.host, str(source.port), source.user,
                            source.password, source.database, writer.user, writer.password, str(tmp_path)],
                           capture_output=True, text=True, check=True)
    found = json.loads(probe.stdout)
    # The SELECT missed the writes; the replay put them in: one row gone, one new.
    assert found == {"rows": before, "pandas": False}
    staged = pq.read_table(next(p for p in tmp_path.rglob("*.parquet") if "silver" not in p.parts))
    changed = {row["customer_id"]: row for row in staged.to_pylist()}
    assert 6 not in changed and changed[5000]["full_name"] == "In The Window"
    assert str(changed[5]["credit_limit"]) == "-12.34"
    assert str(changed[5]["created_at"]).startswith("1969-07-20 20:17:40.500000")
    assert str(changed[5]["birth_date"]) == "1950-01-02"
