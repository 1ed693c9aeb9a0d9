"""The logging of one invocation (``RunLog``): the console's lines (text or JSON, progress lines
only on a terminal unless ``--progress`` says otherwise) and ``target/lakehouse.log``, which gets
every record, including the details of an error whose one line the console shows."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..logs import is_file_only, is_progress
from .printer import JsonFormatter, LogFormat

log = logging.getLogger("lakehouse")

LOG_FILE = "lakehouse.log"


class RunLog:
    """Console progress lines and the log file of one invocation.

    The handlers are removed again at exit, so ``main`` can run more than once in a process.
    """

    def __init__(self, package: str, log_format: LogFormat = "text", progress: bool | None = None):
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
        console.setFormatter(JsonFormatter() if self.log_format == "json"
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


@contextmanager
def file_only(logger: logging.Logger, message: str) -> Iterator[None]:
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
