"""The local driver JVM's class-data archive (AppCDS): Spark starts some 3 s sooner.

A Spark driver with Delta loads and verifies some 20,000 classes from jar files every time it
starts, on a 2-core machine about 3 s of a command's fixed cost. A JVM (13 and later) can save the
classes a run loaded in an archive (``-XX:ArchiveClassesAtExit``) that later JVMs map instead
(``-XX:SharedArchiveFile``). Measured on make bench's project (2-core VM): ``lakehouse
spark-check`` 6.7 s against 3.7 s, a 2M-row snapshot 14.6 s against 11.3 s.

``lakehouse spark-check`` (``make setup``) saves the archive once, after a small Delta round trip
so that the classes of a write and a MERGE are in it; every later session of a local master uses
it. An archive belongs to one JVM and one class path: its name holds a digest of the JVM's files,
pyspark's jars, the session's jars and the project's JVM settings (:func:`archive_key`), so a
change of any of them looks for another archive (the JVM also checks the class path itself and
runs without an archive it cannot use, saying so in ``spark.log``).

An archive must be whole: the JVM maps it and dies of SIGBUS on a truncated one. It is written
under a name of its own, renamed into place only after its JVM exited cleanly, and its name
carries its size, checked before each use. A JVM that still fails to start with an archive has
it removed and starts again without it (``spark.get_spark``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from .shipping import cache_folder

log = logging.getLogger(__name__)

SUFFIX = ".jsa"
KEPT_ARCHIVES = 3  # the newest archives kept (about 190 MB each); older ones are removed on saving
SAVE_TIMEOUT_S = 180.0  # the JVM writes the archive as it exits: some 9 s on a 2-core machine
# The project's settings that shape the driver's JVM or its class path (its heap size decides
# whether the JVM compresses pointers, which an archive depends on).
# The driver's class path beyond Spark's jars: Spark puts the default one (the engine's) first.
CLASS_PATH_SETTINGS = ("spark.driver.defaultExtraClassPath", "spark.driver.extraClassPath")
JVM_SETTINGS = ("spark.driver.extraJavaOptions", "spark.driver.memory", *CLASS_PATH_SETTINGS)
# The archive's own warnings while it is written ("Skipping ...: Signed JAR", one per class it
# leaves out) would fill spark.log; failures to write it are logged under cds+dynamic.
SAVING_LOG = "-Xlog:cds=off"


@dataclass(frozen=True)
class ClassData:
    """What a session does with the archive: its JVM option, and where a saved one goes."""

    option: str  # the JVM option(s) to add; "" for none
    used: Path | None = None  # the archive the JVM maps
    saving: Path | None = None  # where the JVM writes an archive as it exits


NONE = ClassData("")


def archive_dir() -> Path:
    return cache_folder() / "classdata"


def java_home() -> Path | None:
    """The JDK that spark-submit runs: ``JAVA_HOME``'s, else the one of ``java`` on the PATH."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    java = shutil.which("java")
    return Path(os.path.realpath(java)).parent.parent if java else None


