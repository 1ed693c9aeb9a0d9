"""Follow mode on the real components: changes made while it runs reach silver, a repair of a
followed table is done by the follow, SIGTERM ends it cleanly, and idle cycles neither commit
nor start Spark jobs."""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException

from lakehouse_engine.cdc.feed import BinlogFeed
from lakehouse_engine.run.follow import Follower, FollowOptions, SourceLink
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.sink.log import deltalog
from lakehouse_engine.tables import TableSpec

from .conftest import PROJECT_ROOT
from .helpers import run_source_sql, silver_rows, source_rows
from .test_cli import _read_until, cli, cli_command, error_lines, run_results
from .test_repair import tamper

pytestmark = pytest.mark.integration

PACKAGE = "acme_lakehouse"

TABLES = ("customers", "products")
RESTED = "Spark's context stopped until the next change"


def test_changes_made_while_following_reach_silver_a_repair_is_done_by_the_follow_and_sigterm_stops_cleanly(
        spark, config, mariadb):
    # One table: every table adds its MERGE to each cycle, and this test starts a Spark of its own.
    # Spark rests after 4 s without work: a repair or a change may find it resting, and must
    # not see a difference.
    with following(config, "--select", "customers", "--interval", "0.2", "--rest-spark-after", "4") as process:
        seen = _read_until(process, "follow: cycle 1:", timeout=300)  # the snapshot is in
        run_source_sql(mariadb, config.source.database, """
            INSERT INTO customers (email, full_name, country, created_at)
              VALUES ('follow@example.com', 'Followed', 'NL', NOW(3));
            UPDATE customers SET tier = 'gold' WHERE customer_id % 40 = 0;
            DELETE FROM customers WHERE customer_id IN (3, 5);
            UPDATE customers SET customer_id = 1000 WHERE customer_id = 7;
        """)
        seen += _until_silver_is_the_source(process, spark, config)

        # Drift made directly in silver; `repair` finds the table held by this follow and asks it.
        tamper(spark, config, changed=9)  # 7 is no longer a key
        repair: dict = {}
        asking = threading.Thread(target=lambda: repair.update(done=cli(config, "repair", "--select", "customers")))
        asking.start()
        seen += _read_until(process, "follow: repair of customers:", timeout=300)  # reading drains stderr
        asking.join(timeout=120)
        done = repair["done"]
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
        assert "3 differing keys: 2 re-read, 1 deleted" in done.stdout, done.stdout
        assert "followed by run pid" in done.stderr, done.stderr[-3000:]
        assert "after:  all " in done.stdout and "hold the source's values" in done.stdout
        assert silver_rows(spark, config, "customers") == source_rows(config, "customers")
        # Capture goes on after the repair, and a DDL is applied at its position while following.
        run_source_sql(mariadb, config.source.database, """
            UPDATE customers SET tier = 'gold' WHERE customer_id = 9;
            ALTER TABLE customers ADD COLUMN nick VARCHAR(20) NOT NULL DEFAULT 'none';
            UPDATE customers SET nick = 'eleven' WHERE customer_id = 11;
        """)
        seen += _until_silver_is_the_source(process, spark, config)
        assert "ALTER TABLE customers ADD COLUMN nick" in seen and "applied to bronze (add nick)" in seen
        # Idle, Spark's context stops; the next change starts a new one, in the same JVM.
        if RESTED not in seen.rsplit("follow: cycle", 1)[-1]:
            seen += _read_until(process, RESTED, timeout=120)
        run_source_sql(mariadb, config.source.database, "UPDATE customers SET nick = 'x13' WHERE customer_id = 13;")
        seen += _until_silver_is_the_source(process, spark, config)
        assert "Spark started again in" in seen.rsplit(RESTED, 1)[-1]
        rest = sigterm(process)
    stderr = seen + rest
    assert process.returncode == 0, stderr[-3000:]
    assert error_lines(stderr) == [], stderr[-3000:]
    assert "follow: SIGTERM: stopping after the current cycle" in stderr
    results = run_results(config)
    assert results["metadata"]["command"] == "follow" and results["status"] == "success"
    assert results["cycles"] >= 2 and results["cycles"] > results["idle_cycles"]
    ((table, status),) = [(r["table"], r["status"]) for r in results["results"]]
    assert (table, status) == ("customers", "success")
    assert silver_rows(spark, config, "customers") == source_rows(config, "customers")


