"""Two runs of one table on one lake (two checkouts: separate target dirs, so separate run
locks) must never lose a commit silently: the loser fails with one clear line, nothing is lost,
and the next run leaves silver equal to the source."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse_engine.config.project import ProjectConfig
from lakehouse_engine.errors import ConcurrentRunError, IngestError
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.sink import bronze, silver

from .helpers import assert_silver_equals_source, bronze_duplicate_changes, demo_specs, run_source_sql

pytestmark = pytest.mark.integration


def _orders():
    return [s for s in demo_specs() if s.name == "orders"]


def _delta_version(spark, path: str) -> int:
    from delta.tables import DeltaTable

    return int(DeltaTable.forPath(spark, path).history(1).select("version").first()[0])


def test_a_bronze_commit_of_a_batch_another_run_already_committed_fails_and_leaves_bronze_unchanged(spark, config):
    Pipeline(config, spark, "run-1").ingest(_orders())
    path = config.table_path("bronze", "orders")
    committed = bronze.latest_checkpoint(spark, path)
    assert committed is not None
    version, rows = _delta_version(spark, path), spark.read.format("delta").load(path).count()
    # A second checkout continued from the same checkpoint as run-1's last commit: same batch number.
    rival = replace(committed, run_id="run-from-another-checkout")
    frame = spark.read.format("delta").load(path).limit(5)

    with pytest.raises(ConcurrentRunError) as excinfo:
        bronze.append(frame, path, rival)

    message = str(excinfo.value)
    assert message.startswith(f"table orders: another run wrote bronze batch {committed.batch} concurrently")
    assert "run again" in message and "\n" not in message
    assert excinfo.value.table == "orders"
    assert _delta_version(spark, path) == version
    assert spark.read.format("delta").load(path).count() == rows
    assert bronze.latest_checkpoint(spark, path) == committed


def _wait_for(path: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.05)


def _paused_transform(started: Path, go: Path) -> Callable:
    """A silver transform whose rows are produced only once ``go`` exists: the MERGE has begun
    its Delta transaction and waits, so the test can commit in between."""

    def hold(seq):  # runs in a Spark Python worker: a file is the only shared signal
        started.touch()
        deadline = time.monotonic() + 120
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return True

    held = F.udf(hold, T.BooleanType())
    return lambda frame: frame.where(held(F.col("_seq")))


def test_a_silver_merge_that_loses_a_race_to_another_runs_commit_is_a_one_line_retriable_error(
    spark, config, mariadb, tmp_path
):
    Pipeline(config, spark, "run-1").ingest(_orders())
    run_source_sql(mariadb, config.source.database, """
        UPDATE orders SET total = total + 1 WHERE order_id % 3 = 0;
        DELETE FROM orders WHERE order_id % 5 = 0;
    """)
    Pipeline(config, spark, "run-2").ingest(_orders())
    bronze_path = config.table_path("bronze", "orders")
    upto = bronze.latest_checkpoint(spark, bronze_path).batch
    # A silver one batch behind bronze, as if the run that wrote the last batch died before its MERGE.
    behind = tmp_path / "silver" / "orders"
    silver.apply(spark, bronze_path=bronze_path, silver_path=str(behind), key=("order_id",), upto_batch=upto - 1)

    started, go = tmp_path / "merge-started", tmp_path / "go"
    outcome: list[BaseException | None] = []

    def merge() -> None:
        try:
            silver.apply(spark.newSession(), bronze_path=bronze_path, silver_path=str(behind),
                         key=("order_id",), upto_batch=upto, transform=_paused_transform(started, go),
                         table="orders")
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    before = _delta_version(spark, str(behind))
    thread = threading.Thread(target=merge)
    thread.start()
    try:
        _wait_for(started)
        from delta.tables import DeltaTable

        DeltaTable.forPath(spark, str(behind)).delete("order_id % 2 = 0")  # the other run's commit
    finally:
        go.touch()
        thread.join(timeout=300)

    assert len(outcome) == 1 and isinstance(outcome[0], ConcurrentRunError), outcome
    message = str(outcome[0])
    assert message.startswith("table orders: another run changed silver while this run merged into it")
    assert "run again" in message and "\n" not in message
    assert silver.applied_batch(spark, str(behind)) == upto - 1, "the losing MERGE must not be recorded"
    assert _delta_version(spark, str(behind)) == before + 1, "only the other run's commit may land"


def _run_both(spark, configs: list[ProjectConfig], round_no: int) -> list[BaseException | None]:
    """Start one run per checkout at the same moment, each with its own Spark session (session
    confs are per run, as in two processes); returns each run's error, or None."""
    outcomes: list[BaseException | None] = [None] * len(configs)
    barrier = threading.Barrier(len(configs))

    def run(index: int) -> None:
        session = spark.newSession()
        barrier.wait()
        try:
            Pipeline(configs[index], session, f"round-{round_no}-checkout-{index}").ingest(_orders())
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(configs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a run did not finish within 5 minutes"
    return outcomes


def _assert_succeeded_or_failed_clearly(outcome: BaseException | None) -> None:
    if outcome is None:
        return
    assert isinstance(outcome, IngestError), repr(outcome)
    messages = [r.message for r in getattr(outcome, "results", []) if r.status != "success"] or [str(outcome)]
    for message in messages:
        assert "concurrently" in message and "run again" in message and "\n" not in message, message


def _checkout(config: ProjectConfig, tmp_path: Path, name: str, chunk_size: int, flush_rows: int,
              server_ids: tuple[int, int]) -> ProjectConfig:
    """A second clone of the project: same lake, its own target dir (so its own run locks), its
    own binlog server ids, and project settings of its own."""
    defaults = replace(config.defaults, chunk_size=chunk_size, commit_rows=chunk_size, flush_rows=flush_rows)
    return replace(config, defaults=defaults, target_dir=tmp_path / name / "target", gx_dir=tmp_path / name / "gx",
                   server_ids=server_ids)


# Many small transactions, so a catch-up commits several batches.
CHANGES = "\n".join(
    f"UPDATE orders SET total = total + 1, note = 'round 2' WHERE order_id % 40 = {k} * 7 % 40;\n"
    f"DELETE FROM orders WHERE order_id % 97 = {k};\n"
    f"INSERT INTO orders (order_id, customer_id, status, total, ordered_at)"
    f" SELECT 10000000000000000000 + 7 * (3000 + 10 * {k} + seq), 1, 'new', 1.00, NOW(6) FROM seq_1_to_10;"
    for k in range(6)
)


def test_two_checkouts_ingesting_one_table_at_once_lose_nothing(spark, config, mariadb, tmp_path):
    """Different chunk and flush sizes give the two runs different batches for the same batch
    numbers, so a batch silently skipped while its run goes on would leave a gap (or a repeat)
    in bronze; a commit conflict must read as clearly as a skip."""
    low, high = config.server_ids
    width = high - low
    checkouts = [
        _checkout(config, tmp_path, "checkout-a", 500, 60, (low, high)),
        _checkout(config, tmp_path, "checkout-b", 400, 90, (high + 1, high + 1 + width)),
    ]
    for outcome in _run_both(spark, checkouts, 1):  # both snapshot at once
        _assert_succeeded_or_failed_clearly(outcome)
    run_source_sql(mariadb, config.source.database, CHANGES)
    for outcome in _run_both(spark, checkouts, 2):  # both catch up on the binlog at once
        _assert_succeeded_or_failed_clearly(outcome)

    Pipeline(checkouts[0], spark, "after").ingest(_orders())
    assert_silver_equals_source(spark, checkouts[0], "orders")
    assert bronze_duplicate_changes(spark, checkouts[0], "orders") == 0


def test_a_table_another_run_has_begun_to_create_is_waited_for_not_failed(spark, tmp_path):
    """The race seen in CI: the other run's log folder exists, its first commit not yet, so
    Delta takes the folder for a table and then finds none (DELTA_TABLE_NOT_FOUND)."""
    from delta.tables import DeltaTable

    from lakehouse_engine.snapshot import reader

    path = str(tmp_path / "bronze" / "orders")
    schema = T.StructType([T.StructField("id", T.LongType())])
    (tmp_path / "bronze" / "orders" / "_delta_log").mkdir(parents=True)

    aside = tmp_path / "aside"
    DeltaTable.createIfNotExists(spark).location(str(aside)).addColumns(schema).execute()

    def other_run_finishes_creating() -> None:
        time.sleep(1.5)
        first = aside / "_delta_log" / "00000000000000000000.json"
        (tmp_path / "bronze" / "orders" / "_delta_log" / first.name).write_bytes(first.read_bytes())

    other = threading.Thread(target=other_run_finishes_creating)
    other.start()
    try:
        reader._create_table(spark, path, schema)
    finally:
        other.join()
    assert spark.read.format("delta").load(path).schema.names == ["id"]
