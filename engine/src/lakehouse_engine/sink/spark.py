"""The Spark session with Delta Lake, configured once per process.

Delta jars come from Maven Central through Spark's Ivy resolver, once: the resolved jar list
is then saved in a manifest (``~/.cache/lakehouse-ingest/``) and later sessions load those
files directly, with no resolution, no network and no Ivy chatter. A local folder of jars
(``LAKEHOUSE_JARS_DIR`` or ``spark.jars_dir``) serves machines without network. A failure says
which source was tried and how to fix it.

The JVM's own output (its logging, JVM warnings, Ivy) goes to ``target/spark.log``, not among
the command's lines on the console; a Spark failure reaches the user through the CLI as one line.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..config.project import ProjectConfig
from ..errors import ConfigError
from ..failures import note_interrupt
from . import classdata, connect, localfs, logstore, portable, shipping

if TYPE_CHECKING:  # pyspark is imported when a session starts: commands without Spark stay fast
    from pyspark.sql import SparkSession

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
SPARK_LOG = "spark.log"
# Settings that the project's spark.conf extends rather than replaces, with their separators.
JOINED_SETTINGS = {"spark.jars": ",", "spark.jars.packages": ",", "spark.driver.extraJavaOptions": " ",
                   localfs.CLASS_PATH: os.pathsep}
# A local driver on a few cores runs short jobs: C2 compilation and parallel GC threads compete
# with the work for those cores and never pay back within a run. C1 only and the serial
# collector cut an ingest's CPU by ~40% and its memory by a third (make bench). A long-running
# process (follow) keeps C2: its first MERGE pays the compilation (23.7 s against 12.6 s for
# 38k changes into 2M rows), later ones ran 10-25% faster than under C1 (same quiet machine,
# 9.1-10.1 s against 10.6-12.6 s; 5.3 s against 6.3-10.3 s for 4.2k changes). The project's own
# spark.driver.extraJavaOptions come after these, so e.g. -XX:TieredStopAtLevel=4 wins.
LOCAL_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
# A long-running driver mostly waits. The JVM's performance-data sampler (what jps and jstat
# read) wakes every 50 ms: 20 of an idle follow JVM's 44 wakeups a second, and on a small VM a
# wakeup costs on the order of a millisecond of CPU. jcmd and jstack by pid still work. With
# Spark's context resting (``resting``) most of what is left are the monitor deflation thread's
# checks (every 250 ms) and the VM thread's look for a cleanup safepoint (every second): every
# 10 s is plenty for a process that idles (each check still deflates when monitors piled up).
LONG_RUNNING_JVM_OPTIONS = ("-XX:-UsePerfData -XX:+UnlockDiagnosticVMOptions -XX:AsyncDeflationInterval=10000 "
                            "-XX:GuaranteedSafepointInterval=10000")
# Session settings of every session, a Spark Connect one included (the project's spark.conf wins).
SESSION_SETTINGS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    # Delta rebuilds a table's state in this many tasks (default 50): most of a small commit's time.
    "spark.databricks.delta.snapshotPartitions": "2",
    # VACUUM lists the table's folders in this many tasks (Spark's default: 10,000, nearly all
    # empty for our unpartitioned tables): 85-98 s per VACUUM on 2 cores, 4-6 s with 8.
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "8",
}
PY4J_FINALIZER_SLEEP_S = 10  # a long-running process's py4j finalizer thread, when idle (once a second)
LOCAL_GC_OPTION = "-XX:+UseSerialGC"  # left out when the project picks a collector (two fail)
# The JVM starts with 1/64 of the machine's memory as its heap (384 MB on 24 GiB; on 64 GiB the
# whole 1 GiB a driver gets), a third of it the serial collector's young generation, all touched
# before its first collection. Started at 64 MB and grown as the run needs, the JVM of a 2M-row
# snapshot peaked at 355 MB instead of 423 MB and that of a 250k-change catch-up at 334-339 MB
# instead of 415 MB, in the same wall time (make bench's project, 2-core VM, two runs each).
LOCAL_INITIAL_HEAP = "-Xms64m"  # left out when the project sets its own

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JarSettings:
    source: str  # where the Delta jars come from, for messages
    conf: Mapping[str, str]
    cacheable: bool  # resolved from Maven Central with nothing else: save the jar list


def delta_artifact() -> str:
    """The Maven coordinate matching the installed pyspark and delta-spark."""
    import pyspark

    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{spark_minor}_2.13:{metadata.version('delta-spark')}"


def get_spark(config: ProjectConfig, app_name: str = "lakehouse-ingest", *,
              long_running: bool = False, save_class_data: bool = False) -> SparkSession:
    """Start (or return) the session. Local masters bind to loopback only. ``long_running``:
    the process runs for hours (follow), so the JVM keeps its optimising compiler. An ``sc://``
    master is a Spark Connect server (:mod:`.connect`), which portable mode writes through.
    A local driver maps the JVM's class-data archive (:mod:`.classdata`) where one is saved;
    ``save_class_data``: where none is, the JVM writes one as it exits (:func:`finish_class_data`)."""
    portable.force(config.spark.portable)
    if connect.is_connect_url(config.spark.master):
        return connect.connect_session(config.spark.master, app_name, {**SESSION_SETTINGS, **config.spark.conf})
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        raise ConfigError("Java 17 is needed by Spark and was not found: install openjdk-17-jre-headless")
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    submitted = under_spark_submit()
    master = _submitted_master(config) if submitted else config.spark.master
    local = shipping.is_local_master(master)
    if not (submitted and "PYSPARK_PYTHON" in os.environ):  # spark-submit set it from its --conf
        python = shipping.executor_python(config.spark.conf, master, _USERS_PYSPARK_PYTHON)
        if python is not None:  # pyspark hands the executors PYSPARK_PYTHON, read at the context's start
            os.environ["PYSPARK_PYTHON"] = python
        else:
            os.environ.pop("PYSPARK_PYTHON", None)

    builder = SparkSession.builder.appName(app_name)
    if not submitted:  # spark-submit's --master (or its default) stands
        builder = builder.master(config.spark.master)
    builder = (
        builder
        .config("spark.sql.extensions", DELTA_EXTENSION)
        .config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for key, value in SESSION_SETTINGS.items():
        builder = builder.config(key, value)
    if local:  # workers beside the driver share its venv; a cluster gets the engine shipped
        builder = builder.config("spark.executorEnv.PYTHONPATH", _local_python_path(config))
    java_options = f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}"
    if master.startswith("local") and not submitted:
        java_options = f"{local_jvm_options(config.spark.conf, long_running)} {java_options}"
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config(
            "spark.driver.host", "127.0.0.1"
        )
    jars = _jar_settings(config)
    ours = {**jars.conf, "spark.driver.extraJavaOptions": java_options}
    ours = _merged_conf(ours, logstore.settings(config.spark.conf, local_master=local, lake_root=config.lake_root))
    local_driver = master.startswith("local") and not submitted
    ours = _merged_conf(ours, localfs.settings(config.spark.conf, local_driver=local_driver))
    conf = _merged_conf(ours, config.spark.conf)
    class_data = classdata.plan(conf, config.spark.conf, save=save_class_data) if local_driver else classdata.NONE
    spark_log = config.target_dir / SPARK_LOG
    try:
        spark = _launch(builder, conf, spark_log, class_data,
                        lambda: classdata.plan(conf, config.spark.conf, save=save_class_data, use=False))
    except PySparkRuntimeError as exc:
        raise ConfigError(
            f"Spark did not start ({exc.getErrorClass() or exc}); Delta jars were taken from "
            f"{jars.source}: if {spark_log} says 'unresolved dependency', Maven Central "
            "could not be reached: fix the network/proxy or set LAKEHOUSE_JARS_DIR to a folder "
            "holding the Delta jars"
        ) from exc
    spark.sparkContext.setLogLevel("ERROR")
    if long_running:
        _calm_py4j_finalizer()
    if submitted:
        _check_submitted_jars(spark)
    _interrupt_promptly()
    if not local:
        shipping.ship_engine(spark)
    if jars.cacheable:
        _save_manifest(session_jars(spark))
    return spark


# What this process's local driver does with the JVM's class-data archive (one session a process).
_class_data = classdata.NONE


def _launch(builder: SparkSession.Builder, conf: Mapping[str, str], spark_log: Path,
            class_data: classdata.ClassData, without_archive: Callable[[], classdata.ClassData]) -> SparkSession:
    """Start the session with ``conf`` and ``class_data``'s option. A JVM that does not start
    with its archive has the archive removed and is started once more as ``without_archive``
    plans (which may save a new one)."""
    global _class_data
    _class_data = class_data
    options = " ".join(o for o in (conf.get("spark.driver.extraJavaOptions", ""), class_data.option) if o)
    for key, value in {**conf, "spark.driver.extraJavaOptions": options}.items():
        builder = builder.config(key, value)
    from pyspark.errors import PySparkRuntimeError

    try:
        with _jvm_output_to(spark_log):
            return builder.getOrCreate()
    except PySparkRuntimeError:
        if class_data.used is None:
            raise
        log.warning("Spark did not start with the JVM's class-data archive %s (see %s): removed it, starting "
                    "without it; `lakehouse spark-check` saves a new one", class_data.used, spark_log)
        classdata.discard(class_data.used)
        return _launch(builder, conf, spark_log, without_archive(), lambda: classdata.NONE)


def saving_class_data() -> bool:
    """Whether this process's driver writes a class-data archive as its JVM exits."""
    return _class_data.saving is not None


