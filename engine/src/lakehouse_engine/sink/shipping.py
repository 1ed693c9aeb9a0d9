"""The engine's code and Python for Spark executors that run on other hosts.

Spark tasks run engine code (the snapshot's chunk reads, :mod:`..snapshot.chunktask`). On the
default local master they run in Python workers beside the driver, which share its virtualenv:
the driver's interpreter and its ``PYTHONPATH`` are handed to them. On a cluster master
(``spark://``, ``yarn``, ``k8s://``) an executor sees neither the driver's disk nor its venv, so:

* the engine ships itself: its package is zipped once per version and content
  (``~/.cache/lakehouse-ingest/``) and added to the session (``addPyFile``), so an executor's
  Python needs only the engine's third-party requirements;
* the executors' Python is ``spark.pyspark.python`` from the project's ``spark.conf`` (Spark's
  own precedence: it wins over ``PYSPARK_PYTHON``), else ``PYSPARK_PYTHON``, else on a cluster
  Spark's default (``python3`` on the workers), never the driver's venv path; it needs the
  engine's requirements (``pip install lakehouse-engine`` installs them);
* a task whose Python cannot import what it needs fails the run with one line naming the module
  and the fix (:func:`missing_module_error`), not as a retriable read error.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from . import portable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PYTHON_SETTING = "spark.pyspark.python"
_MISSING = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
_NO_PYTHON = re.compile(r'Cannot run program "([^"]+)"[^\n]*error=(?:2|13),')  # missing, not executable


def is_local_master(master: str) -> bool:
    """Whether executors run in the driver's process on its host (``local``, ``local[4]``...);
    ``local-cluster[...]`` starts executors of their own, as a cluster does."""
    return master == "local" or master.startswith("local[")


def executor_python(conf: Mapping[str, str], master: str, environment: str | None) -> str | None:
    """The Python the executors' workers run (None: Spark's default, ``python3`` on the workers);
    ``environment``: the user's ``PYSPARK_PYTHON``."""
    chosen = conf.get(PYTHON_SETTING) or environment
    if chosen:
        return chosen
    return sys.executable if is_local_master(master) else None


def engine_archive(cache: Path | None = None) -> Path:
    """A zip of the engine package as the driver imports it, made once per version and content."""
    from .. import __version__

    package = Path(__file__).resolve().parent.parent
    sources = sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for path in sources:
        stat = path.stat()
        digest.update(f"{path.relative_to(package)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    name = f"lakehouse_engine-{__version__}-{digest.hexdigest()[:12]}.zip"
    folders = [cache] if cache else [cache_folder(), Path(tempfile.gettempdir()) / "lakehouse-ingest"]
    for folder in folders:
        archive = folder / name
        if archive.exists():
            return archive
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle, partial = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
            with os.fdopen(handle, "wb") as file, zipfile.ZipFile(file, "w", zipfile.ZIP_DEFLATED) as zipped:
                for path in sources:
                    zipped.write(path, Path("lakehouse_engine") / path.relative_to(package))
            os.chmod(partial, 0o644)
            os.replace(partial, archive)  # another run making the same archive wrote the same bytes
            return archive
        except OSError:  # a cache folder this user cannot write: the next one
            continue
    raise ConfigError(f"the engine's archive for the executors could not be written to {folders[-1]}: "
                      "set XDG_CACHE_HOME to a writable folder")


def cache_folder() -> Path:
    """The engine's folder in the user's cache (``XDG_CACHE_HOME`` or ``~/.cache``): the jar list,
    the JVM's class-data archives, the engine's archive for executors."""
    home = os.environ.get("XDG_CACHE_HOME")
    try:
        return (Path(home) if home else Path.home() / ".cache") / "lakehouse-ingest"
    except RuntimeError:  # no home directory to be found
        return Path(tempfile.gettempdir()) / "lakehouse-ingest"


def ship_engine(spark: SparkSession) -> Path:
    """Add the engine's archive to the session: every executor imports the driver's engine."""
    archive = engine_archive()
    portable.ship(spark, str(archive))
    return archive


def missing_module_error(text: str, table: str, python: str | None) -> ConfigError | None:
    """The one-line error for a task whose Python lacks a module or does not start; None when
    ``text`` (a failed Spark job's) says neither."""
    where = f"the Python the Spark executors run ({python or 'python3, Spark default'})"
    fix = (f"install the engine's requirements there (pip install lakehouse-engine), or point "
           f"{PYTHON_SETTING} in lakehouse_project.yml's spark.conf at a Python that has them")
    found = _MISSING.findall(text)
    if found:
        return ConfigError(f"reading a snapshot chunk of {table}: ModuleNotFoundError: No module named "
                           f"'{found[-1]}' on the executors, in {where}: {fix}")
    started = _NO_PYTHON.findall(text)
    if started:
        return ConfigError(f"reading a snapshot chunk of {table}: the Spark executors cannot run "
                           f"{started[-1]!r}: set {PYTHON_SETTING} in lakehouse_project.yml's spark.conf "
                           "to the Python installed on the workers")
    return None
