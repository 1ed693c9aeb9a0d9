"""The Spark session with Delta Lake, configured once per process.

Delta jars come from Maven Central through Spark's Ivy resolver, once: the resolved jar list
is then saved in a manifest (``~/.cache/lakehouse-ingest/``) and later sessions load those
files directly, with no resolution, no network and no Ivy chatter. A local folder of jars
(``LAKEHOUSE_JARS_DIR`` or ``spark.jars_dir``) serves machines without network. A failure says
which source was tried and how to fix it.
"""

from __future__ import annotations

import os
import shutil
import sys
from importlib import metadata
from pathlib import Path

from .config import ProjectConfig
from .errors import ConfigError

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def delta_artifact() -> str:
    """The Maven coordinate matching the installed pyspark and delta-spark."""
    import pyspark

    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{spark_minor}_2.13:{metadata.version('delta-spark')}"


def get_spark(config: ProjectConfig, app_name: str = "lakehouse-ingest"):  # -> SparkSession
    """Start (or return) the session. Local masters bind to loopback only."""
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        raise ConfigError("Java 17 is needed by Spark and was not found: install openjdk-17-jre-headless")
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Spark's Python workers must import this package; put the project on their path.
    root = str(config.root.resolve())
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])

    builder = (
        SparkSession.builder.appName(app_name)
        .master(config.spark.master)
        .config("spark.sql.extensions", DELTA_EXTENSION)
        .config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}")
    )
    if config.spark.master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config(
            "spark.driver.host", "127.0.0.1"
        )
    jars_source = _configure_jars(builder, config)
    for key, value in config.spark.conf.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except PySparkRuntimeError as exc:
        raise ConfigError(
            f"Spark did not start ({exc.getErrorClass() or exc}); Delta jars were taken from "
            f"{jars_source}: if the lines above say 'unresolved dependency', Maven Central "
            "could not be reached: fix the network/proxy or set LAKEHOUSE_JARS_DIR to a folder "
            "holding the Delta jars"
        ) from None
    spark.sparkContext.setLogLevel("ERROR")
    if jars_source.startswith("Maven Central"):
        _save_manifest(spark.sparkContext.getConf().get("spark.jars", ""))
    return spark


def _manifest() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "lakehouse-ingest" / f"{delta_artifact().replace(':', '_')}.jars"


def _cached_jars() -> list[str] | None:
    try:
        jars = [line for line in _manifest().read_text().splitlines() if line]
    except OSError:
        return None
    return jars if jars and all(Path(j.removeprefix("file://")).exists() for j in jars) else None


def _save_manifest(jars: str) -> None:
    files = [j for j in jars.split(",") if j.startswith("file:")]
    if not files:
        return
    manifest = _manifest()
    manifest.parent.mkdir(parents=True, exist_ok=True)
    tmp = manifest.with_suffix(".tmp")
    tmp.write_text("\n".join(files) + "\n")
    tmp.replace(manifest)


def _configure_jars(builder, config: ProjectConfig) -> str:
    if config.spark.jars_dir:
        folder = Path(config.spark.jars_dir)
        jars = sorted(str(p) for p in folder.glob("*.jar"))
        if not jars:
            raise ConfigError(f"jars folder {folder} holds no .jar files: fill it or unset LAKEHOUSE_JARS_DIR")
        builder.config("spark.jars", ",".join(jars))
        return str(folder)
    cached = _cached_jars()
    if cached:
        builder.config("spark.jars", ",".join(cached))
        return f"the jar cache {_manifest()}"
    builder.config("spark.jars.packages", delta_artifact())
    return f"Maven Central ({delta_artifact()})"
