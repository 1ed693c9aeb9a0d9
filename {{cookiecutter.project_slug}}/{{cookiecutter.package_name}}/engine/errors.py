"""One root exception with categories, each with its exit code.

Messages are one line: what is wrong, where (table, setting or offset) and the fix. They never
carry secrets: connection errors are rebuilt from host, port and user only.
"""

from __future__ import annotations


class IngestError(Exception):
    """Root of every error the engine raises on purpose.

    ``table`` names the table at fault when there is one: a run records the error against that
    table and goes on with the others (one table's failure never stops the rest).
    """

    exit_code = 1
    category = "error"

    def __init__(self, message: str, *, table: str | None = None):
        super().__init__(message)
        self.table = table

    def __reduce__(self):  # keep ``table`` across pickling (errors of the binlog reader process)
        return (_rebuild, (type(self), str(self), self.table))


def _rebuild(cls: type[IngestError], message: str, table: str | None) -> IngestError:
    return cls(message, table=table)


class ConfigError(IngestError):
    """Bad project file, profile, table module, selection or environment variable."""

    exit_code = 2
    category = "configuration"


class PreflightError(IngestError):
    """The source server is reachable but not set up for change capture."""

    exit_code = 2
    category = "source"


class SourceUnavailableError(IngestError):
    """The source could not be reached or dropped the connection; running again may work."""

    category = "retriable"


class ConcurrentRunError(IngestError):
    """Another run wrote the same table at the same time; running again resumes cleanly."""

    category = "retriable"


class FatalError(IngestError):
    """A state the engine refuses to continue from (purged binlog, schema change, a bug)."""

    category = "fatal"


class DataQualityError(IngestError):
    """Quality checks ran and failed."""

    category = "data quality"
