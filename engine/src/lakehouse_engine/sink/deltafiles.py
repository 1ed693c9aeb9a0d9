"""Commit Parquet files written outside Spark to a Delta table, as one idempotent append.

The snapshot's tasks already hold each chunk as Arrow columns; writing them with pyarrow straight
into the table's folder and committing those files (Delta ``AddFile`` actions) skips the JVM's
second pass over every row (read staged data, encode it again, collect statistics), which cost as
much CPU as reading the source. The commit goes through Delta's own optimistic transaction
(:mod:`.log.transaction`), so it carries the same guarantees as a DataFrame append: the app id's
version is committed once (:class:`~.log.transaction.AlreadyCommitted` otherwise), any commit landing meanwhile is a
conflict, and the commit info records a ``WRITE`` with ``user_metadata`` (the checkpoint). Also:

- The files hold the columns under the names the table reads them by (:mod:`columnmap`): the
  writer says which it used, and the commit is refused (:class:`StaleColumns`) unless they are
  exactly the transaction's. Statistics are named the same way.
- Each file's statistics are exact: its row count and the min/max of the columns given (Delta
  answers ``COUNT(*)`` and skips files from them, so they must never be wrong).

Files of a commit that fails are left unreferenced in the folder; ``VACUUM`` removes them, as it
does for any failed Delta write. A local lake's files are measured here; files in an object store
(``s3a://``, written by tasks through pyarrow) come with the size their writer read back, so the
driver never lists the bucket.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import SparkSession

from . import columnmap
from .columnmap import StaleColumns
from .log.localfiles import is_local, local_path
from .log.transaction import open_transaction
from .objectstore import object_path


@dataclass(frozen=True)
class DataFile:
    """A Parquet file inside the table's folder, with what its statistics need."""

    path: str  # absolute local path or object-store URI, inside the table's folder
    rows: int
    min_values: Mapping[str, Any] = field(default_factory=dict)
    max_values: Mapping[str, Any] = field(default_factory=dict)
    null_counts: Mapping[str, int] = field(default_factory=dict)
    size: int | None = None  # bytes; None: a local file, measured at commit

    def stats(self, physical: Mapping[str, str]) -> str:
        """Delta's statistics JSON; it names columns by ``physical`` name, as the files do."""
        def named(values: Mapping[str, Any]) -> dict[str, Any]:
            return {physical[k]: v for k, v in values.items()}

        return json.dumps({"numRecords": self.rows, "minValues": named(self.min_values),
                           "maxValues": named(self.max_values), "nullCount": named(self.null_counts)})


def append_files(spark: SparkSession, table_path: str, files: Sequence[DataFile], *, app_id: str,
                 version: int, user_metadata: str, physical: Mapping[str, str]) -> int:
    """Commit ``files`` to the existing Delta table at ``table_path``; returns the new version.
    ``physical``: the column names the files were written with (logical -> name in the file);
    statistics are given by logical name.

    Raises :class:`~.log.transaction.AlreadyCommitted` when ``app_id`` already committed ``version`` (or later),
    :class:`StaleColumns` when the table's columns are no longer ``physical``, and Delta's own
    exceptions on a conflicting concurrent commit."""
    opened = open_transaction(spark, table_path, app_id, version)
    jvm, metadata = opened.jvm, opened.txn.metadata()
    reads = columnmap.physical_names(str(metadata.schemaString()), columnmap.configuration(metadata))
    if reads != dict(physical):  # the table's columns changed since the files were written
        raise StaleColumns(f"{table_path} reads columns {reads}, the files hold {dict(physical)}")
    delta = jvm.org.apache.spark.sql.delta
    placed = [_inside(data, opened.log.dataPath()) for data in files]
    none = jvm.scala.Option.empty()
    empty_map = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(jvm.java.util.HashMap())
    now_ms = int(time.time() * 1000)
    actions = jvm.java.util.ArrayList()
    for data, relative in placed:
        size = data.size if data.size is not None else os.path.getsize(data.path)
        actions.add(delta.actions.AddFile(
            jvm.java.net.URI(None, None, relative, None).toString(),  # percent-encoded, as Delta expects
            empty_map, size, now_ms, True, data.stats(reads), None, None, none, none, none, none, none,
        ))
    return opened.commit(actions, user_metadata)


def _inside(data: DataFile, data_path: Any) -> tuple[DataFile, str]:
    """``data`` (a local path normalised) and its path relative to the table's folder
    ``data_path`` (Hadoop's ``Path``); raises ValueError for a file outside that folder."""
    if is_local(data.path):
        root = local_path(str(data_path.toUri().getPath())).rstrip("/") + "/"
        data = replace(data, path=local_path(data.path))
        where = data.path
    else:  # compared as the bucket and key: s3a://b/t and s3://b/t/ name one folder
        if data.size is None:
            raise ValueError(f"{data.path}: a file in an object store needs its size")
        root, where = object_path(str(data_path.toString())) + "/", object_path(data.path)
    if not where.startswith(root):
        raise ValueError(f"{data.path} is not inside the table folder {root}")
    return data, where[len(root):]
