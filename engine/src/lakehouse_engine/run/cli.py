"""Command line: ``lakehouse COMMAND`` (also ``python -m lakehouse_engine`` and the project's own
``python -m <package>``). Exit codes: 0 ok, 1 failed tables or checks,
2 usage or configuration error, 130 interrupted (Ctrl-C).

The global options (``--target``, ``--project-dir``, ``--profiles-dir``, ``--log-format``) are
accepted before or after the command, as in dbt. Only the commands that read the source need
its password (``NEEDS_SOURCE``): ``status``, ``list``, ``validate`` and ``spark-check`` run
without it.

Every error reaches the user as one line on stderr; its details (traceback, JVM stack trace) go
to ``target/lakehouse.log``, and ``ingest``, ``follow`` and ``dq`` record it in
``target/run_results.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.metadata
import json
import logging
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import failures
from ..config.defaults import DEFAULTS
from ..config.project import PROJECT_FILE, Layer, ProjectConfig, load_project, peek_target_dir
from ..errors import ConfigError, IngestError
from ..logs import FILE_ONLY, is_file_only, is_progress
from ..sink import paths as lake
from . import project
from .results import MaintenanceResult, RunStatus, write_run_results

if TYPE_CHECKING:  # the CLI imports Spark and the pipeline only for the commands that use them
    from pyspark.sql import SparkSession

    from ..tables import TableSpec
    from .pipeline import Pipeline
    from .repair import RepairResult

log = logging.getLogger("lakehouse")

LOG_FILE = "lakehouse.log"
# The commands whose every outcome is recorded in run_results.json.
RECORDED_COMMANDS = frozenset({"ingest", "follow", "dq", "maintain", "repair", "rebuild"})
# The commands (and ``source`` actions) that connect with the profile's user and password.
NEEDS_SOURCE = frozenset({"ingest", "follow", "dq", "add-table", "source up"})
LOG_FORMATS = ("text", "json")
PROGRESS = {"auto": None, "always": True, "never": False}  # auto: progress lines only on a terminal
# Shown by --version next to the project's own version: what its results depend on.
ENGINE_PACKAGES = ("pyspark", "delta-spark", "great-expectations", "mysql-replication")
INTERRUPTED = "interrupted; progress up to the last commit is kept"
# Log records with this attribute set go to the log file only, not to the console.


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
    status: RunStatus = RunStatus.ERROR
    category: str = "internal"
    fields: Mapping[str, str] = field(default_factory=dict)  # the error's table, setting, position


def build_parser(prog: str, package: str | None = None, project_dir: Path | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Lakehouse ingestion: MySQL/MariaDB -> Delta bronze/silver."
    )
    parser.add_argument("--version", action=_VersionAction, package=package, project_dir=project_dir)
    _global_options(parser, suppress=False)
    # The same options after the command; SUPPRESS keeps them from resetting what came before it.
    after = argparse.ArgumentParser(add_help=False)
    _global_options(after, suppress=True)
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help_text, description=help_text, parents=[after])

    def selectable(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = command(name, help_text)
        sub.add_argument("--select", "-s", nargs="+", default=[],
                         help="table names, wildcards (order*) or tag:TAG")
        sub.add_argument("--exclude", nargs="+", default=[], help="table names, wildcards (order*) or tag:TAG")
        return sub

    ingest = selectable("ingest", "snapshot new tables, catch up on the binlog, merge silver")
    ingest.add_argument("--full-refresh", action="store_true",
                        help="snapshot again: bronze starts anew, silver is replaced in one commit once "
                             "every chunk is read")
    follow = selectable("follow", "ingest cycles back to back until stopped (Ctrl-C or SIGTERM ends the "
                                  "current cycle, then exits)")
    follow.add_argument("--interval", type=_seconds, default=DEFAULTS.follow_interval_s, metavar="SECONDS",
                        help="start a cycle at most this often; an idle cycle waits the rest "
                             f"(default {DEFAULTS.follow_interval_s:g})")
    follow.add_argument("--max-cycles", type=_count, default=None, metavar="N", help="stop after N cycles")
    follow.add_argument("--max-seconds", type=_seconds, default=None, metavar="S", help="stop after S seconds")
    selectable("dq", "run the Great Expectations checks against the source at one binlog position")
    repair = selectable("repair", "find the rows silver holds wrongly (as dq's value check does) and re-read only "
                                  "those from the source, without a re-snapshot; the table's binlog position is "
                                  "kept; a table a follow holds is repaired by that follow between two cycles")
    repair.add_argument("--wait", type=_seconds, default=DEFAULTS.repair_wait_s, metavar="SECONDS",
                        help="how long to wait for a follow to repair a table it holds "
                             f"(default {DEFAULTS.repair_wait_s:g})")
    selectable("rebuild", "write silver anew from the whole of bronze (the newest change per key), e.g. after "
                          "changing a table's transform; equal to the incremental silver")
    maintain = selectable("maintain", "compact bronze and silver (OPTIMIZE) and delete the files old versions "
                                      "no longer need (VACUUM); a table being ingested is skipped with an error")
    maintain.add_argument("--retain-hours", type=int, default=DEFAULTS.retain_hours, metavar="H",
                          help="VACUUM keeps files the last H hours of versions read "
                               f"(default and minimum {DEFAULTS.retain_hours})")
    maintain.add_argument("--no-vacuum", action="store_true", help="compact only")
    selectable("status", "each table's phase, chunks, bronze batch, position and lag, and the last run "
                         "(no Spark; the lag only with MYSQL_PASSWORD set)")
    selectable("list", "list the selected tables with their source table and tags")
    command("validate", "load the configuration and every table module (no source, no Spark)")
    command("debug", "check the configuration, Java, the Delta jars, the source connection, its binlog "
                     "settings and grants")
    add = command("add-table", "scaffold a table module by introspecting the source")
    add.add_argument("table")
    add.add_argument("--key", default=None, help="comma separated key columns (default: primary key)")
    source = command("source", "the embedded MariaDB (demo and tests)")
    source.add_argument("action", choices=["up", "down", "status", "changes"])
    command("spark-check", "start Spark with Delta once (resolves and caches the jars)")
    command("eject", "copy the engine's source into this project (vendored) in place of the lakehouse-engine pin")
    schema = command("schema", "print the JSON Schema of lakehouse_project.yml or profiles.yml, for an editor "
                               "(needs no project)")
    schema.add_argument("file", choices=["project", "profiles"])
    return parser


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument("--project-dir", type=Path, default=default(Path.cwd()),
                        help="folder holding lakehouse_project.yml")
    parser.add_argument("--profiles-dir", type=Path, default=default(None), help="folder holding profiles.yml")
    parser.add_argument("--target", default=default(None),
                        help="profile output to use (default: the profile's target)")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default=default("text"),
                        help="console log lines as text or as one JSON object each")
    parser.add_argument("--progress", choices=tuple(PROGRESS), default=default("auto"),
                        help="progress lines (chunks, rows/s, ETA, binlog to read) on the console: "
                             "auto shows them only on a terminal (the log file always has them)")


class _VersionAction(argparse.Action):
    """``--version``: the engine's version, the template commit and project, and the packages
    the engine runs on, then exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str, package: str | None = None,
                 project_dir: Path | None = None, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the engine's version, the template commit and the package versions, then exit")
        self.package = package
        self.project_dir = project_dir or Path.cwd()

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(version_text(self.package, self.project_dir))
        parser.exit()


