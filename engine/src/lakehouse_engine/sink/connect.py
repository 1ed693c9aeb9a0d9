"""A Spark Connect session (``spark.master: sc://host:port``), run in portable mode.

The server owns the JVM, the Delta jars and the executors: the client sets only session
settings, checks once that the server has Delta's SQL extension (without it the first Delta
statement fails deep in a run), and ships the engine to the server's Python workers.
"""

from __future__ import annotations

import socket
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ..errors import ConfigError
from . import shipping

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Session settings a client may set; the rest of spark.conf (memory, jars, master) is the server's.
_SESSION_PREFIXES = ("spark.sql.", "spark.databricks.delta.")
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"


def is_connect_url(master: str) -> bool:
    return master.startswith("sc://")


DEFAULT_PORT = 15002  # Spark Connect's


def address(url: str) -> tuple[str, int]:
    """Host and port of an ``sc://host[:port][/;params]`` URL."""
    authority = url.removeprefix("sc://").split("/", 1)[0].split(";", 1)[0]
    host, _, port = authority.rpartition(":") if authority.count(":") == 1 else (authority, "", "")
    return host or "localhost", int(port) if port.isdigit() else DEFAULT_PORT


def _unreachable(url: str, timeout_s: float = 10.0) -> str | None:
    """Why nothing answers at ``url``'s address, or None when something listens. The gRPC client
    retries an unreachable server for minutes before it gives up; this asks once."""
    try:
        with socket.create_connection(address(url), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


# Retries of a call the server does not answer: 50 ms growing fourfold, about 70 s in all. The
# client's default (15 retries, at least 10 minutes) suits an interactive session riding out a
# server restart; a scheduled run had better fail in a minute and run again from its last commit.
RETRIES = 6


def _retry_policy() -> Any:
    from pyspark.sql.connect.client.retries import DefaultPolicy

    return DefaultPolicy(max_retries=RETRIES)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _cannot_reach(url: str, why: str) -> ConfigError:
    return ConfigError(f"cannot reach the Spark Connect server at {url} ({why}): start it, or fix "
                       "spark.master in lakehouse_project.yml (SPARK_MASTER overrides it)")


def session_settings(conf: Mapping[str, str]) -> dict[str, str]:
    """Of ``conf`` (the engine's session settings under the project's spark.conf), what a Connect
    client may set on its session."""
    return {k: str(v) for k, v in conf.items() if k.startswith(_SESSION_PREFIXES)}


def connect_session(url: str, app_name: str, conf: Mapping[str, str]) -> SparkSession:
    """The session on the Spark Connect server at ``url``, with Delta checked and the engine
    shipped; one line naming the fix when the client packages, the server or Delta are missing."""
    try:
        import pyspark.sql.connect.session  # noqa: F401  (its gRPC packages are an extra)
    except ImportError as exc:
        raise ConfigError(f"spark.master {url} is a Spark Connect server, whose client needs packages this "
                          f"Python lacks ({exc}): pip install 'lakehouse-engine[connect]'") from None
    unreachable = _unreachable(url)
    if unreachable is not None:
        raise _cannot_reach(url, unreachable)
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    try:
        spark = SparkSession.builder.remote(url).appName(app_name).getOrCreate()
        extensions = spark.conf.get("spark.sql.extensions", "") or ""
    except PySparkException as exc:
        raise _cannot_reach(url, _first_line(exc)) from None
    for key, value in session_settings(conf).items():
        try:
            spark.conf.set(key, value)
        except PySparkException as exc:  # e.g. a static setting, which only the server's start sets
            raise ConfigError(f"the Spark Connect server at {url} refused the session setting {key} "
                              f"({_first_line(exc)}): remove it from spark.conf in lakehouse_project.yml "
                              "(the server's own settings are set where it starts)") from None
    if DELTA_EXTENSION not in extensions:
        raise ConfigError(
            f"the Spark Connect server at {url} runs without Delta Lake: start it with the Delta jars "
            f"(--packages io.delta:delta-spark_2.13:<version>) and --conf spark.sql.extensions={DELTA_EXTENSION} "
            "--conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog")
    cast(Any, spark).client.set_retry_policies([_retry_policy()])  # typed as the classic session
    shipping.ship_engine(spark)
    # The client warns on stderr when it gives up retrying; the failure reaches the user as one line.
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
    return spark
