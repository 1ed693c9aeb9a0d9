"""Command line: ``python -m <package> COMMAND``. Exit codes: 0 ok, 1 failed tables or checks,
2 usage or configuration error. Every error is one line naming the fix; details go to the log
file ``target/lakehouse.log``."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import logging
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from .config import ProjectConfig, load_project
from .errors import ConfigError, IngestError
from .results import write_run_results

log = logging.getLogger("lakehouse")


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Lakehouse ingestion: MySQL/MariaDB -> Delta bronze/silver."
    )
    parser.add_argument("--project-dir", type=Path, default=Path.cwd(), help="folder holding lakehouse_project.yml")
    parser.add_argument("--profiles-dir", type=Path, default=None, help="folder holding profiles.yml")
    parser.add_argument("--target", default=None, help="profile output to use (default: the profile's target)")
    commands = parser.add_subparsers(dest="command", required=True)

    def selectable(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--select", "-s", nargs="+", default=[], help="table names or tag:TAG")
        sub.add_argument("--exclude", nargs="+", default=[], help="table names or tag:TAG")
        return sub

    ingest = selectable("ingest", "snapshot new tables, catch up on the binlog, merge silver")
    ingest.add_argument("--full-refresh", action="store_true", help="drop bronze and silver and re-snapshot")
    selectable("dq", "run the Great Expectations checks against the source at one binlog position")
    selectable("status", "show each table's phase, bronze batch and binlog position")
    add = commands.add_parser("add-table", help="scaffold a table module by introspecting the source")
    add.add_argument("table")
    add.add_argument("--key", default=None, help="comma separated key columns (default: primary key)")
    source = commands.add_parser("source", help="the embedded MariaDB (demo and tests)")
    source.add_argument("action", choices=["up", "down", "status", "changes"])
    commands.add_parser("spark-check", help="start Spark with Delta once (resolves and caches the jars)")
    return parser


def main(argv: Sequence[str] | None = None, package: str | None = None) -> int:
    package = package or __name__.split(".")[0]
    args = build_parser(f"python -m {package}").parse_args(argv)
    started = dt.datetime.now(dt.UTC)
    invocation = str(uuid.uuid4())
    config: ProjectConfig | None = None
    try:
        config = load_project(args.project_dir.resolve(), profiles_dir=args.profiles_dir, target=args.target)
        _setup_logging(config.target_dir)
        return COMMANDS[args.command](args, config, package, invocation, started)
    except IngestError as exc:
        log.debug("failed", exc_info=True)
        print(f"ERROR [{exc.category}]: {exc}", file=sys.stderr)
        if config is not None and args.command in {"ingest", "dq"}:
            write_run_results(config.target_dir, invocation_id=invocation, command=args.command,
                              started_at=started, status="error", results=[], message=str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        print("ERROR: interrupted; progress up to the last commit is kept", file=sys.stderr)
        return 1


def _setup_logging(target_dir: Path) -> None:
    target_dir.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    if root.handlers:
        return
    root.setLevel(logging.INFO)
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    console.addFilter(lambda record: record.name.startswith(("lakehouse", __name__.split(".")[0])))
    logfile = logging.FileHandler(target_dir / "lakehouse.log")
    logfile.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root.addHandler(console)
    root.addHandler(logfile)
    for noisy in ("py4j", "pyspark", "great_expectations"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _specs(args: argparse.Namespace, package: str):
    from .tables import discover, select

    tables = importlib.import_module(f"{package}.tables")
    return select(discover(tables), args.select, args.exclude)


def _pipeline(config: ProjectConfig, invocation: str):
    from .pipeline import Pipeline
    from .preflight import run_preflight
    from .source import connection
    from .spark import get_spark

    with connection(config.source) as conn:  # fail fast, before Spark takes seconds to start
        run_preflight(conn)
    spark = get_spark(config)
    return spark, Pipeline(config, spark, invocation)


def cmd_ingest(args, config, package, invocation, started) -> int:
    from .locks import table_locks

    specs = _specs(args, package)
    with table_locks(config.target_dir / "locks", [s.name for s in specs]):
        _, pipeline = _pipeline(config, invocation)
        results = pipeline.ingest(specs, full_refresh=args.full_refresh)
    for r in results:
        print(f"{r.table:<24} ok  snapshot rows {r.snapshot_rows:>8}  binlog rows {r.binlog_rows:>7}"
              f"  batch {r.batch:>4}  position {r.position or '-'}")
    write_run_results(config.target_dir, invocation_id=invocation, command="ingest",
                      started_at=started, status="success", results=results)
    return 0


def cmd_dq(args, config, package, invocation, started) -> int:
    from .dq import run_checks
    from .locks import table_locks

    specs = _specs(args, package)
    with table_locks(config.target_dir / "locks", [s.name for s in specs]):
        spark, pipeline = _pipeline(config, invocation)
        results = run_checks(config, spark, pipeline, specs)
    for result in results:
        print(f"{result.table:<24} {'PASS' if result.success else 'FAIL'}")
        for check in result.checks:
            print(f"    {'ok  ' if check.success else 'FAIL'} {check.expectation}: {check.observed}")
    docs = next((r.docs_path for r in results if r.docs_path), None)
    if docs:
        print(f"Data Docs: {docs}")
    failed = [r.table for r in results if not r.success]
    write_run_results(config.target_dir, invocation_id=invocation, command="dq", started_at=started,
                      status="fail" if failed else "success", results=results)
    if failed:
        print(f"ERROR [data quality]: checks failed for {', '.join(failed)}; see the report above",
              file=sys.stderr)
        return 1
    return 0


def cmd_status(args, config, package, invocation, started) -> int:
    from . import bronze
    from .spark import get_spark

    specs = _specs(args, package)
    spark = get_spark(config)
    print(f"{'table':<24} {'phase':<26} {'batch':>5}  {'silver rows':>11}  binlog position")
    for spec in specs:
        cp = bronze.latest_checkpoint(spark, config.table_path("bronze", spec.name))
        if cp is None:
            print(f"{spec.name:<24} not ingested yet")
            continue
        phase = cp.phase
        if cp.snapshot is not None and cp.phase == "snapshot":
            phase = f"snapshot {len(cp.snapshot.done)}/{len(cp.snapshot.chunks)} chunks"
        silver_path = config.table_path("silver", spec.name)
        rows = spark.read.format("delta").load(silver_path).count() if bronze.exists(spark, silver_path) else 0
        position = cp.position or (cp.snapshot.low_watermark if cp.snapshot and cp.snapshot.done else "-")
        print(f"{spec.name:<24} {phase:<26} {cp.batch:>5}  {rows:>11}  {position}")
    return 0


def cmd_add_table(args, config, package, invocation, started) -> int:
    from .introspect import describe_table
    from .scaffold import TableModuleSpec, write_table_module
    from .source import connection

    key = tuple(k.strip() for k in args.key.split(",")) if args.key else None
    with connection(config.source) as conn:
        schema = describe_table(conn, config.source.database, args.table, key)
    spec = TableModuleSpec(source_table=args.table, key=schema.key,
                           columns=tuple((c.name, c.column_type) for c in schema.columns))
    path = write_table_module(config.root / package / "tables", spec)
    print(f"wrote {path.relative_to(config.root)} (key: {', '.join(schema.key)})")
    return 0


def cmd_source(args, config, package, invocation, started) -> int:
    from . import embedded

    source = config.source
    if source.host not in {"127.0.0.1", "localhost"}:
        raise ConfigError(f"the profile points at {source.host}, not the embedded source on 127.0.0.1")
    server = embedded.EmbeddedServer(config.root / ".source", source.port)
    if args.action == "down":
        embedded.stop(server)
        print("embedded MariaDB stopped")
        return 0
    if args.action == "status":
        print(f"embedded MariaDB {'running' if embedded.is_running(server) else 'stopped'} "
              f"on 127.0.0.1:{server.port} (data: {server.datadir})")
        return 0
    demo = config.root / "demo"
    if args.action == "changes":
        embedded.run_sql(server, embedded.split_sql((demo / "changes.sql").read_text()), source.database)
        print("applied demo/changes.sql (inserts, updates, deletes)")
        return 0
    embedded.start(server)
    embedded.create_ingest_user(server, source.user, source.password, source.database)
    with embedded.root_connection(server, source.database) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s",
                    (source.database,))
        empty = cur.fetchone()[0] == 0
    if empty:
        embedded.run_sql(server, embedded.split_sql((demo / "schema.sql").read_text()), source.database)
        print(f"loaded demo data into {source.database}")
    print(f"embedded MariaDB running on 127.0.0.1:{server.port} (data: {server.datadir})")
    return 0


def cmd_spark_check(args, config, package, invocation, started) -> int:
    from .spark import delta_artifact, get_spark

    spark = get_spark(config)
    spark.range(1).count()
    print(f"Spark {spark.version} with Delta ({delta_artifact()}) is ready")
    return 0


COMMANDS = {
    "ingest": cmd_ingest,
    "dq": cmd_dq,
    "status": cmd_status,
    "add-table": cmd_add_table,
    "source": cmd_source,
    "spark-check": cmd_spark_check,
}
