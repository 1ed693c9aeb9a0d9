"""``debug``: is this machine ready to ingest? One line per check, like ``dbt debug``.

Checks the configuration and table modules, Java and the cached Delta jars (without starting
Spark), then the source: login, binlog settings and grants (the preflight's own rules) and the
binlog position. A failed check says what to fix; nothing is written anywhere.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import pymysql

from ..config.project import ProjectConfig
from ..errors import IngestError


class Outcome(StrEnum):
    OK = "ok"
    WARN = "warn"  # works, but something is worth knowing (e.g. jars not cached yet)
    FAIL = "FAIL"  # upper case: the word to spot in a column of checks
JAVA_MAJOR = 17


@dataclass(frozen=True)
class Check:
    name: str
    outcome: Outcome
    detail: str

    def line(self) -> str:
        return f"{self.name:<16} {self.outcome.value:<4}  {self.detail}"


def run_checks(config: ProjectConfig, tables: Callable[[], int]) -> Iterator[Check]:
    """Every check in order; ``tables`` imports the table modules and returns their number."""
    yield Check("python", Outcome.OK, sys.version.split()[0])
    yield Check("project", Outcome.OK, f"{config.root} (target {config.target}, lake {config.lake_root})")
    try:
        yield Check("table modules", Outcome.OK, f"{tables()} table(s)")
    except IngestError as exc:
        yield Check("table modules", Outcome.FAIL, str(exc))
    yield java_check()
    yield jars_check(config)
    yield from source_checks(config)


def java_check() -> Check:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        return Check("java", Outcome.FAIL, f"no java found: install Java {JAVA_MAJOR} "
                                           f"(openjdk-{JAVA_MAJOR}-jre-headless) or set JAVA_HOME")
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("java", Outcome.FAIL, f"{java} -version did not answer: {exc}")
    first = (done.stderr or done.stdout).strip().splitlines()[:1]
    version = first[0] if first else "unknown version"
    match = re.search(r'version "(\d+)', version)
    if match and int(match.group(1)) < JAVA_MAJOR:
        return Check("java", Outcome.FAIL, f"{version}: Spark 4 needs Java {JAVA_MAJOR} or newer")
    return Check("java", Outcome.OK, f"{version} ({java})")


def jars_check(config: ProjectConfig) -> Check:
    # spark.py imports pyspark, which starts no JVM: cheap enough for a check.
    from ..sink import spark

    if config.spark.jars_dir:
        jars = sorted(Path(config.spark.jars_dir).glob("*.jar"))
        if not jars:
            return Check("delta jars", Outcome.FAIL, f"jars folder {config.spark.jars_dir} holds no .jar files")
        return Check("delta jars", Outcome.OK, f"{len(jars)} jar(s) in {config.spark.jars_dir}")
    cached = spark.cached_jars()
    if cached:
        return Check("delta jars", Outcome.OK, f"{len(cached)} jar(s) cached ({spark.jar_manifest()})")
    return Check("delta jars", Outcome.WARN, f"not cached yet: the first Spark start resolves {spark.delta_artifact()} "
                                       "from Maven Central (`make setup` does it once)")


def source_checks(config: ProjectConfig) -> Iterator[Check]:
    from ..source.connection import connection, current_position, query
    from ..source.preflight import REQUIRED, grant_problems, server_variables, settings_problems, user_grants

    source = config.source
    if source.unset:
        names = ", ".join(source.unset)
        yield Check("connection", Outcome.FAIL, f"{names} not set: export {source.unset[0]}=... (secrets come only "
                                          "from the environment)")
        return
    stage = "connection"  # the check an error belongs to
    try:
        with connection(source, read_timeout=30) as conn:
            version = str(query(conn, "SELECT VERSION()")[0][0])
            yield Check(stage, Outcome.OK, f"{source.address} (server {version})")
            stage = "binlog settings"
            variables = server_variables(conn)
            problems = settings_problems(variables)
            shown = " ".join(f"{name}={variables.get(name, 'missing')}" for name in REQUIRED)
            yield Check(stage, Outcome.FAIL if problems else Outcome.OK, "; ".join(map(str, problems)) or shown)
            stage = "grants"
            problems = grant_problems(user_grants(conn))
            yield Check(stage, Outcome.FAIL if problems else Outcome.OK,
                        "; ".join(map(str, problems)) or "SELECT and replication")
            stage = "binlog position"
            yield Check(stage, Outcome.OK, str(current_position(conn)))
    except IngestError as exc:
        yield Check(stage, Outcome.FAIL, " ".join(str(exc).split()))
    except pymysql.err.MySQLError as exc:
        yield Check(stage, Outcome.FAIL, f"{type(exc).__name__}: {' '.join(str(exc).split())}")