def finish_class_data(spark: SparkSession, config: ProjectConfig) -> tuple[str, Path] | None:
    """After a session started with ``save_class_data``: stop it and let its JVM exit, which
    writes the class-data archive, then put it in place. ``("saved", path)``, ``("in use",
    path)`` when the JVM maps one already, None when there is none (not a local driver, a JVM
    that wrote none)."""
    process = getattr(spark.sparkContext._gateway, "proc", None)
    if _class_data.used is not None:
        mapped = classdata.mapped_by(process.pid, _class_data.used) if process is not None else None
        return ("in use", _class_data.used) if mapped is not False else None
    if _class_data.saving is None or process is None:
        return None
    jars = classdata.with_class_path(session_jars(spark), dict(spark.sparkContext.getConf().getAll()))
    spark.stop()
    saved = classdata.finish(process, jars, config.spark.conf, _class_data.saving)
    return ("saved", saved) if saved is not None else None


# The user's own PYSPARK_PYTHON, before a session of this process set one for its executors.
_USERS_PYSPARK_PYTHON = os.environ.get("PYSPARK_PYTHON")


def _submitted_master(config: ProjectConfig) -> str:
    """The master spark-submit runs this driver on (its --master, or its default)."""
    from pyspark import SparkConf

    return SparkConf().get("spark.master", config.spark.master) or config.spark.master


