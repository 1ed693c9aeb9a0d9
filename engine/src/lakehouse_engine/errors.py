"""One root exception with categories, each with its exit code.

Messages are one line: what is wrong, where (table, setting or offset) and the fix; the places
are also fields of the error. They never carry secrets: connection errors are rebuilt from
host, port and user only.
"""

from __future__ import annotations

from typing import Any

# Stands for the table in the message of an error raised for several tables at once (by the
# binlog stream, which serves them all); ``IngestError.for_table`` puts in each one's name.
TABLE = "<table>"


class IngestError(Exception):
    """Root of every error the engine raises on purpose.

    Fields say where the fault is, for run_results.json and the JSON log, so nothing downstream
    parses the message: ``table`` the table at fault (a run records the error against it and
    goes on with the others), ``setting`` the project, profile or server setting to change,
    ``position`` the binlog position (``file:offset``) the error happened at.
    """

    exit_code = 1
    category = "error"

    def __init__(self, message: str, *, table: str | None = None, setting: str | None = None,
                 position: str | None = None):
        super().__init__(message)
        self.table = table
        self.setting = setting
        self.position = position

    def for_table(self, table: str) -> IngestError:
        """A copy of this error recorded against ``table``, naming it where the message says
        ``TABLE``: an error several tables share gets one copy each."""
        copy = _rebuild(type(self), str(self).replace(TABLE, table), table, self.setting, self.position)
        copy.__cause__, copy.__suppress_context__ = self.__cause__, self.__suppress_context__
        return copy

    def fields(self) -> dict[str, str]:
        """The fields that are set, with the category: what a record of the error carries."""
        found = {"table": self.table, "setting": self.setting, "position": self.position}
        return {"category": self.category, **{k: v for k, v in found.items() if v is not None}}

    def __reduce__(self) -> tuple[Any, ...]:  # keep the fields across pickling (errors of the binlog reader process)
        return (_rebuild, (type(self), str(self), self.table, self.setting, self.position))


def _rebuild(cls: type[IngestError], message: str, table: str | None, setting: str | None,
             position: str | None) -> IngestError:
    return cls(message, table=table, setting=setting, position=position)


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


class LakeUnavailableError(IngestError):
    """The lake (or target folder) cannot be written for now, e.g. a full disk; once that is
    fixed, running again resumes from the last commit."""

    category = "retriable"


class LakeDamagedError(IngestError):
    """A file the lake's Delta log refers to is gone (deleted outside the engine); the message
    names the command that rebuilds what it held."""

    category = "repairable"


class FatalError(IngestError):
    """A state the engine refuses to continue from (purged binlog, schema change, a bug)."""

    category = "fatal"


class DataQualityError(IngestError):
    """Quality checks ran and failed."""

    category = "data quality"
