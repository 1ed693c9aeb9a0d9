"""Command line: ``lakehouse COMMAND`` (also ``python -m lakehouse_engine`` and the project's own
``python -m <package>``). Exit codes: 0 ok, 1 failed tables or checks
(a table another run holds is one: ``ingest`` skips it, retriable), 2 usage or configuration
error, 130 interrupted (Ctrl-C).

The global options (``--target``, ``--project-dir``, ``--profiles-dir``, ``--log-format``) are
accepted before or after the command, as in dbt. Only the commands that read the source need
its password (``NEEDS_SOURCE``): ``status``, ``list``, ``validate`` and ``spark-check`` run
without it.

Every error reaches the user as one line on stderr; its details (traceback, JVM stack trace) go
to ``target/lakehouse.log``, and ``ingest``, ``follow`` and ``dq`` record it in
``target/run_results.json``.

This module parses the command line (``parser``), loads the project, runs the command's module
(``commands``) with its context and typed options (``context``, ``options``), and turns whatever
stopped it into that one line and the exit code.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from .. import failures, gcpace
from ..config.project import load_project, peek_target_dir
from ..errors import IngestError
from ..logs import FILE_ONLY
from . import project
from .commands import (
    add_table,
    debug,
    dq,
    eject,
    follow,
    ingest,
    list_tables,
    maintain,
    rebuild,
    repair,
    schema,
    source,
    spark_check,
    status,
    submit_line,
    validate,
)
from .context import CommandContext, Invocation
from .locks import TableBusy
from .options import (
    AddTableOptions,
    FollowOptions,
    GlobalOptions,
    IngestOptions,
    MaintainOptions,
    RepairOptions,
    ReportOptions,
    SchemaOptions,
    Selection,
    SourceOptions,
    SubmitLineOptions,
)
from .parser import build_parser
from .printer import LogFormat, json_line, shown
from .recording import Recorder, start_lineage
from .results import RunStatus
from .runlog import RunLog

log = logging.getLogger("lakehouse")

# The commands whose every outcome is recorded in run_results.json.
RECORDED_COMMANDS = frozenset({"ingest", "follow", "dq", "maintain", "repair", "rebuild"})
# The commands (and ``source`` actions) that connect with the profile's user and password.
NEEDS_SOURCE = frozenset({"ingest", "follow", "dq", "add-table", "source up"})
INTERRUPTED = "interrupted; progress up to the last commit is kept"

Options = TypeVar("Options")
# A command as dispatched: its context and what argparse parsed, which it turns into its options.
Command = Callable[[CommandContext, argparse.Namespace], int]


@dataclass(frozen=True)
class Failure:
    """How a failed invocation is reported."""

    line: str  # the one line on stderr
    message: str  # recorded in run_results.json
    exit_code: int
    status: RunStatus = RunStatus.ERROR
    category: str = "internal"
    fields: Mapping[str, str] = field(default_factory=dict)  # the error's table, setting, position


def entry(argv: Sequence[str] | None = None) -> int:
    """The ``lakehouse`` command: the project is the folder given by ``--project-dir`` or the
    current one (``lakehouse_project.yml``), its table modules those of its package."""
    return main(argv, prog="lakehouse")


def main(argv: Sequence[str] | None = None, package: str | None = None, prog: str | None = None) -> int:
    """``python -m <package>`` (the project's own entry point, which names its package) and
    ``lakehouse`` (which finds it: ``project.project_package``)."""
    with gcpace.bulk():  # rows stream through this process's Python: see gcpace
        return _main(argv, package, prog)


def _main(argv: Sequence[str] | None, package: str | None, prog: str | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    project_dir = project.project_dir_from(arguments)
    if package is None:
        package = project.package_if_found(project_dir)
    args = build_parser(prog or f"python -m {package}", package, project_dir).parse_args(arguments)
    if args.command == "schema":  # for writing the files: it must work while they are broken
        return schema.run(SchemaOptions.from_args(args))
    run = Invocation(args.command, str(uuid.uuid4()), dt.datetime.now(dt.UTC))
    flags = GlobalOptions.from_args(args)
    failures.reset_interrupt()
    with RunLog(package or "lakehouse_engine", flags.log_format, progress=flags.progress) as run_log:
        return _invoke(args, flags, package, run, run_log)


def _invoke(args: argparse.Namespace, flags: GlobalOptions, package: str | None, run: Invocation,
            run_log: RunLog) -> int:
    """Load the project and run the command; whatever stops it ends as one line and an exit code."""
    # Before the configuration is read, so that a broken one is logged and recorded too.
    recorder = Recorder(peek_target_dir(flags.project_dir), flags.results_file)
    run_log.write_to(recorder.target_dir)
    lake_root: str | None = None
    try:
        config = load_project(flags.project_dir, profiles_dir=flags.profiles_dir, target=flags.target,
                              require_env=_needs_source(args))
        recorder, lake_root = replace(recorder, target_dir=config.target_dir, config=config), config.lake_root
        run_log.write_to(recorder.target_dir)
        if package is None:  # the configuration is sound, the package is not found: say why
            package = project.project_package(flags.project_dir)
        context = CommandContext(config, package, run, flags.project_dir, flags.log_format, recorder)
        if run.command in RECORDED_COMMANDS and hasattr(args, "select"):
            recorder = replace(recorder, lineage=start_lineage(config, run, context.specs(Selection.from_args(args))))
            context = replace(context, recorder=recorder)
        return COMMANDS[args.command](context, args)
    except (Exception, KeyboardInterrupt) as exc:  # every error ends here as one line
        failure = _failure(exc, run.command, lake_root, run_log.path)
        return _report(failure, exc, run, recorder, flags.log_format)


def _needs_source(args: argparse.Namespace) -> bool:
    """Whether the command connects to the source (and so needs every profile variable set)."""
    action = getattr(args, "action", None)
    return args.command in NEEDS_SOURCE or f"{args.command} {action}" in NEEDS_SOURCE


def _failure(exc: BaseException, command: str, lake_root: str | None, log_path: Path | None) -> Failure:
    """Classify what stopped the command: interrupted, an engine error, a Spark error, or a bug."""
    details = f"; details in {shown(log_path)}" if log_path else ""
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


def _report(failure: Failure, exc: BaseException, run: Invocation, recorder: Recorder,
            log_format: LogFormat = "text") -> int:
    """Log the details, record the failure (not a refusal by a busy table: the run holding it
    records its own), then print its one line."""
    log.error("%s failed: %s\n%s", run.command, failure.message, failures.details(exc), extra=FILE_ONLY)
    line = failure.line
    if failure.category == TableBusy.category and recorder.lineage is not None:
        recorder.lineage.abort()  # its START was sent; the holder's run is the one that counts
    if run.command in RECORDED_COMMANDS and failure.category != TableBusy.category:
        try:
            recorder.record(run, failure.status, [], failure.message, extra={"error": dict(failure.fields)})
        except OSError as err:  # say so: the run_results.json there is an earlier run's
            log.error("cannot write run_results.json: %s", err, extra=FILE_ONLY)
            line += f" (run_results.json not written: {err.strerror})"
    if log_format == "json":
        line = json_line("error", line, **{"category": failure.category, **failure.fields},
                         exit_code=failure.exit_code)
    print(line, file=sys.stderr)
    return failure.exit_code


def _with(run: Callable[[CommandContext, Options], int],
          options: Callable[[argparse.Namespace], Options]) -> Command:
    """A command taking options: built from what argparse parsed, then run."""
    return lambda context, args: run(context, options(args))


def _plain(run: Callable[[CommandContext], int]) -> Command:
    """A command taking no options."""
    return lambda context, args: run(context)


COMMANDS: dict[str, Command] = {
    "eject": _plain(eject.run),
    "ingest": _with(ingest.run, IngestOptions.from_args),
    "follow": _with(follow.run, FollowOptions.from_args),
    "dq": _with(dq.run, Selection.from_args),
    "repair": _with(repair.run, RepairOptions.from_args),
    "rebuild": _with(rebuild.run, Selection.from_args),
    "maintain": _with(maintain.run, MaintainOptions.from_args),
    "status": _with(status.run, ReportOptions.from_args),
    "list": _with(list_tables.run, ReportOptions.from_args),
    "validate": _plain(validate.run),
    "debug": _plain(debug.run),
    "add-table": _with(add_table.run, AddTableOptions.from_args),
    "source": _with(source.run, SourceOptions.from_args),
    "spark-check": _plain(spark_check.run),
    "submit-line": _with(submit_line.run, SubmitLineOptions.from_args),
}
