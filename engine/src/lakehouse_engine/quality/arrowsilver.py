"""Silver's rows at one Delta version, read from a local lake in Arrow, without a JVM.

The table's live files at the version come from the engine's own replay of the log
(:mod:`logstate`), each file's deleted rows from its deletion vector (:mod:`dvcodec`), and the
columns by their physical names (:mod:`columnmap`). The rows are handed out file by file, each
file's columns cast to the table's own types (a file written before a type widening holds the
narrower one), so that memory holds one file at a time, not the table.

What the reader cannot read exactly as Delta would (a reader feature it does not know, partition
columns, a log it cannot replay, a remote file, a column the table lacks) raises
:class:`Unreadable`, and ``dq`` reads that table with Spark instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import types as T

from ..errors import ConfigError
from ..sink import columnmap, dvmerge
from ..sink.arrows import arrow_schema
from ..sink.history import CURRENT
from ..sink.log import localfiles, logstate

READER_VERSION = 3  # table features; a lower protocol needs nothing more of a reader


class Unreadable(Exception):
    """Silver cannot be read here as Delta reads it; Spark must read it."""


def silver_parts(table_path: str, version: int, columns: Sequence[str], *,
                 current_only: bool = False) -> Iterator[pa.Table]:
    """The live rows of the Delta table at ``table_path`` (local) at ``version``, file by file,
    in ``columns`` (by name, in the table's types); ``current_only``: an SCD 2 table's current
    versions only. Raises :class:`Unreadable` before the first part where it can tell."""
    if not localfiles.is_local(table_path):
        raise Unreadable(f"{table_path} is not on the local file system")
    root = Path(localfiles.local_path(table_path))
    try:
        state = logstate.load(root, version)
    except (logstate.Unreadable, OSError, ValueError, KeyError) as exc:
        raise Unreadable(f"the log of {table_path} is not replayable here ({exc})") from None
    if state.version != version:
        raise Unreadable(f"the log of {table_path} ends at version {state.version}, not {version}")
    physical, schema = _readable(state, table_path)
    wanted = [*columns, CURRENT] if current_only else list(columns)
    missing = [c for c in wanted if c not in physical]
    if missing:
        raise Unreadable(f"silver lacks the columns {missing}")
    target = pa.schema([schema.field(c) for c in wanted])
    for add in state.live():
        yield _live_part(root, add, wanted, physical, target, current_only)


def _readable(state: logstate.TableState, table_path: str) -> tuple[dict[str, str], pa.Schema]:
    protocol, metadata = state.protocol, state.metadata
    readers = set(protocol.get("readerFeatures") or ())
    if int(protocol.get("minReaderVersion", 1)) > READER_VERSION or readers - dvmerge.READER_FEATURES:
        raise Unreadable(f"{table_path} needs reader features {sorted(readers - dvmerge.READER_FEATURES)}")
    if metadata.get("partitionColumns"):
        raise Unreadable(f"{table_path} is partitioned")
    schema_string = metadata["schemaString"]
    try:
        physical = columnmap.physical_names(schema_string, metadata.get("configuration") or {})
    except ConfigError as exc:
        raise Unreadable(str(exc)) from None
    return physical, arrow_schema(T.StructType.fromJson(json.loads(schema_string)))


def _live_part(root: Path, add: dict[str, object], wanted: Sequence[str], physical: dict[str, str],
               target: pa.Schema, current_only: bool) -> pa.Table:
    try:
        path = dvmerge.data_path(root, str(add["path"]))
        names = [physical[c] for c in wanted]
        table = pq.read_table(path, columns=names).select(names).rename_columns(list(wanted)).cast(target)
        if add.get("deletionVector"):
            keep = np.ones(table.num_rows, dtype=bool)
            keep[dvmerge.deleted_rows(root, add).astype(np.int64)] = False
            table = table.filter(pa.array(keep))
    except dvmerge.Unsupported as exc:
        raise Unreadable(str(exc)) from None
    except (OSError, pa.ArrowInvalid, KeyError) as exc:  # a column missing from a file, a bad cast
        raise Unreadable(f"silver file {add['path']}: {exc}") from None
    if current_only:
        table = table.filter(table.column(CURRENT).fill_null(False)).drop_columns([CURRENT])
    return table
