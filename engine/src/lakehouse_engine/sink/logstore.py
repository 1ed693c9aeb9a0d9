"""How Delta lists a table's ``_delta_log``: by names first on a local disk, from the start key
on S3.

Delta lists a table's log at every snapshot update and inside every commit, and keeps commit
files for 30 days; a follow that commits each second adds hundreds of thousands of files a day.

- Local: Delta's listing of a folder stats every entry, so each of a follow's cycles got slower
  by the hour. ``lakehouse.delta.NamesFirstLocalLogStore`` (``engine/java``, built into ``jars/``
  by ``engine/java/build.sh``) stats only the entries at or after the listing's start. A local
  master only: a cluster's driver may run where the engine's files are not.
- S3 (``s3a://``): Delta's S3 store pages through every key of the folder (1,000 a request)
  unless ``delta.enableFastS3AListFrom`` lets it start at the listing's first key (S3's
  ``ListObjectsV2`` ``StartAfter``). Left off where the project pins S3A to the version 1 list
  API (a store without version 2).

A project that sets any of these itself keeps its choice.
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
FAST_S3A_LISTING = "spark.hadoop.delta.enableFastS3AListFrom"
S3A_LIST_VERSION = "spark.hadoop.fs.s3a.list.version"

log = logging.getLogger(__name__)


def settings(project_conf: Mapping[str, str], *, local_master: bool, lake_root: str) -> dict[str, str]:
    """Spark settings for listing the lake's Delta logs fast: the engine's store and its jar on
    a local master, the fast S3A listing for an ``s3a://`` lake."""
    wanted: dict[str, str] = {}
    if local_master and LOCAL_STORE_SETTING not in project_conf and ANY_STORE_SETTING not in project_conf:
        if JAR.is_file():
            wanted |= {"spark.jars": str(JAR), LOCAL_STORE_SETTING: STORE_CLASS}
        else:  # an install that left out the package's data: slower, still right
            log.warning("%s is missing (reinstall lakehouse-engine): Delta lists local tables' logs "
                        "its own way, which slows down as a log grows", JAR)
    if (lake_root.startswith("s3a://") and FAST_S3A_LISTING not in project_conf
            and project_conf.get(S3A_LIST_VERSION, "2") != "1"):
        wanted[FAST_S3A_LISTING] = "true"
    return wanted


def is_our_jar(jar: str) -> bool:
    """Whether a ``spark.jars`` entry (a path or a ``file:`` URI) is this jar."""
    return jar.removeprefix("file:").lstrip("/") == str(JAR).lstrip("/")
