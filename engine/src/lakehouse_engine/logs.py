"""Markers the engine's log records carry for the console (see ``run.runlog.RunLog``).

The log file gets every record. The console leaves out ``FILE_ONLY`` records, and ``PROGRESS``
records (chunks done, rows/s, ETA, binlog to go) unless it is a terminal: a scheduler's log
keeps one line per table and run instead of a line per commit.
"""

from __future__ import annotations

import logging

FILE_ONLY = {"file_only": True}
PROGRESS = {"progress": True}


def is_file_only(record: logging.LogRecord) -> bool:
    return bool(getattr(record, "file_only", False))


def is_progress(record: logging.LogRecord) -> bool:
    return bool(getattr(record, "progress", False))
