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
from pathlib import Path
from typing import Literal

import pymysql

from ..config.project import ProjectConfig
from ..errors import IngestError

Outcome = Literal["ok", "warn", "FAIL", "skip"]
JAVA_MAJOR = 17


@dataclass(frozen=True)
class Check:
    name: str
    outcome: Outcome
    detail: str

    def line(self) -> str:
        return f"{self.name:<16} {self.outcome:<4}  {self.detail}"


def run_checks(config: ProjectConfig, tables: Callable[[], int]) -> Iterator[Check]:
    """Every check in order; ``tables`` imports the table modules and returns their number."""
    yield Check("python", "ok", sys.version.split()[0])
    yield Check("project", "ok", f"{config.root} (target {config.target}, lake {config.lake_root})")
    try:
        yield Check("table modules", "ok", f"{tables()} table(s)")
    except IngestError as exc:
        yield Check("table modules", "FAIL", str(exc))
    yield java_check()
    yield jars_check(config)
    yield from source_checks(config)


def java_check() -> Check:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        return Check("java", "FAIL", f"no java found: install Java {JAVA_MAJOR} (openjdk-{JAVA_MAJOR}-jre-headless) "
                                     "or set JAVA_HOME")
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("java", "FAIL", f"{java} -version did not answer: {exc}")
    first = (done.stderr or done.stdout).strip().splitlines()[:1]
    version = first[0] if first else "unknown version"
    match = re.search(r'version "(\d+)', version)
    if match and int(match.group(1)) < JAVA_MAJOR:
        return Check("java", "FAIL", f"{version}: Spark 4 needs Java {JAVA_MAJOR} or newer")
    return Check("java", "ok", f"{version} ({java})")


def jars_check(config: ProjectConfig) -> Check:
    # spark.py imports pyspark, which starts no JVM: cheap enough for a check.
    from ..sink import spark

    if config.spark.jars_dir:
        jars = sorted(Path(config.spark.jars_dir).glob("*.jar"))
        if not jars:
            return Check("delta jars", "FAIL", f"jars folder {config.spark.jars_dir} holds no .jar files")
        return Check("delta jars", "ok", f"{len(jars)} jar(s) in {config.spark.jars_dir}")
    cached = spark._cached_jars()
    if cached:
        return Check("delta jars", "ok", f"{len(cached)} jar(s) cached ({spark._manifest()})")
    return Check("delta jars", "warn", f"not cached yet: the first Spark start resolves {spark.delta_artifact()} "
                                       "from Maven Central (`make setup` does it once)")


def source_checks(config: ProjectConfig) -> Iterator[Check]:
    from ..source.connection import connection, current_position, query
    from ..source.preflight import REQUIRED, grant_problems, settings_problems

    source = config.source
    if source.unset:
        names = ", ".join(source.unset)
        yield Check("connection", "FAIL", f"{names} not set: export {source.unset[0]}=... (secrets come only "
                                          "from the environment)")
        return
    stage = "connection"  # the check an error belongs to
    try:
        with connection(source, read_timeout=30) as conn:
            version = str(query(conn, "SELECT VERSION()")[0][0])
            yield Check(stage, "ok", f"{source.address} (server {version})")
            stage = "binlog settings"
            wanted = (*REQUIRED, "binlog_transaction_compression", "binlog_row_value_options")
            rows = query(conn, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({', '.join(['%s'] * len(wanted))})",
                         wanted)
            variables = {str(k): str(v) for k, v in rows}
            problems = settings_problems(variables)
            shown = " ".join(f"{name}={variables.get(name, 'missing')}" for name in REQUIRED)
            yield Check(stage, "FAIL" if problems else "ok", "; ".join(problems) or shown)
            stage = "grants"
            problems = grant_problems([str(r[0]) for r in query(conn, "SHOW GRANTS FOR CURRENT_USER()")])
            yield Check(stage, "FAIL" if problems else "ok", "; ".join(problems) or "SELECT and replication")
            stage = "binlog position"
            yield Check(stage, "ok", str(current_position(conn)))
    except IngestError as exc:
        yield Check(stage, "FAIL", " ".join(str(exc).split()))
    except pymysql.err.MySQLError as exc:
        yield Check(stage, "FAIL", f"{type(exc).__name__}: {' '.join(str(exc).split())}")
