"""The ``lakehouse`` command line's grammar: the commands, their options, the global options
(accepted before or after the command, as in dbt) and ``--version``.

Only the grammar: ``options`` turns what argparse parsed into each command's typed options.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config.defaults import DEFAULTS
from . import project
from .printer import LOG_FORMATS

PROGRESS = {"auto": None, "always": True, "never": False}  # auto: progress lines only on a terminal
# Shown by --version next to the project's own version: what its results depend on.
ENGINE_PACKAGES = ("pyspark", "delta-spark", "great-expectations", "mysql-replication")


def build_parser(prog: str, package: str | None = None, project_dir: Path | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Lakehouse ingestion: MySQL/MariaDB -> Delta bronze/silver."
    )
    parser.add_argument("--version", action=_VersionAction, package=package, project_dir=project_dir)
    _global_options(parser, suppress=False)
    # The same options after the command; SUPPRESS keeps them from resetting what came before it.
    after = argparse.ArgumentParser(add_help=False)
    _global_options(after, suppress=True)
    commands = _Commands(parser.add_subparsers(dest="command", required=True), after)
    _ingest_commands(commands)
    _lake_commands(commands)
    _project_commands(commands)
    return parser


@dataclass(frozen=True)
class _Commands:
    """Adds the commands, each accepting the global options after its name too."""

    subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
    after: argparse.ArgumentParser

    def command(self, name: str, help_text: str) -> argparse.ArgumentParser:
        return self.subparsers.add_parser(name, help=help_text, description=help_text, parents=[self.after])

    def selectable(self, name: str, help_text: str) -> argparse.ArgumentParser:
        """A command of the tables ``--select`` and ``--exclude`` choose."""
        sub = self.command(name, help_text)
        sub.add_argument("--select", "-s", nargs="+", default=[],
                         help="table names, wildcards (order*) or tag:TAG")
        sub.add_argument("--exclude", nargs="+", default=[], help="table names, wildcards (order*) or tag:TAG")
        return sub


def _ingest_commands(commands: _Commands) -> None:
    """The commands that read the source: ingest, follow, dq."""
    ingest = commands.selectable("ingest", "snapshot new tables, catch up on the binlog, merge silver")
    ingest.add_argument("--full-refresh", action="store_true",
                        help="snapshot again: bronze starts anew, silver is replaced in one commit once "
                             "every chunk is read (asks on a terminal; --yes elsewhere)")
    ingest.add_argument("--yes", action="store_true", help="confirm --full-refresh without asking")
    follow = commands.selectable("follow", "ingest cycles back to back until stopped (Ctrl-C or SIGTERM ends "
                                           "the current cycle, then exits)")
    follow.add_argument("--interval", type=_seconds, default=DEFAULTS.follow_interval_s, metavar="SECONDS",
                        help="start a cycle at most this often; an idle cycle waits the rest "
                             f"(default {DEFAULTS.follow_interval_s:g})")
    follow.add_argument("--max-cycles", type=_count, default=None, metavar="N", help="stop after N cycles")
    follow.add_argument("--max-seconds", type=_seconds, default=None, metavar="S", help="stop after S seconds")
    follow.add_argument("--rest-spark-after", type=_seconds, default=DEFAULTS.follow_spark_rest_s, metavar="SECONDS",
                        help="stop Spark's context after this long without work: an idle follow then costs "
                             "a fraction of the CPU, and the next change starts it again in the warm JVM "
                             "in about a second; 0 never stops it; a local master only "
                             f"(default {DEFAULTS.follow_spark_rest_s:g})")
    commands.selectable("dq", "run the Great Expectations checks against the source at one binlog position")


def _lake_commands(commands: _Commands) -> None:
    """The commands that work on the lake's tables: repair, rebuild, maintain, status, list."""
    repair = commands.selectable("repair", "find the rows silver holds wrongly (as dq's value check does) and "
                                           "re-read only those from the source, without a re-snapshot; the "
                                           "table's binlog position is kept; a table a follow holds is repaired "
                                           "by that follow between two cycles")
    repair.add_argument("--wait", type=_seconds, default=DEFAULTS.repair_wait_s, metavar="SECONDS",
                        help="how long to wait for a follow to repair a table it holds "
                             f"(default {DEFAULTS.repair_wait_s:g})")
    commands.selectable("rebuild", "write silver anew from the whole of bronze (the newest change per key), "
                                   "e.g. after changing a table's transform; equal to the incremental silver")
    maintain = commands.selectable("maintain", "compact bronze and silver (OPTIMIZE) and delete the files old "
                                               "versions no longer need (VACUUM); a table being ingested is "
                                               "skipped with an error")
    maintain.add_argument("--retain-hours", type=int, default=DEFAULTS.retain_hours, metavar="H",
                          help="VACUUM keeps files the last H hours of versions read "
                               f"(default and minimum {DEFAULTS.retain_hours})")
    maintain.add_argument("--no-vacuum", action="store_true", help="compact only")
    status = commands.selectable("status", "each table's phase, chunks, bronze batch, position and lag, and "
                                           "the last run (no Spark; the lag only with MYSQL_PASSWORD set)")
    status.add_argument("--json", action="store_true", help="one JSON document (schema: lakehouse schema status)")
    listing = commands.selectable("list", "list the selected tables with their source table and tags")
    listing.add_argument("--json", action="store_true", help="a JSON array, one object per table")


