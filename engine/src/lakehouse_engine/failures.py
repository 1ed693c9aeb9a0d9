"""Exceptions that reach the command line, as one-line engine errors.

Spark reports failures as Java exceptions wrapped by py4j (``Py4JJavaError``) or re-raised by
pyspark (``AnalysisException``, ``PythonException``...). Their text is a JVM stack trace: the
console gets the operation and the root cause's first line instead, the log gets the rest.
Driver errors of the source and file-system errors of the lake (a full disk, a read-only lake,
a data file deleted outside the engine) get their class (retriable, configuration,
repairable) and the fix, whether Python or Spark raised them.
"""

from __future__ import annotations

import errno
import os
import re
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from .errors import ConfigError, IngestError, LakeDamagedError, LakeUnavailableError
from .source.connection import driver_error

ENGINE_DIR = Path(__file__).resolve().parent
# Frames of these modules handle errors or are the command line around the operation that failed,
# which is further in: this module, run/cli.py and the modules of the command line split from it.
_NOT_OPERATIONS = {ENGINE_DIR / "failures.py", *(ENGINE_DIR / "run" / name for name in (
    "cli.py", "context.py", "options.py", "parser.py", "printer.py", "runlog.py"))}
_COMMANDS_DIR = ENGINE_DIR / "run" / "commands"
_CALL = re.compile(r"while calling (?:[oz]\d*[.:])?([\w.$]+)\.\s*$")
_JAVA_CLASS = re.compile(r"^(?:[a-z_$][\w$]*\.)+([A-Z][\w$]*)(?=: |$)")
_MISSING_S3A = re.compile(r"S3AFileSystem not found|No FileSystem for scheme \"?s3a", re.IGNORECASE)
_MISSING_FS = re.compile(r"No FileSystem for scheme \"?(\w+)|Class (\S+FileSystem) not found")
_MISSING_GCS = re.compile(r"GoogleHadoopFileSystem not found|No FileSystem for scheme \"?gs\b", re.IGNORECASE)
# A Hadoop connector built for Hadoop 3.3 (the GCS connector 3.0.x) reading Parquet with Hadoop
# 3.4's vectored reads, whose helper changed signature.
_VECTORED_READS = re.compile(r"NoSuchMethodError.*VectoredReadUtils")
GCS_CONNECTOR = ("https://repo1.maven.org/maven2/com/google/cloud/bigdataoss/gcs-connector/3.0.13/"
                 "gcs-connector-3.0.13-shaded.jar")
# S3A found no credentials in its provider chain (Hadoop's NoAuthWithAWSException).
_NO_AWS_CREDENTIALS = re.compile(r"NoAuthWithAWSException|No AWS Credentials provided")
_NOT_WRITABLE = re.compile(
    r"Permission denied|AccessDeniedException|AccessControlException|Read-only file system|"
    r"Not a directory|ParentNotDirectoryException|Mkdirs failed|DELTA_CANNOT_CREATE_LOG_PATH"
)

_NO_SPACE = re.compile(r"No space left on device|Disk quota exceeded", re.IGNORECASE)
# A data file the Delta log names but the file system lacks (Spark's FileNotFoundException,
# FAILED_READ_FILE.FILE_NOT_EXIST, DELTA_FILE_NOT_FOUND; pyarrow's "Failed to open local file").
_MISSING = re.compile(r"FileNotFound|FILE_NOT_EXIST|DELTA_FILE_NOT_FOUND|does not exist|No such file|cannot be found")
_PARQUET = re.compile(r"((?:[a-z0-9]+:)?/[^\s'\"`,;]*?\.parquet)")
_LAYER_TABLE = re.compile(r"/(bronze|silver)/([^/]+)/")
_NOT_WRITABLE_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM}
_NO_SPACE_ERRNOS = {errno.ENOSPC, errno.EDQUOT}

# Where a dead JVM is explained: Spark's local driver runs the tasks too, and a task that runs
# out of heap makes Spark exit the whole JVM; later calls then find py4j's socket refused.
JVM_GONE = ("Spark's JVM stopped ({}); its last lines are in spark.log in the target folder (an "
            "OutOfMemoryError there: raise spark.driver.memory under spark.conf in lakehouse_project.yml, "
            "e.g. 4g), then run again; it resumes from the last commit")
_PY4J_DIR = f"{os.sep}py4j{os.sep}"
# A Spark Connect server that stopped answering: its client retried for minutes, then raised
# gRPC's own error.
_GRPC_GONE = re.compile(r"status = StatusCode\.(UNAVAILABLE|DEADLINE_EXCEEDED)\b")
CONNECT_GONE = ("the Spark Connect server stopped answering ({}); check that it runs (its own log says why it "
                "stopped) and that this host reaches it, then run again; it resumes from the last commit")

