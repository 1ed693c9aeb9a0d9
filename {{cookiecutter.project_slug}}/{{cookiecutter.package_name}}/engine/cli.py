"""Command line: ``python -m <package> COMMAND``. Exit codes: 0 ok, 1 failed tables or checks,
2 usage or configuration error, 130 interrupted (Ctrl-C).

Every error reaches the user as one line on stderr; its details (traceback, JVM stack trace) go
to ``target/lakehouse.log``, and ``ingest``, ``follow`` and ``dq`` record it in
``target/run_results.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import logging
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import failures, lake
from .config import ProjectConfig, load_project, peek_target_dir
from .errors import ConfigError, IngestError
from .results import RunStatus, write_run_results

log = logging.getLogger("lakehouse")

LOG_FILE = "lakehouse.log"
# The commands whose every outcome is recorded in run_results.json.
RECORDED_COMMANDS = frozenset({"ingest", "follow", "dq"})
INTERRUPTED = "interrupted; progress up to the last commit is kept"
# Log records with this attribute set go to the log file only, not to the console.
FILE_ONLY = {"file_only": True}


@dataclass(frozen=True)
class Invocation:
    command: str
    id: str
    started: dt.datetime


@dataclass(frozen=True)
class Failure:
    """How a failed invocation is reported."""

    line: str  # the one line on stderr
    message: str  # recorded in run_results.json
    exit_code: int
    status: RunStatus = "error"


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
    follow = selectable("follow", "ingest cycles back to back until stopped (Ctrl-C or SIGTERM ends the "
                                  "current cycle, then exits)")
    follow.add_argument("--interval", type=_seconds, default=1.0, metavar="SECONDS",
                        help="start a cycle at most this often; an idle cycle waits the rest (default 1)")
    follow.add_argument("--max-cycles", type=_count, default=None, metavar="N", help="stop after N cycles")
    follow.add_argument("--max-seconds", type=_seconds, default=None, metavar="S", help="stop after S seconds")
    selectable("dq", "run the Great Expectations checks against the source at one binlog position")
    selectable("status", "show each table's phase, bronze batch and binlog position")
    add = commands.add_parser("add-table", help="scaffold a table module by introspecting the source")
    add.add_argument("table")
    add.add_argument("--key", default=None, help="comma separated key columns (default: primary key)")
    source = commands.add_parser("source", help="the embedded MariaDB (demo and tests)")
    source.add_argument("action", choices=["up", "down", "status", "changes"])
    commands.add_parser("spark-check", help="start Spark with Delta once (resolves and caches the jars)")
    return parser


def _seconds(text: str) -> float:
    value = float(text)
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds >= 0")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a count >= 1")
    return value


def main(argv: Sequence[str] | None = None, package: str | None = None) -> int:
    package = package or __name__.split(".")[0]
    args = build_parser(f"python -m {package}").parse_args(argv)
    run = Invocation(args.command, str(uuid.uuid4()), dt.datetime.now(dt.UTC))
    project_dir = args.project_dir.resolve()
    failures.reset_interrupt()
    with RunLog(package) as run_log:
        # Before the configuration is read, so that a broken one is logged and recorded too.
        target_dir = peek_target_dir(project_dir)
        run_log.write_to(target_dir)
        lake_root: str | None = None
        try:
            config = load_project(project_dir, profiles_dir=args.profiles_dir, target=args.target)
            target_dir, lake_root = config.target_dir, config.lake_root
            run_log.write_to(target_dir)
            return COMMANDS[args.command](args, config, package, run.id, run.started)
        except (Exception, KeyboardInterrupt) as exc:  # every error ends here as one line
            failure = _failure(exc, run.command, lake_root, run_log.path)
            return _report(failure, exc, run, target_dir)


def _failure(exc: BaseException, command: str, lake_root: str | None, log_path: Path | None) -> Failure:
    """Classify what stopped the command: interrupted, an engine error, a Spark error, or a bug."""
    details = f"; details in {_shown(log_path)}" if log_path else ""
    # After Ctrl-C, Spark's cancelled jobs surface as errors of their own: still the interruption.
    if isinstance(exc, KeyboardInterrupt) or failures.was_interrupted():
        return Failure(f"ERROR: {INTERRUPTED}", INTERRUPTED, 130, "interrupted")
    if isinstance(exc, IngestError):
        error, details = exc, ""
    else:
        error = failures.translate(exc, command=command, lake_root=lake_root)
    if error is None:
        message = f"internal error: {type(exc).__name__}: {failures.first_line(exc)}{details}"
        return Failure(f"ERROR: {message}", message, 1)
    message = " ".join(str(error).split()) + details
    return Failure(f"ERROR [{error.category}]: {message}", message, error.exit_code)


def _report(failure: Failure, exc: BaseException, run: Invocation, target_dir: Path | None) -> int:
    """Log the details, record the failure, then print its one line."""
    log.error("%s failed: %s\n%s", run.command, failure.message, failures.details(exc), extra=FILE_ONLY)
    line = failure.line
    if run.command in RECORDED_COMMANDS and target_dir is not None:
        try:
            write_run_results(target_dir, invocation_id=run.id, command=run.command,
                              started_at=run.started, status=failure.status, results=[],
                              message=failure.message)
        except OSError as err:  # say so: the run_results.json there is an earlier run's
            log.error("cannot write run_results.json: %s", err, extra=FILE_ONLY)
            line += f" (run_results.json not written: {err.strerror})"
    print(line, file=sys.stderr)
    return failure.exit_code


def _shown(path: Path | None) -> str:
    """A path as the user would type it: relative to the current folder when under it."""
    if path is None:
        return "-"
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class RunLog:
    """Console progress lines and the log file of one invocation.

    The handlers are removed again at exit, so ``main`` can run more than once in a process.
    """

    def __init__(self, package: str):
        self.package = package
        self.path: Path | None = None
        self._root = logging.getLogger()
        self._level = self._root.level
        self._console: logging.Handler | None = None
        self._file: logging.Handler | None = None

    def __enter__(self) -> RunLog:
        console = logging.StreamHandler(sys.stderr)
        console.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        console.addFilter(self._for_console)
        self._root.addHandler(console)
        self._root.setLevel(logging.INFO)
        self._console = console
        for noisy in ("py4j", "pyspark", "great_expectations"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
        return self

    def write_to(self, target_dir: Path | None) -> None:
        """(Re)open the log file in ``target_dir``; without one, log to the console only."""
        path = None if target_dir is None else target_dir / LOG_FILE
        if path == self.path:
            return
        self._close_file()
        if path is None:
            return
        try:
            target_dir.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(path)
        except OSError as exc:  # the command still runs; its one error line says the rest
            log.warning("no log file: cannot write %s (%s)", path, exc.strerror)
            return
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        self._root.addHandler(handler)
        self._file, self.path = handler, path

    def __exit__(self, *exc_info: object) -> None:
        self._close_file()
        if self._console is not None:
            self._root.removeHandler(self._console)
        self._root.setLevel(self._level)

    def _close_file(self) -> None:
        if self._file is not None:
            self._root.removeHandler(self._file)
            self._file.close()
        self._file, self.path = None, None

    def _for_console(self, record: logging.LogRecord) -> bool:
        if getattr(record, "file_only", False):
            return False
        return record.name.startswith(("lakehouse", self.package))


def _specs(args: argparse.Namespace, package: str):
    from .tables import discover, select

    tables = importlib.import_module(f"{package}.tables")
    return select(discover(tables), args.select, args.exclude)


def _pipeline(config: ProjectConfig, invocation: str):
    from .pipeline import Pipeline
    from .preflight import run_preflight
    from .source import connection
    from .spark import get_spark

    lake.check_writable(config.lake_root)
    with connection(config.source) as conn:  # fail fast, before Spark takes seconds to start
        run_preflight(conn)
    spark = get_spark(config)
    lake.check_filesystem(spark, config.lake_root)
    return spark, Pipeline(config, spark, invocation)


def cmd_ingest(args, config, package, invocation, started) -> int:
    from .locks import table_locks
    from .pipeline import TablesFailed

    specs = _specs(args, package)
    with table_locks(config.target_dir / "locks", [s.name for s in specs]):
        _, pipeline = _pipeline(config, invocation)
        try:
            results = pipeline.ingest(specs, full_refresh=args.full_refresh)
        except TablesFailed as failed:
            results = failed.results
    failed = _print_results(results)
    write_run_results(config.target_dir, invocation_id=invocation, command="ingest",
                      started_at=started, status="error" if failed else "success", results=results,
                      message=f"{len(failed)} of {len(results)} table(s) failed" if failed else "")
    return 1 if failed else 0


def cmd_follow(args, config, package, invocation, started) -> int:
    from . import capture
    from .follow import Follower, FollowOptions, SourceLink, stop_requests
    from .locks import table_locks

    specs = _specs(args, package)
    options = FollowOptions(interval_s=args.interval, max_cycles=args.max_cycles, max_seconds=args.max_seconds)
    with table_locks(config.target_dir / "locks", [s.name for s in specs]):
        _, pipeline = _pipeline(config, invocation)
        # After Spark's start, whose SIGINT handler becomes the second Ctrl-C's.
        with stop_requests() as stop, _file_only(capture.log, capture.READING):
            outcome = Follower(pipeline, specs, SourceLink(config.source), stop, options).run()
    failed = _print_results(outcome.results)
    summary = (f"{outcome.cycles} cycle(s), {outcome.cycles - outcome.idle_cycles} ingested, "
               f"{outcome.rows} row(s)")
    write_run_results(config.target_dir, invocation_id=invocation, command="follow",
                      started_at=started, status="error" if failed else "success", results=outcome.results,
                      message=f"{len(failed)} of {len(outcome.results)} table(s) failed; {summary}"
                      if failed else summary,
                      extra={"cycles": outcome.cycles, "idle_cycles": outcome.idle_cycles})
    return 1 if failed else 0


def _print_results(results) -> list:
    """One line per table on stdout, each failure's line on stderr; returns the failed ones."""
    for r in results:
        if r.status == "success":
            print(f"{r.table:<24} ok     snapshot rows {r.snapshot_rows:>8}  binlog rows {r.binlog_rows:>7}"
                  f"  batch {r.batch:>4}  position {r.position or '-'}")
        else:
            print(f"{r.table:<24} ERROR  see below")
    failed = [r for r in results if r.status != "success"]
    for r in failed:
        print(f"ERROR [{r.category}]: {r.message}", file=sys.stderr)
    return failed


@contextmanager
def _file_only(logger: logging.Logger, message: str) -> Iterator[None]:
    """Send ``logger``'s records of ``message`` (its format string) to the log file only."""

    def mark(record: logging.LogRecord) -> bool:
        if record.msg == message:
            record.file_only = True
        return True

    logger.addFilter(mark)
    try:
        yield
    finally:
        logger.removeFilter(mark)


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
    "follow": cmd_follow,
    "dq": cmd_dq,
    "status": cmd_status,
    "add-table": cmd_add_table,
    "source": cmd_source,
    "spark-check": cmd_spark_check,
}
