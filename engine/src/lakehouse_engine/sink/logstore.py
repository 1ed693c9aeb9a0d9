"""The engine's log store for local Delta tables: a ``_delta_log`` listed by names first.

Delta lists a table's ``_delta_log`` at every snapshot update and inside every commit, and its
listing of a local folder stats every entry; a follow that commits each second keeps hundreds
of thousands of entries a day (Delta keeps commit files 30 days), so each of its cycles got
slower by the hour. ``lakehouse.delta.NamesFirstLocalLogStore`` (``engine/java``, built into
``jars/`` by ``engine/java/build.sh``) stats only the entries at or after the listing's start.

A local master only: a cluster's driver may run where the engine's files are not, and a lake
on a cluster is an object store, whose log stores Delta picks by scheme (this one is for
``file:`` only).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

JAR = Path(__file__).with_name("jars") / "lakehouse-delta-logstore.jar"
STORE_CLASS = "lakehouse.delta.NamesFirstLocalLogStore"
LOCAL_STORE_SETTING = "spark.delta.logStore.file.impl"
# Delta's older setting for every scheme; a project that sets either keeps its choice.
ANY_STORE_SETTING = "spark.delta.logStore.class"

log = logging.getLogger(__name__)


def settings(project_conf: Mapping[str, str]) -> dict[str, str]:
    """Spark settings that make Delta list local logs through the engine's store: its jar and
    the store for ``file:``; none when the project chose a log store itself."""
    if LOCAL_STORE_SETTING in project_conf or ANY_STORE_SETTING in project_conf:
        return {}
    if not JAR.is_file():  # an install that left out the package's data: slower, still right
        log.warning("%s is missing (reinstall lakehouse-engine): Delta lists local tables' logs "
                    "its own way, which slows down as a log grows", JAR)
        return {}
    return {"spark.jars": str(JAR), LOCAL_STORE_SETTING: STORE_CLASS}


def is_our_jar(jar: str) -> bool:
    """Whether a ``spark.jars`` entry (a path or a ``file:`` URI) is this jar."""
    return jar.removeprefix("file:").lstrip("/") == str(JAR).lstrip("/")