_interrupted = threading.Event()


@dataclass(frozen=True)
class SparkFailure:
    """What a Spark or py4j exception says, without its stack trace."""

    call: str  # the JVM method Python was calling ("save"), "" when unknown
    causes: tuple[str, ...]  # the first line of each exception of the cause chain, outermost first

    @property
    def root(self) -> str:
        return self.causes[-1] if self.causes else "no message"


def note_interrupt() -> None:
    """Remember a Ctrl-C: errors raised while Spark cancels its jobs are the interruption."""
    _interrupted.set()


def was_interrupted() -> bool:
    return _interrupted.is_set()


def reset_interrupt() -> None:
    _interrupted.clear()


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text; ``str()`` of a py4j error asks the JVM and may fail."""
    try:
        text = str(exc)
    except Exception:  # a py4j error whose JVM is gone: its class name still says something
        return type(exc).__name__
    return _first_line(text) or type(exc).__name__


def spark_failure(exc: BaseException) -> SparkFailure | None:
    """Read a Spark/py4j exception, or ``None`` when ``exc`` is not one."""
    gone = _connect_gone(exc)
    if gone is not None:
        return SparkFailure("", (CONNECT_GONE.format(gone),))
    if "py4j" not in sys.modules:  # no Spark error can exist yet; spare the import
        return None
    from py4j.protocol import Py4JError, Py4JJavaError, Py4JNetworkError
    from pyspark.errors import PySparkException

    if isinstance(exc, Py4JJavaError):
        causes = _java_causes(exc.java_exception)  # empty: the JVM went away while we asked
        return SparkFailure(_call(exc.errmsg), causes or (JVM_GONE.format("it stopped answering"),))
    if isinstance(exc, PySparkException):
        origin = getattr(exc, "_origin", None)  # the Java exception pyspark re-raised, if any
        causes = _java_causes(origin) if origin is not None else ()
        return SparkFailure("", causes or (_short_class(first_line(exc)),))
    if isinstance(exc, Py4JNetworkError):  # the gateway itself: the JVM died or the connection broke
        return SparkFailure(_call(first_line(exc)), (JVM_GONE.format(first_line(exc)),))
    if isinstance(exc, Py4JError):  # e.g. a method the JVM's classes lack (a jar of another version)
        return SparkFailure(_call(first_line(exc)), (first_line(exc),))
    if isinstance(exc, OSError) and _raised_in_py4j(exc):  # py4j's socket to a JVM that is gone
        return SparkFailure("", (JVM_GONE.format(f"{type(exc).__name__}: {exc.strerror or exc}"),))
    return None


def _connect_gone(exc: BaseException) -> str | None:
    """The gRPC status of a Spark Connect call that failed for good (its retries exhausted), or
    None for any other exception. Later calls of this process then fail at once: each would
    otherwise wait out the client's retries again (minutes), table after table."""
    grpc = sys.modules.get("grpc")
    if grpc is None:  # no Spark Connect client was ever used
        return None
    if isinstance(exc, grpc.RpcError):
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        status = getattr(code, "name", None) or type(exc).__name__
    else:  # pyspark re-raises a call that failed without details as its own exception, with gRPC's text
        found = _GRPC_GONE.search(str(exc)) if type(exc).__module__.startswith("pyspark.errors.exceptions.connect") \
            else None
        if found is None:
            return None
        status = found.group(1)
    try:
        from pyspark.sql.connect.session import SparkSession

        session = SparkSession.getActiveSession()
        if session is not None:
            session.client.set_retry_policies([])
    except Exception:  # no session to spare: the message still stands
        pass
    return status