def under_spark_submit() -> bool:
    """Whether spark-submit started this driver: its JVM is already running (pyspark then reaches
    it through the gateway port spark-submit hands over), so the jars and JVM options of the
    session's settings come too late for the driver, and spark-submit's options stand."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _check_submitted_jars(spark: SparkSession) -> None:
    """Delta's classes (and the engine's log store, where the line names it) must be on the
    driver's class path spark-submit built: without them the session starts without them and
    the first Delta call fails as a JVM stack trace."""
    if not _loadable(spark, DELTA_CATALOG):
        raise ConfigError(
            f"spark-submit started Spark without the Delta jars: add --packages {delta_artifact()} "
            "(or --jars with those jars) to the spark-submit line; lakehouse submit-line prints it")
    named = spark.sparkContext.getConf().get(logstore.LOCAL_STORE_SETTING) == logstore.STORE_CLASS
    if named and not _loadable(spark, logstore.STORE_CLASS):
        raise ConfigError(
            f"spark-submit started Spark without the engine's log store jar: add {logstore.JAR} to --jars "
            f"(or leave out --conf {logstore.LOCAL_STORE_SETTING}); lakehouse submit-line prints it")


def _loadable(spark: SparkSession, class_name: str) -> bool:
    """Whether the driver's JVM finds ``class_name`` as Spark loads classes."""
    from py4j.protocol import Py4JJavaError

    try:
        jvm_view(spark).org.apache.spark.util.Utils.classForName(class_name, True, False)
    except Py4JJavaError:
        return False
    return True