def _file_stamp(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return f"{path}:missing"
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


def _jar_path(entry: str) -> Path:
    """A ``spark.jars`` entry as a real path (``file:///x``, ``file:/x`` and ``/x`` alike)."""
    path = entry.removeprefix("file:")
    if path.startswith("//"):
        path = path[2:]
    return Path(os.path.realpath(path))


def archive_key(jars: str, project_conf: Mapping[str, str], home: Path | None) -> str:
    """A digest of everything an archive belongs to: the JVM's files, pyspark's jars, the
    session's jars (``spark.jars``, in any order and spelling, each once), the project's JVM settings and
    the engine's version."""
    import pyspark

    jars_folder = Path(pyspark.__file__).parent / "jars"
    parts = [
        _file_stamp(home / "lib" / "server" / "libjvm.so") if home else "no-java",
        _file_stamp(home / "lib" / "modules") if home else "",
        f"pyspark {pyspark.__version__}", _file_stamp(jars_folder),
        *sorted({_file_stamp(_jar_path(j)) for j in jars.split(",") if j.strip()}),
        *(f"{k}={project_conf.get(k, '')}" for k in JVM_SETTINGS),
        f"engine {metadata.version('lakehouse-engine')}",
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def with_class_path(jars: str, conf: Mapping[str, str]) -> str:
    """``jars`` (``spark.jars``) and the jars of the driver's class path in ``conf``
    (``CLASS_PATH_SETTINGS``): the jars an archive's classes come from."""
    class_path = [j for key in CLASS_PATH_SETTINGS for j in (conf.get(key) or "").split(os.pathsep)]
    return ",".join(j for j in (*jars.split(","), *class_path) if j.strip())


def find_archive(key: str) -> Path | None:
    """The whole archive saved for ``key``: its name's size matches the file's."""
    for path in sorted(archive_dir().glob(f"{key}-*{SUFFIX}")):
        size = path.name.removesuffix(SUFFIX).rsplit("-", 1)[-1]
        try:
            if size.isdigit() and path.stat().st_size == int(size):
                return path
        except OSError:
            continue
    return None


def plan(conf: Mapping[str, str], project_conf: Mapping[str, str], *, save: bool, use: bool = True) -> ClassData:
    """The archive for a local driver started with ``conf`` (the session's merged settings):
    the saved one if there is one (and ``use``), else (``save``) a new one written as the JVM exits.
    Jars Ivy has yet to resolve (``spark.jars.packages``) are unknown: no archive is looked
    for then, and a saved one is named once the session knows them (:func:`finish`)."""
    theirs = project_conf.get("spark.driver.extraJavaOptions", "")
    if "SharedArchiveFile" in theirs or "ArchiveClassesAtExit" in theirs or "-Xshare:off" in theirs:
        return NONE  # the project manages class sharing itself
    if use and not conf.get("spark.jars.packages"):
        jars = with_class_path(conf.get("spark.jars", ""), conf)
        found = find_archive(archive_key(jars, project_conf, java_home()))
        if found is not None:
            return ClassData(f"-XX:SharedArchiveFile={found}", used=found)
    if not save:
        return NONE
    saving = archive_dir() / f"saving-{os.getpid()}{SUFFIX}"
    try:
        saving.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("no class-data archive is saved: cannot create %s (%s)", saving.parent, exc.strerror)
        return NONE
    return ClassData(f"-XX:ArchiveClassesAtExit={saving} {SAVING_LOG}", saving=saving)


def discard(path: Path) -> None:
    """Remove an archive the JVM could not start with."""
    try:
        path.unlink()
    except OSError as exc:
        log.debug("could not remove class-data archive %s: %s", path, exc)


def finish(gateway_process: subprocess.Popen[bytes], jars: str, project_conf: Mapping[str, str],
           saving: Path) -> Path | None:
    """Let the driver's JVM exit (its context stopped), which writes the archive, and put the
    archive in place under its key and size; None when the JVM wrote none (a JDK without a
    base archive, a JVM that did not exit cleanly)."""
    if gateway_process.stdin is not None:
        gateway_process.stdin.close()  # the JVM exits when its parent's pipe closes
    try:
        code = gateway_process.wait(timeout=SAVE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        gateway_process.kill()
        gateway_process.wait()
        code = -1
    try:
        size = saving.stat().st_size if code == 0 and saving.exists() else 0
        if size == 0:
            log.warning("the JVM wrote no class-data archive (exit %s; see spark.log): Spark starts without one",
                        code)
            return None
        final = archive_dir() / f"{archive_key(jars, project_conf, java_home())}-{size}{SUFFIX}"
        os.replace(saving, final)
    finally:
        saving.unlink(missing_ok=True)
    _prune(keep=final)
    return final


def _prune(keep: Path) -> None:
    """Remove all but the newest archives, and what killed runs left half written."""
    archives = sorted(archive_dir().glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
    saved = [p for p in archives if not p.name.startswith("saving-")]
    stale = [p for p in archives if p.name.startswith("saving-") and not _alive(p)]
    for path in [*(p for p in saved[KEPT_ARCHIVES:] if p != keep), *stale]:
        discard(path)


def _alive(saving: Path) -> bool:
    """Whether the process that names ``saving-<pid>.jsa`` still runs (may still write it)."""
    pid = saving.name.removeprefix("saving-").removesuffix(SUFFIX)
    return pid.isdigit() and Path(f"/proc/{pid}").exists()


def mapped_by(pid: int, archive: Path) -> bool | None:
    """Whether process ``pid`` maps ``archive`` (None where /proc cannot tell)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None
    return str(archive) in maps