@contextmanager
def following(config, *args: str, code: Path | None = None) -> Iterator[subprocess.Popen]:
    """A `follow` run of the CLI (importing the project from ``code`` when given), killed if the
    test leaves it running."""
    command, env = cli_command(config, "follow", *args)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    # With -m the working directory comes first on sys.path.
    process = subprocess.Popen(command, cwd=code or PROJECT_ROOT, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()


def sigterm(process: subprocess.Popen) -> str:
    """Stop a follow as a service manager would; the rest of its stderr."""
    process.send_signal(signal.SIGTERM)
    return process.communicate(timeout=120)[1]


def _until_silver_is_the_source(process: subprocess.Popen, spark, config, tables=("customers",)) -> str:
    """Each cycle that brought rows logs a line; the changes may take more than one cycle."""
    seen = ""
    deadline = time.monotonic() + 180
    while not all(_silver_is_the_source(spark, config, t) for t in tables):
        seen += _read_until(process, "follow: cycle", timeout=deadline - time.monotonic())
    return seen


def _silver_is_the_source(spark, config, table: str) -> bool:
    try:
        return silver_rows(spark, config, table) == source_rows(config, table)
    except AnalysisException:  # a column the source just added is not in silver yet
        return False


def test_a_table_added_while_following_is_snapshotted_while_the_others_keep_their_positions(
        spark, config, mariadb, tmp_path):
    # The table modules the follow imports: a copy, so that the test adds a module to it.
    code = tmp_path / "code"
    shutil.copytree(PROJECT_ROOT / PACKAGE, code / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    with following(config, "--exclude", "orders", "order_items", "products", "--interval", "0.2",
                   code=code) as process:
        seen = _read_until(process, "follow: cycle 1:", timeout=300)  # customers' snapshot is in
        run_source_sql(mariadb, config.source.database, """
            CREATE TABLE late_rows (id INT NOT NULL PRIMARY KEY, note VARCHAR(20));
            INSERT INTO late_rows VALUES (1, 'one'), (2, 'two'), (3, 'three');
            UPDATE customers SET full_name = 'Before' WHERE customer_id = 11;
        """)
        (code / PACKAGE / "tables" / "late_rows.py").write_text(
            "from lakehouse_engine.tables import TableSpec\n\nTABLE = TableSpec(\"late_rows\", \"late_rows\")\n")
        seen += _read_until(process, "follow: table late_rows was added to the project", timeout=60)
        run_source_sql(mariadb, config.source.database, """
            INSERT INTO late_rows VALUES (4, 'four');
            DELETE FROM late_rows WHERE id = 1;
            UPDATE customers SET full_name = 'After' WHERE customer_id = 12;
        """)
        seen += _until_silver_is_the_source(process, spark, config, ("customers", "late_rows"))
        rest = sigterm(process)
    stderr = seen + rest
    assert process.returncode == 0 and error_lines(stderr) == [], stderr[-3000:]
    results = {r["table"]: r["status"] for r in run_results(config)["results"]}
    assert results == {"customers": "success", "late_rows": "success"}
    # customers kept its position: read by one snapshot only, its changes from the binlog.
    changes = spark.read.format("delta").load(config.table_path("bronze", "customers")).groupBy("_op").count()
    counts = {r["_op"]: r["count"] for r in changes.collect()}
    assert counts["r"] == 400 and counts["u"] == 2, counts


def test_idle_cycles_commit_nothing_and_take_milliseconds(spark, config):
    specs = [TableSpec(t, t) for t in TABLES]
    never = threading.Event()

    def follow(pipeline: Pipeline, cycles: int):
        options = FollowOptions(interval_s=0.0, max_cycles=cycles)
        return Follower(pipeline, specs, SourceLink(config.source), never, options).run()

    pipeline = Pipeline(config, spark, "follow-1")
    assert follow(pipeline, 1).rows > 0  # the snapshot

    def versions() -> dict[str, int]:
        return {f"{layer}/{t}": deltalog.newest_version(spark, config.table_path(layer, t))
                for t in TABLES for layer in ("bronze", "silver")}

    before = versions()
    started = time.monotonic()
    idle = follow(pipeline, 40)
    per_cycle = (time.monotonic() - started) / idle.cycles
    assert (idle.cycles, idle.idle_cycles, idle.rows) == (40, 40, 0)
    # A new pipeline's first cycle is a whole ingest: with nothing to read it commits nothing either.
    again = follow(Pipeline(config, spark, "follow-2"), 3)
    assert (again.idle_cycles, again.rows) == (2, 0)
    assert versions() == before
    print(f"idle follow cycle: {per_cycle * 1000:.1f} ms")
    assert per_cycle < 0.5


def test_a_table_without_changes_commits_nothing_while_another_streams_then_catches_up(
        spark, config, mariadb):
    specs = [TableSpec(t, t) for t in TABLES]
    never = threading.Event()
    db = config.source.database

    def follow(pipeline: Pipeline, cycles: int, **options) -> None:
        Follower(pipeline, specs, SourceLink(config.source), never,
                 FollowOptions(interval_s=0.0, max_cycles=cycles, **options)).run()

    def versions(table: str) -> tuple[int, int]:
        return tuple(deltalog.newest_version(spark, config.table_path(layer, table))  # type: ignore[return-value]
                     for layer in ("bronze", "silver"))

    # One binlog reader for every cycle, as `follow` runs it: each cycle's range continues the
    # last one's (held idle positions included), so the reader is never started again.
    feed = BinlogFeed()
    with closing(Pipeline(config, spark, "follow-held", feed=feed)) as pipeline:
        follow(pipeline, 1)  # snapshot or catch up both

        def change_products_only(price: int) -> None:
            run_source_sql(mariadb, db, f"UPDATE products SET price = {price} ORDER BY sku LIMIT 1")
            follow(pipeline, 1)

        # The first binlog advance after a snapshot is committed (it ends the snapshot phase).
        change_products_only(11)
        customers = versions("customers")
        for price in (12, 13, 14):  # then, while only products change, no empty batch per cycle
            change_products_only(price)
        assert versions("customers") == customers
        assert silver_rows(spark, config, "products") == source_rows(config, "products")

        # The held table's next change is read from where the pipeline got to, and lands.
        run_source_sql(mariadb, db, "UPDATE customers SET tier = 'gold', full_name = 'Held' WHERE customer_id = 2")
        follow(pipeline, 1)
        assert silver_rows(spark, config, "customers") == source_rows(config, "customers")
        customers = versions("customers")

        # With no time to hold, an idle table commits its advance (one bronze and one silver batch).
        run_source_sql(mariadb, db, "UPDATE products SET price = 15 ORDER BY sku LIMIT 1")
        follow(pipeline, 1, idle_commit_s=0.0)
        assert versions("customers") == (customers[0] + 1, customers[1] + 1)
        assert silver_rows(spark, config, "customers") == source_rows(config, "customers")
    assert feed.starts == 1


def test_a_stop_saves_the_position_an_idle_table_holds_in_memory(spark, config, mariadb):
    """Idle tables keep their advance in memory between commits; a requested stop (SIGTERM,
    Ctrl-C) commits it, so status and dq see them caught up and the next run does not read the
    range again."""
    specs = [TableSpec(t, t) for t in ("customers", "products")]
    db = config.source.database

    def follow(pipeline: Pipeline, stop: threading.Event, cycles: int | None = 1):
        return Follower(pipeline, specs, SourceLink(config.source), stop,
                        FollowOptions(interval_s=0.0, max_cycles=cycles)).run()

    with closing(Pipeline(config, spark, "follow-stop", feed=BinlogFeed())) as pipeline:
        follow(pipeline, threading.Event())  # the snapshots
        run_source_sql(mariadb, db, "UPDATE products SET price = 21 ORDER BY sku LIMIT 1")
        follow(pipeline, threading.Event())  # ends the snapshot phase of both
        run_source_sql(mariadb, db, "UPDATE products SET price = 22 ORDER BY sku LIMIT 1")
        follow(pipeline, threading.Event())  # customers is idle: its advance is held
        assert pipeline.read_to("customers") != pipeline.resume_position("customers")
        stopped = threading.Event()
        stopped.set()  # a stop requested before the next cycle
        follow(pipeline, stopped, cycles=None)
        assert pipeline.read_to("customers") == pipeline.resume_position("customers")
    assert silver_rows(spark, config, "customers") == source_rows(config, "customers")