def submit_line(config: ProjectConfig, command: Sequence[str]) -> list[str]:
    """The spark-submit command line that runs ``lakehouse <command>`` for this project."""
    theirs = config.spark.conf
    jars = [_jar_settings(config).conf["spark.jars"]] if config.spark.jars_dir else []
    packages = [] if config.spark.jars_dir else [delta_artifact()]
    listing = logstore.settings(theirs, local_master=shipping.is_local_master(config.spark.master),
                                lake_root=config.lake_root)
    jars += [listing["spark.jars"]] if "spark.jars" in listing else []
    jars += [theirs["spark.jars"]] if theirs.get("spark.jars") else []
    packages += [theirs["spark.jars.packages"]] if theirs.get("spark.jars.packages") else []
    line = ["spark-submit", "--master", config.spark.master]
    line += ["--jars", ",".join(jars)] if jars else []
    line += ["--packages", ",".join(packages)] if packages else []
    # The driver runs in this Python (it has the engine and the project's requirements); local
    # executors too, while a cluster's are the project's spark.pyspark.python or Spark's default.
    pythons = {"spark.pyspark.driver.python": sys.executable}
    if shipping.is_local_master(config.spark.master):
        pythons["spark.pyspark.python"] = sys.executable
    conf = {"spark.sql.extensions": DELTA_EXTENSION, "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
            "spark.sql.session.timeZone": "UTC", **pythons,
            **{k: v for k, v in listing.items() if k != "spark.jars"},
            **{k: v for k, v in theirs.items() if k not in ("spark.jars", "spark.jars.packages")}}
    for key, value in conf.items():
        line += ["--conf", f"{key}={value}"]
    line.append(str(Path(__file__).resolve().parent.parent / "submit.py"))  # the application (no import:
    # it imports the command line, which nothing below it may)
    if "--project-dir" not in command:
        line += ["--project-dir", str(config.root.resolve())]
    return [*line, *command]


def _local_python_path(config: ProjectConfig) -> str:
    """The workers' path on a local master: the project first (a vendored engine), then ours."""
    root = str(config.root.resolve())
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])
    return os.environ["PYTHONPATH"]


@contextmanager
def _jvm_output_to(path: Path) -> Iterator[None]:
    """Point file descriptors 1 and 2 at ``path`` while the JVM is launched.

    The JVM (and the Python workers it forks) inherit them for their whole life, so JVM
    warnings, log4j's console appender and Ivy's resolution report land in the file instead of
    between the command's own lines. Python's own streams are restored right after the launch.
    An unwritable target leaves the console as it is.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        log.warning("JVM output stays on the console: cannot open %s (%s)", path, exc.strerror)
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


def jvm_view(spark: SparkSession) -> Any:
    """The session's py4j view of the JVM (``jvm_view(spark).org.apache...``). pyspark types it
    as optional, unset before a context starts; a started session always has it."""
    view = spark._jvm
    if view is None:
        raise RuntimeError("the Spark session has no JVM gateway")
    return view


def _interrupt_promptly() -> None:
    """Make Ctrl-C stop the run at once, leaving the py4j connection usable for clean-up.

    pyspark's own SIGINT handler cancels the jobs through the main thread's py4j connection,
    which is busy waiting for the running call: the cancel queued behind the call (Ctrl-C
    waited for the whole Spark job), and the next call read the previous call's answer. Here
    the busy connection is dropped (py4j opens a fresh one for the next call, so ``finally``
    blocks work), the jobs are cancelled from a thread of their own and ``KeyboardInterrupt`` is
    raised at once. Nothing committed is lost: each Delta commit is atomic with its checkpoint.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    from pyspark import SparkContext

    def cancel_jobs(context: SparkContext) -> None:
        from py4j.protocol import Py4JError

        try:
            context.cancelAllJobs()
        except Py4JError as exc:  # the JVM is already going away: nothing left to cancel
            log.debug("cancelling Spark jobs after Ctrl-C: %s", exc)

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        note_interrupt()
        # The context running now: a resting session (``resting``) starts a new one and keeps
        # this handler, and while it rests there is none.
        context = SparkContext._active_spark_context
        if context is not None:
            client: Any = getattr(context._gateway, "_gateway_client", None)  # py4j's, untyped
            connection = client.get_thread_connection() if hasattr(client, "get_thread_connection") else None
            if connection is not None:
                connection.close(reset=True)
            threading.Thread(target=cancel_jobs, args=(context,), name="cancel-spark-jobs", daemon=True).start()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)


def _calm_py4j_finalizer() -> None:
    """py4j's finalizer thread (pyspark's client) looks for Java objects to release once a
    second, also when there are none: in an idle follow whose Spark rests, the process's most
    frequent wakeup. It sleeps only when it has nothing to release, so a longer sleep only
    delays the release of a burst's objects in the JVM by up to that long."""
    import py4j.clientserver

    if hasattr(py4j.clientserver, "DEFAULT_WORKER_SLEEP_TIME"):  # read by the thread before each sleep
        py4j.clientserver.DEFAULT_WORKER_SLEEP_TIME = PY4J_FINALIZER_SLEEP_S


