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
import pyarrow.compute as pc
from pyspark.sql import types as T

from ..errors import ConfigError
from ..sink import columnmap, dvmerge, parquetfiles
from ..sink.arrows import arrow_schema
from ..sink.history import CURRENT
from ..sink.log import localfiles, logstate
from .arrowprint import bytes_type

READER_VERSION = 3  # table features; a lower protocol needs nothing more of a reader


class Unreadable(Exception):
    """Silver cannot be read here as Delta reads it; Spark must read it."""


def silver_parts(table_path: str, version: int, columns: Sequence[str], *,
                 current_only: bool = False, repeating: Sequence[str] = ()) -> Iterator[pa.Table]:
    """The live rows of the Delta table at ``table_path`` (local) at ``version``, file by file,
    in ``columns`` (by name, in the table's types); ``current_only``: an SCD 2 table's current
    versions only. Raises :class:`Unreadable` before the first part where it can tell.

    Those of the ``repeating`` columns that are text or binary and whose values repeat in the
    first part are handed out as dictionary arrays from the next part on (:class:`Repeats`): the
    same values, read from the files' own dictionaries instead of expanded into one string per
    row."""
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
    repeats = Repeats([c for c in repeating if c in wanted and bytes_type(target.field(c).type)])
    for add in state.live():
        part = _live_part(root, add, wanted, physical, repeats.target(target), current_only, repeats.chosen or ())
        repeats.learn(part)
        yield part


class Repeats:
    """Which candidate columns to read as dictionaries: those whose first ``SAMPLE`` values in the
    first part that has as many hold at most half as many distinct ones (names, flags,
    countries). A column of distinct values stays dense: building its dictionary on read would
    cost a hash of every value for nothing. Only the arrays' encoding depends on the choice."""

    SAMPLE = 1024

    def __init__(self, candidates: Sequence[str]):
        self.candidates = list(candidates)
        self.chosen: list[str] | None = None if self.candidates else []

    def learn(self, part: pa.Table) -> None:
        if self.chosen is not None or part.num_rows < self.SAMPLE:
            return
        sample = part.slice(0, self.SAMPLE)
        self.chosen = [c for c in self.candidates
                       if int(pc.count_distinct(sample.column(c), mode="all").as_py()) <= self.SAMPLE // 2]

    def target(self, schema: pa.Schema) -> pa.Schema:
        """``schema`` with the chosen columns as dictionaries of their type (Parquet's int32 indices)."""
        chosen = set(self.chosen or ())
        return pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), f.type), f.nullable) if f.name in chosen else f
                          for f in schema])


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
               target: pa.Schema, current_only: bool, dictionary: Sequence[str] = ()) -> pa.Table:
    try:
        path = dvmerge.data_path(root, str(add["path"]))
        names = [physical[c] for c in wanted]
        table = parquetfiles.read_columns(path, names, [physical[c] for c in dictionary])
        table = table.rename_columns(list(wanted)).cast(target)
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