def version_text(package: str | None, project_dir: Path) -> str:
    """``lakehouse-engine 0.10.0 (template 1b3eb25; project acme_lakehouse 0.1.0; pyspark 4.1.4,
    ...)``: the project's version is its pyproject.toml's (it is run from its checkout, usually
    not installed); a vendored engine says so."""
    import tomllib

    from .. import __version__

    engine_dir = Path(__file__).resolve().parents[1]
    where = "vendored" if engine_dir == project_dir / "lakehouse_engine" else None
    commit = project.template_commit(project_dir)
    parts = [f"template {commit[:12] if commit else 'unknown'}"]
    if package is not None:
        version = "unknown"
        try:
            pyproject = tomllib.loads((project_dir / "pyproject.toml").read_text())
            version = str(pyproject["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            pass
        parts.append(f"project {package} {version}")
    packages = []
    for name in ENGINE_PACKAGES:
        try:
            packages.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            packages.append(f"{name} not installed")
    return (f"lakehouse-engine {__version__}{' ' + where if where else ''} ({'; '.join(parts)}; "
            f"{', '.join(packages)}; Python {sys.version.split()[0]})")


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


def entry(argv: Sequence[str] | None = None) -> int:
    """The ``lakehouse`` command: the project is the folder given by ``--project-dir`` or the
    current one (``lakehouse_project.yml``), its table modules those of its package."""
    return main(argv, prog="lakehouse")


def main(argv: Sequence[str] | None = None, package: str | None = None, prog: str | None = None) -> int:
    """``python -m <package>`` (the project's own entry point, which names its package) and
    ``lakehouse`` (which finds it: ``project.project_package``)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if package is None:
        package = project.package_if_found(project.project_dir_from(arguments))
    args = build_parser(prog or f"python -m {package}", package, project.project_dir_from(arguments)).parse_args(
        arguments)
    if args.command == "schema":  # for writing the files: it must work while they are broken
        from ..config import keys

        print(json.dumps(keys.project_schema() if args.file == "project" else keys.profiles_schema(), indent=2))
        return 0
    run = Invocation(args.command, str(uuid.uuid4()), dt.datetime.now(dt.UTC))
    project_dir = args.project_dir.resolve()
    failures.reset_interrupt()
    with RunLog(package or "lakehouse_engine", args.log_format, progress=PROGRESS[args.progress]) as run_log:
        # Before the configuration is read, so that a broken one is logged and recorded too.
        target_dir = peek_target_dir(project_dir)
        run_log.write_to(target_dir)
        lake_root: str | None = None
        try:
            config = load_project(project_dir, profiles_dir=args.profiles_dir, target=args.target,
                                  require_env=_needs_source(args))
            target_dir, lake_root = config.target_dir, config.lake_root
            run_log.write_to(target_dir)
            if package is None:  # the configuration is sound, the package is not found: say why
                package = project.project_package(project_dir)
            return COMMANDS[args.command](args, config, package, run.id, run.started)
        except (Exception, KeyboardInterrupt) as exc:  # every error ends here as one line
            failure = _failure(exc, run.command, lake_root, run_log.path)
            return _report(failure, exc, run, target_dir, args.log_format)


def _needs_source(args: argparse.Namespace) -> bool:
    """Whether the command connects to the source (and so needs every profile variable set)."""
    action = getattr(args, "action", None)
    return args.command in NEEDS_SOURCE or f"{args.command} {action}" in NEEDS_SOURCE


def _failure(exc: BaseException, command: str, lake_root: str | None, log_path: Path | None) -> Failure:
    """Classify what stopped the command: interrupted, an engine error, a Spark error, or a bug."""
    details = f"; details in {_shown(log_path)}" if log_path else ""
    # After Ctrl-C, Spark's cancelled jobs surface as errors of their own: still the interruption.
    if isinstance(exc, KeyboardInterrupt) or failures.was_interrupted():
        return Failure(f"ERROR: {INTERRUPTED}", INTERRUPTED, 130, RunStatus.INTERRUPTED, "interrupted")
    error: IngestError | None
    if isinstance(exc, IngestError):
        error, details = exc, ""
    else:
        error = failures.translate(exc, command=command, lake_root=lake_root)
    if error is None:
        message = f"internal error: {type(exc).__name__}: {failures.first_line(exc)}{details}"
        return Failure(f"ERROR: {message}", message, 1)
    message = " ".join(str(error).split()) + details
    return Failure(f"ERROR [{error.category}]: {message}", message, error.exit_code, category=error.category,
                   fields=error.fields())


def _report(failure: Failure, exc: BaseException, run: Invocation, target_dir: Path | None,
            log_format: str = "text") -> int:
    """Log the details, record the failure, then print its one line."""
    log.error("%s failed: %s\n%s", run.command, failure.message, failures.details(exc), extra=FILE_ONLY)
    line = failure.line
    if run.command in RECORDED_COMMANDS and target_dir is not None:
        try:
            write_run_results(target_dir, invocation_id=run.id, command=run.command,
                              started_at=run.started, status=failure.status, results=[],
                              message=failure.message, extra={"error": dict(failure.fields)})
        except OSError as err:  # say so: the run_results.json there is an earlier run's
            log.error("cannot write run_results.json: %s", err, extra=FILE_ONLY)
            line += f" (run_results.json not written: {err.strerror})"
    if log_format == "json":
        line = _json_line("error", line, **{"category": failure.category, **failure.fields},
                          exit_code=failure.exit_code)
    print(line, file=sys.stderr)
    return failure.exit_code


def naming(table: str, message: str) -> str:
    """A failed table's message, led by ``table <name>:`` unless it names the table already
    (an error of the source or the lake that did not know the table, e.g. a lost connection)."""
    return message if table in message else f"table {table}: {message}"


def _json_line(level: str, message: str, **fields: Any) -> str:
    """One console line as one JSON object (``--log-format json``)."""
    return json.dumps({"time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"), "level": level,
                       "message": message, **fields}, default=str)


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extra = {"exception": self.formatException(record.exc_info)} if record.exc_info else {}
        return _json_line(record.levelname.lower(), record.getMessage(), logger=record.name, **extra)


def _error_line(line: str, log_format: str, category: str, **fields: str | None) -> None:
    """A failed table's or check's line on stderr, in the console's format; ``fields`` (table,
    setting, position) go into a JSON line when set."""
    given = {k: v for k, v in fields.items() if v}
    print(_json_line("error", line, category=category, **given) if log_format == "json" else line, file=sys.stderr)


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

    def __init__(self, package: str, log_format: str = "text", progress: bool | None = None):
        """``progress``: show progress records on the console; by default only on a terminal."""
        self.package = package
        self.log_format = log_format
        self.progress = sys.stderr.isatty() if progress is None else progress
        self.path: Path | None = None
        self._root = logging.getLogger()
        self._level = self._root.level
        self._console: logging.Handler | None = None
        self._file: logging.Handler | None = None

    def __enter__(self) -> RunLog:
        console = logging.StreamHandler(sys.stderr)
        console.setFormatter(_JsonFormatter() if self.log_format == "json"
                             else logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
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
        if target_dir is None or path is None:
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
        if is_file_only(record) or (is_progress(record) and not self.progress):
            return False
        return record.name.startswith(("lakehouse", self.package))


def _specs(args: argparse.Namespace, package: str) -> list[TableSpec]:
    from ..config.selection import select_tables

    return select_tables(_all_specs(package), args.select, args.exclude, package)


def _all_specs(package: str) -> dict[str, TableSpec]:
    from ..tables import discover

    return discover(importlib.import_module(f"{package}.tables"))


def _lake_spark(config: ProjectConfig, *, long_running: bool = False, before_spark: Any = None) -> SparkSession:
    """Spark for a command that writes the lake: the lake checked writable first (and
    ``before_spark()`` run, e.g. the source's preflight, to fail fast before Spark takes seconds
    to start), then its file system checked through Spark."""
    from ..sink.spark import get_spark

    lake.check_writable(config.lake_root)
    if before_spark is not None:
        before_spark()
    spark = get_spark(config, long_running=long_running)
    lake.check_filesystem(spark, config.lake_root)
    return spark


def _pipeline(config: ProjectConfig, invocation: str, *,
              long_running: bool = False) -> tuple[SparkSession, Pipeline]:
    """Spark and the pipeline; a ``long_running`` one (follow) keeps one binlog reader."""
    from ..cdc.feed import BinlogFeed
    from ..source.connection import connection
    from ..source.preflight import run_preflight
    from .pipeline import Pipeline

    def preflight() -> None:
        with connection(config.source) as conn:
            run_preflight(conn)

    spark = _lake_spark(config, long_running=long_running, before_spark=preflight)
    return spark, Pipeline(config, spark, invocation, feed=BinlogFeed() if long_running else None)


def cmd_ingest(args: argparse.Namespace, config: ProjectConfig, package: str, invocation: str,
        started: dt.datetime) -> int:
    from .locks import locks_folder, table_locks
    from .pipeline import TablesFailed

    specs = _specs(args, package)
    with table_locks(locks_folder(config), [s.name for s in specs]):
        _, pipeline = _pipeline(config, invocation)
        try:
            results = pipeline.ingest(specs, full_refresh=args.full_refresh)
        except TablesFailed as some_failed:
            results = some_failed.results
    failed = _print_results(results, args.log_format)
    write_run_results(config.target_dir, invocation_id=invocation, command="ingest",
                      started_at=started, status=RunStatus.ERROR if failed else RunStatus.SUCCESS, results=results,
                      message=f"{len(failed)} of {len(results)} table(s) failed" if failed else "")
    return 1 if failed else 0


def cmd_follow(args: argparse.Namespace, config: ProjectConfig, package: str, invocation: str,
        started: dt.datetime) -> int:
    from ..cdc import capture
    from .follow import Follower, FollowOptions, NewTables, SourceLink, stop_requests
    from .locks import locks_folder, table_locks
    from .repairs import RepairServer, repair_here, requests_of

    specs = _specs(args, package)
    options = FollowOptions(interval_s=args.interval, max_cycles=args.max_cycles, max_seconds=args.max_seconds)
    locks = locks_folder(config)
    with table_locks(locks, [s.name for s in specs], "follow"), ExitStack() as added_later:
        _, pipeline = _pipeline(config, invocation, long_running=True)
        serve = RepairServer(requests_of(config), repair_here(config, lambda: pipeline))
        # Tables added to the project while following (add-table), selected as this run selects.
        discover = NewTables(lambda: _specs(args, package),
                             lambda spec: added_later.enter_context(table_locks(locks, [spec.name], "follow")))
        # After Spark's start, whose SIGINT handler becomes the second Ctrl-C's.
        with stop_requests() as stop, _file_only(capture.log, capture.READING), closing(pipeline):
            outcome = Follower(pipeline, specs, SourceLink(config.source), stop, options, serve, discover).run()
    failed = _print_results(outcome.results, args.log_format)
    summary = (f"{outcome.cycles} cycle(s), {outcome.cycles - outcome.idle_cycles} ingested, "
               f"{outcome.rows} row(s)")
    write_run_results(config.target_dir, invocation_id=invocation, command="follow",
                      started_at=started, status=RunStatus.ERROR if failed else RunStatus.SUCCESS,
                      results=outcome.results,
                      message=f"{len(failed)} of {len(outcome.results)} table(s) failed; {summary}"
                      if failed else summary,
                      extra={"cycles": outcome.cycles, "idle_cycles": outcome.idle_cycles})
    return 1 if failed else 0


def _print_results(results: Sequence[Any], log_format: str = "text") -> list[Any]:
    """One line per table on stdout, each failure's line on stderr; returns the failed ones."""
    for r in results:
        if r.status == RunStatus.SUCCESS:
            print(f"{r.table:<24} ok     snapshot rows {r.snapshot_rows:>8}  binlog rows {r.binlog_rows:>7}"
                  f"  batch {r.batch:>4}  position {r.position or '-'}")
        else:
            print(f"{r.table:<24} ERROR  see below")
    failed = [r for r in results if r.status != RunStatus.SUCCESS]
    for r in failed:
        _error_line(f"ERROR [{r.category}]: {naming(r.table, r.message)}", log_format, r.category, table=r.table,
                    setting=r.setting, position=r.error_position)
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


def cmd_dq(args: argparse.Namespace, config: ProjectConfig, package: str, invocation: str,
        started: dt.datetime) -> int:
    from ..quality.dq import run_checks

    specs = _specs(args, package)
    # No table locks: dq only reads the lake, so it runs beside an ingest or follow of the tables.
    spark, _ = _pipeline(config, invocation)
    results = run_checks(config, spark, specs)
    for result in results:
        at = f"  at binlog {result.compared_at}" if result.compared_at else ""
        print(f"{result.table:<24} {'PASS' if result.success else 'FAIL'}{at}")
        for check in result.checks:
            print(f"    {'ok  ' if check.success else 'FAIL'} {check.expectation}: {check.observed}")
    docs = next((r.docs_path for r in results if r.docs_path), None)
    if docs:
        print(f"Data Docs: {docs}")
    failed = [r.table for r in results if not r.success]
    write_run_results(config.target_dir, invocation_id=invocation, command="dq", started_at=started,
                      status=RunStatus.FAIL if failed else RunStatus.SUCCESS, results=results)
    if failed:
        _error_line(f"ERROR [data quality]: checks failed for {', '.join(failed)}; see the report above",
                    args.log_format, "data quality")
        return 1
    return 0


def _finish_tables(args: argparse.Namespace, config: ProjectConfig, command: str, invocation: str,
                   started: dt.datetime, results: list[Any]) -> int:
    """The end of a per-table command: each failed table's line on stderr, ``run_results.json``
    (status error when a table erred, fail when only checks failed), and the exit code."""
    failed = [r for r in results if r.status != RunStatus.SUCCESS]
    for r in failed:
        _error_line(f"ERROR [{r.category}]: {naming(r.table, r.message)}", args.log_format, r.category, table=r.table)
    status = RunStatus.SUCCESS
    if failed:
        status = RunStatus.ERROR if any(r.status == RunStatus.ERROR for r in failed) else RunStatus.FAIL
    write_run_results(config.target_dir, invocation_id=invocation, command=command, started_at=started,
                      status=status, results=results,
                      message=f"{len(failed)} of {len(results)} table(s) failed" if failed else "")
    return 1 if failed else 0


def cmd_repair(args: argparse.Namespace, config: ProjectConfig, package: str, invocation: str,
        started: dt.datetime) -> int:
    from .repairs import Waiting, repair_here, repair_tables

    local: list[Pipeline] = []

    def pipeline() -> Pipeline:  # Spark starts only for a table repaired here, not by a follow
        if not local:
            local.append(_pipeline(config, invocation)[1])
        return local[0]

    results = []
    repairs = repair_tables(config, invocation, _specs(args, package), repair_here(config, pipeline),
                            Waiting(args.wait))
    for result in repairs:
        _print_repair(result)
        results.append(result)
    return _finish_tables(args, config, "repair", invocation, started, results)


def _print_repair(result: RepairResult) -> None:
    if result.status == RunStatus.ERROR:
        print(f"{result.table:<24} ERROR  see below")
    elif result.keys_found == 0:
        print(f"{result.table:<24} ok     nothing to repair: {result.after}")
    else:
        print(f"{result.table:<24} {'ok  ' if result.status == RunStatus.SUCCESS else 'FAIL'}   "
              f"{result.keys_found} differing keys: {result.rows_reread} re-read, {result.keys_deleted} "
              f"deleted at binlog {result.watermark} (bronze batch {result.batch})")
        print(f"    before: {result.before}")
        print(f"    after:  {result.after}")


def cmd_rebuild(args: argparse.Namespace, config: ProjectConfig, package: str, invocation: str,
        started: dt.datetime) -> int:
    from ..cdc.tablecapture import as_table_error
    from ..sink import silver
    from .locks import locks_folder, table_locks

    specs = _specs(args, package)
    spark = _lake_spark(config)
    results = []
    for spec in specs:
        result = MaintenanceResult(spec.name)
        try:
            with table_locks(locks_folder(config), [spec.name], "rebuild"):
                key = _lake_key(spark, config, spec)
                batch = silver.rebuild(spark, bronze_path=config.table_path(Layer.BRONZE, spec.name),
                                       silver_path=config.table_path(Layer.SILVER, spec.name), key=key,
                                       transform=spec.transform, table=spec.name, scd_type=spec.scd_type)
            rows = spark.read.format("delta").load(config.table_path(Layer.SILVER, spec.name)).count()
            print(f"{spec.name:<24} ok     silver rebuilt from bronze batches 0..{batch}: {rows} rows")
        except Exception as exc:  # recorded against this table; the others go on
            error = as_table_error(exc, spec.name, config.lake_root)
            result.status, result.message, result.category = RunStatus.ERROR, str(error), error.category
            print(f"{spec.name:<24} ERROR  see below")
        results.append(result)
    return _finish_tables(args, config, "rebuild", invocation, started, results)


def _lake_key(spark: SparkSession, config: ProjectConfig, spec: TableSpec) -> tuple[str, ...]:
    """The key bronze was written with: its checkpoint's, else the table module's (no source needed)."""
    from ..sink import bronze

    checkpoint = bronze.latest_checkpoint(spark, config.table_path(Layer.BRONZE, spec.name))
    if checkpoint is not None and checkpoint.snapshot is not None:
        return checkpoint.snapshot.key
    if spec.key:
        return tuple(spec.key)
    from ..source.connection import connection
    from ..source.introspect import describe_table

    with connection(config.source) as conn:
        return describe_table(conn, config.source.database, spec.source_table).key


def cmd_maintain(args: argparse.Namespace, config: ProjectConfig, package: str, invocation: str,
        started: dt.datetime) -> int:
    from ..cdc.tablecapture import as_table_error
    from ..sink import bronze, maintenance
    from .locks import locks_folder, table_locks

    options = maintenance.MaintenanceOptions(vacuum=not args.no_vacuum, retain_hours=args.retain_hours)
    specs = _specs(args, package)
    spark = _lake_spark(config)
    results = []
    for spec in specs:
        result = MaintenanceResult(spec.name)
        try:
            # The ingest lock: a MERGE reading files a compaction removes would fail.
            with table_locks(locks_folder(config), [spec.name], "maintain"):
                for layer in maintenance.LAYERS:
                    path = config.table_path(layer, spec.name)
                    if bronze.exists(spark, path):
                        report = maintenance.maintain_layer(spark, path, layer, options)
                        result.layers.append(report)
                        print(f"{spec.name:<24} {layer:<7} files {report.files_before:>6} -> "
                              f"{report.files_after:<6} {report.seconds:6.1f} s")
            if not result.layers:
                print(f"{spec.name:<24} not in the lake yet: nothing to maintain")
        except Exception as exc:  # recorded against this table; the others go on
            error = as_table_error(exc, spec.name, config.lake_root)
            result.status, result.message, result.category = RunStatus.ERROR, str(error), error.category
            print(f"{spec.name:<24} ERROR  see below")
        results.append(result)
    return _finish_tables(args, config, "maintain", invocation, started, results)


def cmd_status(args: argparse.Namespace, config: ProjectConfig, package: str, invocation: str,
        started: dt.datetime) -> int:
    from . import status

    specs = _specs(args, package)
    if _is_local(config.lake_root):
        states = [status.read_local(s.name, config.table_path(Layer.BRONZE, s.name),
                                    config.table_path(Layer.SILVER, s.name)) for s in specs]
    else:  # a Hadoop path (s3a://) is only readable through Spark
        states = _states_through_spark(config, [s.name for s in specs])
    lags, note = _source_lags(config, states)
    run = status.last_run(config.target_dir)
    now = dt.datetime.now(dt.UTC)
    print(f"target {config.target}, lake {config.lake_root}")
    for line in status.table_lines(states, lags, run, now):
        print(line)
    if note:
        print(note)
    print(status.run_line(run, now))
    return 0


def _is_local(lake_root: str) -> bool:
    return lake_root.startswith("/") or lake_root.startswith("file:")


def _states_through_spark(config: ProjectConfig, tables: Sequence[str]) -> list[Any]:
    from ..sink import bronze, silver
    from ..sink.spark import get_spark
    from . import status

    spark = get_spark(config)
    states = []
    for table in tables:
        bronze_path, silver_path = config.table_path(Layer.BRONZE, table), config.table_path(Layer.SILVER, table)
        if not bronze.exists(spark, bronze_path):
            states.append(status.TableState(table))
            continue
        marker = silver.marker(spark, silver_path) if bronze.exists(spark, silver_path) else {}
        applied = int(marker.get("bronze_batch", -1))
        states.append(status.TableState(table, bronze.latest_checkpoint(spark, bronze_path),
                                        silver_batch=applied if applied >= 0 else None,
                                        silver_generation=int(marker.get("generation", 0))))
    return states


def _source_lags(config: ProjectConfig, states: Sequence[Any]) -> tuple[dict[str, str] | None, str]:
    """Each table's lag behind the source's binlog head, and a line saying how it was (not)
    measured. Needs the password: without it, says how to get the lag instead."""
    import pymysql

    from ..source.connection import binlog_sizes, connection, current_position
    from . import status

    if not any(s.position for s in states):
        return None, ""
    if config.source.unset:
        return None, (f"behind source: not measured, {', '.join(config.source.unset)} is not set "
                      "(export it to compare with the source's binlog position)")
    try:
        with connection(config.source, read_timeout=30) as conn:
            head, sizes = current_position(conn), binlog_sizes(conn)
    except (IngestError, pymysql.err.MySQLError) as exc:
        return None, f"behind source: not measured, {' '.join(str(exc).split())}"
    now = dt.datetime.now(dt.UTC)
    lags = {s.table: status.lag(s, head, sizes, now) for s in states}
    return lags, f"source binlog head: {head}"


def cmd_list(args: argparse.Namespace, config: ProjectConfig, package: str, invocation: str,
        started: dt.datetime) -> int:
    specs = _specs(args, package)
    print(f"{'table':<24} {'source table':<24} tags")
    for spec in specs:
        print(f"{spec.name:<24} {spec.source_table:<24} {', '.join(spec.tags) or '-'}")
    return 0


def cmd_validate(args: argparse.Namespace, config: ProjectConfig, package: str, invocation: str,
        started: dt.datetime) -> int:
    specs = _all_specs(package)
    print(f"{config.root / PROJECT_FILE}: ok (target {config.target}, lake {config.lake_root})")
    print(f"{len(specs)} table module(s): {', '.join(sorted(specs)) or 'none'}")
    if config.source.unset:
        print(f"note: {', '.join(config.source.unset)} is not set; ingest, follow, dq and debug need it")
    return 0


def cmd_debug(args: argparse.Namespace, config: ProjectConfig, package: str, invocation: str,
        started: dt.datetime) -> int:
    from .debug import Outcome, run_checks

    failed = 0
    for check in run_checks(config, lambda: len(_all_specs(package))):
        print(check.line())
        failed += check.outcome == Outcome.FAIL
    print(f"{failed} check(s) failed" if failed else "All checks passed.")
    return 1 if failed else 0


def cmd_add_table(args: argparse.Namespace, config: ProjectConfig, package: str, invocation: str,
        started: dt.datetime) -> int:
    from ..source.cascades import find_cascades
    from ..source.connection import connection
    from ..source.introspect import describe_table
    from .scaffold import TableModuleSpec, write_table_module

    key = tuple(k.strip() for k in args.key.split(",")) if args.key else None
    with connection(config.source) as conn:
        schema = describe_table(conn, config.source.database, args.table, key)
        cascades = find_cascades(conn, config.source.database, args.table)
    spec = TableModuleSpec(source_table=args.table, key=schema.key,
                           columns=tuple((c.name, c.column_type) for c in schema.columns),
                           cascades=tuple(c.describe() for c in cascades))
    path = write_table_module(config.root / package / "tables", spec)
    print(f"wrote {path.relative_to(config.root)} (key: {', '.join(schema.key)})")
    if cascades:  # ingest refuses the table (on_cascade='refuse'): say so now, not at its first run
        print(f"note: {cascades[0].describe()}: the binlog does not carry cascaded changes; see on_cascade in it")
    return 0


def cmd_source(args: argparse.Namespace, config: ProjectConfig, package: str, invocation: str,
        started: dt.datetime) -> int:
    from ..source import embedded

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
        row = cur.fetchone()
        empty = row is None or row[0] == 0
    if empty:
        embedded.run_sql(server, embedded.split_sql((demo / "schema.sql").read_text()), source.database)
        print(f"loaded demo data into {source.database}")
    print(f"embedded MariaDB running on 127.0.0.1:{server.port} (data: {server.datadir})")
    return 0


def cmd_spark_check(args: argparse.Namespace, config: ProjectConfig, package: str, invocation: str,
        started: dt.datetime) -> int:
    from ..sink.spark import delta_artifact, get_spark

    spark = get_spark(config)
    spark.range(1).count()
    print(f"Spark {spark.version} with Delta ({delta_artifact()}) is ready")
    return 0


def cmd_eject(args: argparse.Namespace, config: ProjectConfig, package: str, invocation: str,
        started: dt.datetime) -> int:
    from .eject import eject

    for line in eject(args.project_dir.resolve()):
        print(line)
    return 0


COMMANDS = {
    "eject": cmd_eject,
    "ingest": cmd_ingest,
    "follow": cmd_follow,
    "dq": cmd_dq,
    "repair": cmd_repair,
    "rebuild": cmd_rebuild,
    "maintain": cmd_maintain,
    "status": cmd_status,
    "list": cmd_list,
    "validate": cmd_validate,
    "debug": cmd_debug,
    "add-table": cmd_add_table,
    "source": cmd_source,
    "spark-check": cmd_spark_check,
}
