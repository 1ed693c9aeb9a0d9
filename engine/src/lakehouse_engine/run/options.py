"""Each command's options as a frozen dataclass, built here, and only here, from what argparse
parsed: the commands read typed fields, never argparse's namespace."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .parser import PROGRESS
from .printer import LogFormat

SourceAction = Literal["up", "down", "status", "changes"]
SchemaFile = Literal["project", "profiles", "status", "run-results"]


@dataclass(frozen=True)
class GlobalOptions:
    """The options of every command, given before or after its name."""

    project_dir: Path  # resolved
    profiles_dir: Path | None
    target: str | None
    log_format: LogFormat
    progress: bool | None  # progress lines on the console; None: only on a terminal
    results_file: Path | None = None  # a copy of run_results.json for this invocation alone

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> GlobalOptions:
        return cls(args.project_dir.resolve(), args.profiles_dir, args.target, args.log_format,
                   PROGRESS[args.progress], args.results_file)


@dataclass(frozen=True)
class Selection:
    """``--select`` and ``--exclude``: table names, wildcards (``order*``) or ``tag:TAG``."""

    select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Selection:
        return cls(tuple(args.select), tuple(args.exclude))


@dataclass(frozen=True)
class IngestOptions:
    """``ingest``: the tables, whether to snapshot them again, and whether that was confirmed."""

    selection: Selection
    full_refresh: bool = False
    yes: bool = False  # --full-refresh confirmed without asking

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> IngestOptions:
        return cls(Selection.from_args(args), args.full_refresh, args.yes)


@dataclass(frozen=True)
class FollowOptions:
    """``follow``: the tables, and how often and how long to run cycles."""

    selection: Selection
    interval_s: float
    max_cycles: int | None = None
    max_seconds: float | None = None
    rest_spark_after_s: float | None = None  # None: Spark's context never rests

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> FollowOptions:
        return cls(Selection.from_args(args), args.interval, args.max_cycles, args.max_seconds,
                   args.rest_spark_after or None)


@dataclass(frozen=True)
class RepairOptions:
    """``repair``: the tables, and how long a follow holding one may take to repair it."""

    selection: Selection
    wait_s: float  # how long to wait for a follow to repair a table it holds

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RepairOptions:
        return cls(Selection.from_args(args), args.wait)


@dataclass(frozen=True)
class ReportOptions:
    """``status`` and ``list``: the tables, and whether to print JSON for a machine."""

    selection: Selection
    json: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReportOptions:
        return cls(Selection.from_args(args), bool(args.json))


@dataclass(frozen=True)
class MaintainOptions:
    """``maintain``: the tables, and how VACUUM runs (if at all)."""

    selection: Selection
    retain_hours: int
    vacuum: bool = True

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MaintainOptions:
        return cls(Selection.from_args(args), args.retain_hours, vacuum=not args.no_vacuum)


@dataclass(frozen=True)
class AddTableOptions:
    """``add-table``: the source table to scaffold a module for."""

    table: str
    key: tuple[str, ...] | None = None  # None: the table's primary key

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AddTableOptions:
        return cls(args.table, tuple(k.strip() for k in args.key.split(",")) if args.key else None)


@dataclass(frozen=True)
class SourceOptions:
    """``source``: what to do with the embedded MariaDB."""

    action: SourceAction

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SourceOptions:
        return cls(args.action)


@dataclass(frozen=True)
class SubmitLineOptions:
    """``submit-line``: the command (and its options) spark-submit is to run."""

    command: tuple[str, ...]
    target: str | None = None  # passed on: the submitted run reads the same output
    profiles_dir: Path | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SubmitLineOptions:
        profiles = args.profiles_dir.resolve() if args.profiles_dir is not None else None
        return cls(tuple(args.submitted), args.target, profiles)


@dataclass(frozen=True)
class SchemaOptions:
    """``schema``: which file's JSON Schema to print."""

    file: SchemaFile

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SchemaOptions:
        return cls(args.file)
