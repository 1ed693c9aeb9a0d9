"""What the commands write to the console: a line per table on stdout (ingest and follow's
results, repair's, dq's report), each failure's one line on stderr, and ``--log-format json``'s
lines and log formatter.

Stdout is for people and stays text; stderr's error lines follow ``--log-format``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .results import RunStatus

if TYPE_CHECKING:
    from .repair import RepairResult
    from .results import TableResult

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")


class TableOutcome(Protocol):
    """One table's outcome of a per-table command (``repair``, ``rebuild``, ``maintain``)."""

    @property
    def table(self) -> str: ...

    @property
    def status(self) -> RunStatus: ...

    @property
    def message(self) -> str: ...

    @property
    def category(self) -> str: ...


def json_line(level: str, message: str, **fields: Any) -> str:
    """One console line as one JSON object (``--log-format json``)."""
    return json.dumps({"time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"), "level": level,
                       "message": message, **fields}, default=str)


class JsonFormatter(logging.Formatter):
    """Console log records as ``json_line``s."""

    def format(self, record: logging.LogRecord) -> str:
        extra = {"exception": self.formatException(record.exc_info)} if record.exc_info else {}
        return json_line(record.levelname.lower(), record.getMessage(), logger=record.name, **extra)


def error_line(line: str, log_format: LogFormat, category: str, **fields: str | None) -> None:
    """A failed table's or check's line on stderr, in the console's format; ``fields`` (table,
    setting, position) go into a JSON line when set."""
    given = {k: v for k, v in fields.items() if v}
    print(json_line("error", line, category=category, **given) if log_format == "json" else line, file=sys.stderr)


def naming(table: str, message: str) -> str:
    """A failed table's message, led by ``table <name>:`` unless it names the table already
    (an error of the source or the lake that did not know the table, e.g. a lost connection)."""
    return message if table in message else f"table {table}: {message}"


def shown(path: Path | None) -> str:
    """A path as the user would type it: relative to the current folder when under it."""
    if path is None:
        return "-"
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def table_line(table: str, text: str) -> None:
    """A table's line on stdout: its name in a column, then what became of it."""
    print(f"{table:<24} {text}")


def print_results(results: Sequence[TableResult], log_format: LogFormat = "text") -> list[TableResult]:
    """Ingest's and follow's line per table on stdout, each failure's line on stderr; returns
    the failed ones."""
    for r in results:
        if r.status == RunStatus.SUCCESS:
            table_line(r.table, f"ok     snapshot rows {r.snapshot_rows:>8}  binlog rows {r.binlog_rows:>7}"
                                f"  batch {r.batch:>4}  position {r.position or '-'}")
        elif r.status == RunStatus.SKIPPED_BUSY:
            table_line(r.table, "SKIPPED  another run holds it: try again later")
        else:
            table_line(r.table, "ERROR  see below")
    failed = [r for r in results if r.status != RunStatus.SUCCESS]
    for r in failed:
        error_line(f"ERROR [{r.category}]: {naming(r.table, r.message)}", log_format, r.category, table=r.table,
                   setting=r.setting, position=r.error_position)
    return failed


def print_failed(results: Sequence[TableOutcome], log_format: LogFormat) -> list[TableOutcome]:
    """Each failed table's line on stderr (its lines on stdout are printed already); returns them."""
    failed = [r for r in results if r.status != RunStatus.SUCCESS]
    for r in failed:
        error_line(f"ERROR [{r.category}]: {naming(r.table, r.message)}", log_format, r.category, table=r.table)
    return failed


def print_repair(result: RepairResult) -> None:
    """A repaired table's line, with the reconciliations before and after when keys differed."""
    if result.status == RunStatus.ERROR:
        table_line(result.table, "ERROR  see below")
    elif result.keys_found == 0:
        table_line(result.table, f"ok     nothing to repair: {result.after}")
    else:
        table_line(result.table, f"{'ok  ' if result.status == RunStatus.SUCCESS else 'FAIL'}   "
                                 f"{result.keys_found} differing keys: {result.rows_reread} re-read, "
                                 f"{result.keys_deleted} deleted at binlog {result.watermark} "
                                 f"(bronze batch {result.batch})")
        print(f"    before: {result.before}")
        print(f"    after:  {result.after}")


def print_checks(results: Sequence[Any]) -> None:
    """dq's report: each table's verdict and checks, then where the Data Docs are."""
    for result in results:
        at = f"  at binlog {result.compared_at}" if result.compared_at else ""
        table_line(result.table, f"{'PASS' if result.success else 'FAIL'}{at}")
        for check in result.checks:
            print(f"    {'ok  ' if check.success else 'FAIL'} {check.expectation}: {check.observed}")
    docs = next((r.docs_path for r in results if r.docs_path), None)
    if docs:
        print(f"Data Docs: {docs}")
