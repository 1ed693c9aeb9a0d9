"""Every built-in default of the engine, in one typed place.

The project file (``lakehouse_project.yml``) overrides the project settings, table modules the
per-table ones, command-line flags the run options. A unit test checks that the values the
generated project file writes out are these.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BuiltinDefaults:
    # Snapshot sizing: a chunk is one consistent-snapshot SELECT (short enough to keep undo small),
    # a commit gathers chunks read in parallel into one Delta commit (few, large commits are fast).
    chunk_size: int = 50_000
    commit_rows: int = 1_000_000
    flush_rows: int = 50_000  # binlog rows buffered before a bronze commit
    # Chunk plans split a key range evenly when its density (rows per key value) lies in here.
    even_distribution: tuple[float, float] = (0.05, 1000.0)
    delivery: str = "exactly_once"  # a config.project.Delivery value
    snapshot_mode: str = "auto"  # a config.project.SnapshotMode value
    # Delta features a schema change may switch on so that it rewrites no file (sink.schemacommit).
    # None by default: the readers outside Spark that the reader matrix tests (delta-rs, DuckDB,
    # Polars) do not all read them (tests/integration/test_readers.py, README "Reading the lake").
    table_features: tuple[str, ...] = ()
    server_id_range: tuple[int, int] = (5400, 5499)
    spark_master: str = "local[*]"
    target: str = "dev"
    target_dir: str = "target"
    gx_root: str = "."
    max_lag_seconds: float = 86_400.0  # dq fails a table whose silver trails the source by more
    # Read views dq sums each table's parts on at once, opened at one binlog position: two take
    # about a third off the source's part (its longest) for a second connection and server thread.
    dq_source_readers: int = 2
    connect_timeout_s: int = 10
    binlog_read_timeout_s: float = 60.0  # a server that stops answering fails the read, not hangs it
    # follow
    follow_interval_s: float = 1.0  # cycles start at most this often (an idle cycle waits the rest)
    follow_heartbeat_s: float = 60.0  # while idle, one log line this often
    follow_idle_commit_s: float = 300.0  # a table without changes commits its position this often
    follow_discover_s: float = 10.0  # table modules are read again this often (tables added meanwhile)
    follow_spark_rest_s: float = 120.0  # a local follow's Spark context stops after this long without work
    # repair of a table a follow holds: the follow does it between two cycles; wait this long
    repair_wait_s: float = 3600.0
    # maintain: VACUUM keeps this many hours of removed files; Delta's own floor (7 days) is the least
    retain_hours: int = 168


DEFAULTS = BuiltinDefaults()
# Every feature a project may list in ``defaults.table_features`` (opt-in; see the README).
TABLE_FEATURES: tuple[str, ...] = ("column_mapping", "type_widening")