def jar_manifest() -> Path:
    """The file listing the Delta jars resolved once, so later starts need no Maven Central."""
    return shipping.cache_folder() / f"{delta_artifact().replace(':', '_')}.jars"


def cached_jars() -> list[str] | None:
    """The cached Delta jars, or ``None`` when not cached yet (or a listed jar is gone)."""
    try:
        jars = [line for line in jar_manifest().read_text().splitlines() if line]
    except OSError:
        return None
    return jars if jars and all(Path(j.removeprefix("file://")).exists() for j in jars) else None


def session_jars(spark: SparkSession) -> str:
    """The jars the session's driver loaded, comma-separated. Ivy's resolved packages are not
    always in ``spark.jars``: with jars of its own there too (the engine's log store) spark-submit
    leaves them out of it and lists them in ``spark.repl.local.jars``, with the others."""
    conf = spark.sparkContext.getConf()
    listed = [j for key in ("spark.jars", "spark.repl.local.jars") for j in (conf.get(key) or "").split(",") if j]
    return ",".join(dict.fromkeys(listed))


def _save_manifest(jars: str) -> None:
    files = [j for j in jars.split(",") if j.startswith("file:") and not logstore.is_our_jar(j)]
    if not files:
        return
    manifest = jar_manifest()
    manifest.parent.mkdir(parents=True, exist_ok=True)
    tmp = manifest.with_suffix(".tmp")
    tmp.write_text("\n".join(files) + "\n")
    tmp.replace(manifest)


def _jar_settings(config: ProjectConfig) -> JarSettings:
    """Where the Delta jars come from: a local folder, the cached list, or Maven Central.

    Packages the project adds itself (``spark.jars.packages``, e.g. hadoop-aws) bypass the
    cache, which holds the Delta jars only: Ivy resolves them with Delta, from its local cache
    after the first time.
    """
    if config.spark.jars_dir:
        folder = Path(config.spark.jars_dir)
        jars = sorted(str(p) for p in folder.glob("*.jar"))
        if not jars:
            raise ConfigError(f"jars folder {folder} holds no .jar files: fill it or unset LAKEHOUSE_JARS_DIR")
        return JarSettings(str(folder), {"spark.jars": ",".join(jars)}, cacheable=False)
    extra_packages = bool(config.spark.conf.get("spark.jars.packages"))
    cached = None if extra_packages else cached_jars()
    if cached:
        return JarSettings(f"the jar cache {jar_manifest()}", {"spark.jars": ",".join(cached)}, cacheable=False)
    return JarSettings(f"Maven Central ({delta_artifact()})", {"spark.jars.packages": delta_artifact()},
                       cacheable=not extra_packages)


def local_jvm_options(project_conf: Mapping[str, str], long_running: bool = False) -> str:
    """Our JVM options for a local driver: C1 only unless ``long_running`` (then no performance
    data sampling instead), the serial collector unless the project's own options choose
    one (the JVM refuses to start with two), and a small initial heap unless they set one."""
    theirs = project_conf.get("spark.driver.extraJavaOptions", "")
    options = [LONG_RUNNING_JVM_OPTIONS] if long_running else [LOCAL_JVM_OPTIONS]
    if not re.search(r"-XX:\+Use\w+GC\b", theirs):
        options.append(LOCAL_GC_OPTION)
    if not re.search(r"-Xms\d|InitialHeapSize", theirs):
        options.append(LOCAL_INITIAL_HEAP)
    return " ".join(options)


def _merged_conf(ours: Mapping[str, str], project: Mapping[str, str]) -> dict[str, str]:
    """The project's spark.conf over ours, except jar lists and JVM options, which are joined: a
    project that adds hadoop-aws to spark.jars.packages must not drop the Delta jars, nor one
    that adds a JVM option drop our log configuration."""
    merged = dict(ours)
    for key, value in project.items():
        if key in JOINED_SETTINGS and merged.get(key):
            merged[key] = JOINED_SETTINGS[key].join(p for p in (merged[key], value) if p)
        else:
            merged[key] = value
    return merged