def _project_commands(commands: _Commands) -> None:
    """The commands about the project and its setup."""
    commands.command("validate", "load the configuration and every table module (no source, no Spark)")
    commands.command("debug", "check the configuration, Java, the Delta jars, the source connection, its binlog "
                              "settings and grants")
    add = commands.command("add-table", "scaffold a table module by introspecting the source")
    add.add_argument("table")
    add.add_argument("--key", default=None, help="comma separated key columns (default: primary key)")
    source = commands.command("source", "the embedded MariaDB (demo and tests)")
    source.add_argument("action", choices=["up", "down", "status", "changes"])
    commands.command("spark-check", "start Spark with Delta once (resolves and caches the jars)")
    submit = commands.command("submit-line", "print the spark-submit command line that runs COMMAND (for a "
                                             "cluster's gateway or Airflow's SparkSubmitOperator)")
    submit.add_argument("submitted", nargs=argparse.REMAINDER, metavar="COMMAND ...",
                        help="the command and its options, e.g. ingest --select orders")
    commands.command("eject", "copy the engine's source into this project (vendored) in place of the "
                              "lakehouse-engine pin")
    schema = commands.command("schema", "print the JSON Schema of lakehouse_project.yml or profiles.yml (for an "
                                        "editor), or of status --json or run_results.json (needs no project)")
    schema.add_argument("file", choices=["project", "profiles", "status", "run-results"])


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
    parser.add_argument("--results-file", type=Path, default=default(None),
                        help="also write this invocation's run results to this file (e.g. one per "
                             "scheduler task, which target/run_results.json shares with every run)")
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
    from .. import __version__

    engine_dir = Path(__file__).resolve().parents[1]
    where = "vendored" if engine_dir == project_dir / "lakehouse_engine" else None
    commit = project.template_commit(project_dir)
    parts = [f"template {commit[:12] if commit else 'unknown'}"]
    if package is not None:
        parts.append(f"project {package} {_project_version(project_dir)}")
    packages = []
    for name in ENGINE_PACKAGES:
        try:
            packages.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            packages.append(f"{name} not installed")
    return (f"lakehouse-engine {__version__}{' ' + where if where else ''} ({'; '.join(parts)}; "
            f"{', '.join(packages)}; Python {sys.version.split()[0]})")


def _project_version(project_dir: Path) -> str:
    """The version in the project's pyproject.toml, else ``unknown``."""
    import tomllib

    try:
        pyproject = tomllib.loads((project_dir / "pyproject.toml").read_text())
        return str(pyproject["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


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
