"""Hadoop's ``file:`` file system without a process per permission change or rename.

pip's pyspark ships no Hadoop native library, so Hadoop's local file system runs ``chmod`` for
every file and folder it creates with a permission and ``readlink`` for every rename's two
paths: each Delta commit on a local lake (its commit file and checksum, both written aside and
renamed) forks a handful of processes from the driver's JVM, some 350 in a 500k-change catch-up
of 13 batches, with Hadoop's reader threads for each. ``lakehouse.hadoop.NoForkLocalFileSystem``
and ``NoForkLocalFs`` (``engine/java``, built into ``jars/lakehouse-hadoop-local.jar``) do the
same through ``java.nio`` and leave what it cannot do (a sticky bit, a symbolic link) to
Hadoop's own code.

Only where the engine starts the driver's JVM itself on a local master: the jar must be on the
JVM's class path from its start (spark-submit reads the jars it is given through this file
system before it loads them; it goes on Spark's default extra class path, so that an
``extraClassPath`` of the project or of ``spark-defaults.conf`` stays), and a cluster's executors
would not have it. A project that chooses its own ``file:`` implementation keeps it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

JAR = Path(__file__).with_name("jars") / "lakehouse-hadoop-local.jar"
# Spark puts it before spark.driver.extraClassPath, which stays the project's (or its
# spark-defaults.conf's) to set.
CLASS_PATH = "spark.driver.defaultExtraClassPath"
FILE_SYSTEM = {
    "spark.hadoop.fs.file.impl": "lakehouse.hadoop.NoForkLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "lakehouse.hadoop.NoForkLocalFs",
}
log = logging.getLogger(__name__)


def settings(project_conf: Mapping[str, str], *, local_driver: bool) -> dict[str, str]:
    """The settings that put the no-fork file system in place, or none: not a driver the engine
    starts on a local master, a project that sets either implementation, or the jar missing."""
    if not local_driver or any(key in project_conf for key in FILE_SYSTEM):
        return {}
    if not JAR.is_file():  # an install that left out the package's data: slower, still right
        log.warning("%s is missing (reinstall lakehouse-engine): Hadoop forks a process for each "
                    "local file's permission and rename", JAR)
        return {}
    return {CLASS_PATH: str(JAR), **FILE_SYSTEM}