def _raised_in_py4j(exc: BaseException) -> bool:
    """Whether the innermost frame of the exception's traceback is py4j's (its gateway client)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and _PY4J_DIR in tb.tb_frame.f_code.co_filename


def operation(exc: BaseException) -> str:
    """The innermost engine function the exception passed through, e.g. ``bronze.append``."""
    found = ""
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        path = Path(tb.tb_frame.f_code.co_filename)
        if ENGINE_DIR in path.parents and path not in _NOT_OPERATIONS and _COMMANDS_DIR not in path.parents:
            found = f"{path.stem}.{tb.tb_frame.f_code.co_name}"
        tb = tb.tb_next
    return found


def translate(exc: BaseException, *, command: str, lake_root: str | None) -> IngestError | None:
    """An engine error for a Spark/py4j exception, a source driver error or a file-system
    error, ``None`` for anything else. ``command`` starts a source error's message.

    A missing filesystem (``s3a://`` without hadoop-aws) and an unwritable lake are
    configuration errors naming the fix, a full disk is retriable, a missing data file
    repairable; any other Spark failure names the operation and root cause.
    """
    source = driver_error(exc, command)
    if source is not None:
        return source
    failure = spark_failure(exc)  # first: py4j's own socket errors are OSErrors too
    if failure is None and isinstance(exc, OSError):
        return os_error(exc, command, operation(exc) or command)
    if failure is None:
        return None
    where = operation(exc)
    lake_error = lake_config_error(failure.causes, lake_root, where or command)
    if lake_error is not None:
        return lake_error
    storage = storage_error(failure.causes, command, where or command)
    if storage is not None:
        return storage
    place = f" in {where}" if where else ""
    call = f", Spark call {failure.call}" if failure.call else ""
    return IngestError(f"{command} failed{place}{call}: {failure.root}")


def lake_config_error(causes: tuple[str, ...], lake_root: str | None, where: str) -> ConfigError | None:
    """The configuration error a failure's cause chain (first lines, outermost first) shows, if
    any: a missing filesystem, no credentials for an s3a lake, or a lake this user cannot write."""
    chain = " | ".join(causes)
    root = causes[-1] if causes else "no message"
    if _MISSING_S3A.search(chain):
        return ConfigError(missing_s3a_message(lake_root))
    if _MISSING_GCS.search(chain):
        return ConfigError(
            f"{_lake(lake_root)} needs Google's GCS connector, which Spark does not ship: add its shaded "
            f"jar ({GCS_CONNECTOR}) to spark.conf 'spark.jars' in lakehouse_project.yml (a URL or a "
            "downloaded copy) or put it in LAKEHOUSE_JARS_DIR with the Delta jars, and set "
            "spark.hadoop.fs.gs.impl to com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem"
        )
    if _VECTORED_READS.search(chain):
        return ConfigError(
            f"a Hadoop connector for {_lake(lake_root)} was built for another Hadoop than Spark's and "
            "fails Parquet's vectored reads: set spark.conf 'spark.hadoop.parquet.hadoop.vectored.io.enabled' "
            "to \"false\" in lakehouse_project.yml (the GCS connector 3.0.x needs it)"
        )
    missing = _MISSING_FS.search(chain)
    if missing:
        return ConfigError(
            f"{_lake(lake_root)} needs a Hadoop filesystem Spark does not ship "
            f"({missing.group(1) or missing.group(2)}): add its package to spark.conf "
            "'spark.jars.packages' in lakehouse_project.yml, or its jars to LAKEHOUSE_JARS_DIR"
        )
    if _NO_AWS_CREDENTIALS.search(chain):
        return ConfigError(
            f"no AWS credentials for {_lake(lake_root)} (in {where}): export AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones), or run where an "
            "instance or container role provides them"
        )
    if _NOT_WRITABLE.search(chain):
        if lake_root is not None and "://" in lake_root and not lake_root.startswith("file:"):
            return ConfigError(
                f"cannot access {_lake(lake_root)} (in {where}): {root}; check the credentials "
                "(for s3a: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) and that they may read and "
                "write that path, or change lake_root in lakehouse_project.yml"
            )
        return ConfigError(
            f"cannot write {_lake(lake_root)} (in {where}): {root}; make the lake "
            "folder writable for this user, or change lake_root in lakehouse_project.yml"
        )
    return None


def storage_error(causes: tuple[str, ...], command: str, where: str) -> IngestError | None:
    """The error a failure's cause chain shows when the disk is full or a data file is gone;
    ``command`` starts the message, ``where`` is the operation that failed."""
    chain = " | ".join(causes)
    if _NO_SPACE.search(chain):
        return no_space_error(_first_path(chain), command, where)
    missing = _PARQUET.search(chain) if _MISSING.search(chain) else None
    return missing_file_error(missing.group(1), where) if missing else None


def os_error(exc: OSError, command: str, where: str) -> IngestError | None:
    """The error for a file-system error Python raised (pyarrow, the engine's own log writes)."""
    path = str(exc.filename) if exc.filename is not None else _first_path(str(exc))
    if exc.errno in _NO_SPACE_ERRNOS or _NO_SPACE.search(str(exc)):
        return no_space_error(path, command, where)
    if exc.errno in _NOT_WRITABLE_ERRNOS:
        return ConfigError(
            f"{command}: cannot write {path or 'the lake'} ({exc.strerror or exc}; in {where}): make it writable for "
            "this user (a read-only lake: mount it read-write), or change lake_root / target_dir in "
            "lakehouse_project.yml; then run again, it resumes from the last commit", setting="lake_root")
    missing = _PARQUET.search(f"{exc.filename or ''} {exc}")
    if (isinstance(exc, FileNotFoundError) or _MISSING.search(str(exc))) and missing:
        return missing_file_error(missing.group(1), where)
    return None


def no_space_error(path: str, command: str, where: str) -> LakeUnavailableError:
    place = f"writing {path}" if path else "writing the lake"
    return LakeUnavailableError(
        f"{command}: no space left on the device {place} (in {where}): free space there (or move lake_root / "
        "target_dir to a larger disk), then run again; it resumes from the last commit")


def missing_file_error(path: str, where: str) -> IngestError:
    """A data file of the lake is gone: silver is rebuilt from bronze, bronze re-snapshotted."""
    layer_table = _LAYER_TABLE.search(path)
    if layer_table is None:  # not a lake table's file (a staged chunk): the run writes it anew
        return LakeUnavailableError(f"the file {path} is missing (in {where}): run again; it resumes "
                                    "from the last commit")
    layer, table = layer_table.groups()
    if layer == "silver":
        return LakeDamagedError(
            f"table {table}: silver's data file {path} is missing (deleted outside the engine; in {where}): "
            f"rebuild silver from bronze with `make rebuild TABLE={table}`, then run again", table=table)
    return LakeDamagedError(
        f"table {table}: bronze's data file {path} is missing (deleted outside the engine; in {where}): "
        f"bronze is the changelog and nothing holds its rows again: re-snapshot the table with "
        f"`make ingest TABLE={table} FULL_REFRESH=1`", table=table)


def _first_path(text: str) -> str:
    found = re.search(r"(?:[a-z0-9]+:)?/[^\s'\"`,;:]+", text)
    return found.group(0) if found else ""


def missing_s3a_message(lake_root: str | None) -> str:
    version = hadoop_version()
    return (
        f"{_lake(lake_root)} needs the S3A filesystem (hadoop-aws), which Spark does not ship: "
        f"add 'org.apache.hadoop:hadoop-aws:{version}' (the version of Spark's Hadoop; it brings "
        "the AWS SDK bundle) to spark.conf 'spark.jars.packages' in lakehouse_project.yml, or put "
        f"hadoop-aws-{version}.jar and the AWS SDK bundle jar in LAKEHOUSE_JARS_DIR with the Delta jars"
    )


def hadoop_version() -> str:
    """The Hadoop version bundled with pyspark (hadoop-aws must match it exactly)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    for jar in sorted(jars.glob("hadoop-client-api-*.jar")):
        return jar.stem.removeprefix("hadoop-client-api-")
    return "<Spark's Hadoop version>"


def details(exc: BaseException) -> str:
    """The full traceback (with the JVM stack trace of a py4j error) for the log file."""
    return "".join(traceback.format_exception(exc)).rstrip()


def _lake(lake_root: str | None) -> str:
    return f"lake_root {lake_root}" if lake_root else "the lake"


def _java_causes(throwable: Any, limit: int = 16) -> tuple[str, ...]:
    """First lines along a Java exception's cause chain (each step asks the JVM)."""
    from py4j.protocol import Py4JError

    causes: list[str] = []
    try:
        while throwable is not None and len(causes) < limit:
            causes.append(_short_class(_first_line(str(throwable.toString()))))
            throwable = throwable.getCause()
    except Py4JError:  # the JVM went away while we asked: keep what we have
        pass
    return tuple(c for c in causes if c)


def _first_line(text: str) -> str:
    """The first line, or for a Python traceback (a Spark task's error) its exception line."""
    text = text.split("JVM stacktrace:")[0]
    if "Traceback (most recent call last):" in text:
        lines = [line for line in text.splitlines() if line.strip()]
        ends = [line for line in lines if not line[0].isspace() and not line.startswith("Traceback")]
        if ends:
            return ends[-1].strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _short_class(line: str) -> str:
    """``java.io.FileNotFoundException: x`` -> ``FileNotFoundException: x``."""
    return _JAVA_CLASS.sub(r"\1", line, count=1)


def _call(errmsg: str) -> str:
    """``An error occurred while calling o65.save.`` -> ``save``."""
    found = _CALL.search(_first_line(errmsg))
    return found.group(1).rsplit(".", 1)[-1] if found else ""
