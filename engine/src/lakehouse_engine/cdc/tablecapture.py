"""One table's state in the binlog phase (:class:`TableCapture`): where it starts, and how it stops.

A table whose changes cannot be known (a DDL that cannot be applied exactly, statement-logged
DML, incomplete row images, a column mismatch, a failed commit) is stopped on its own
(:meth:`TableCapture.fail`): its buffered rows are dropped uncommitted, so its checkpoint stays
at the last good commit, and the other tables of the catch-up go on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pymysql

from .. import failures
from ..config.project import Delivery, SchemaPolicy
from ..errors import TABLE, FatalError, IngestError
from ..logs import FILE_ONLY
from ..source.cascades import Cascade
from ..source.introspect import TableSchema
from ..source.keyorder import ChunkLocator, SortKeys
from ..source.typemap import image_converter
from ..state.checkpoint import Checkpoint
from ..state.positions import BinlogPosition
from ..tables import TableSpec
from . import cascading
from .bronzerows import BronzeRows

log = logging.getLogger(__name__)

ImageConvert = Callable[[tuple[Any, ...]], tuple[Any, ...]]  # a row image in the table's column order


@dataclass
class TableCapture:
    """Binlog-phase state of one table during a catch-up."""

    spec: TableSpec
    schema: TableSchema
    checkpoint: Checkpoint
    start: BinlogPosition  # changes at or before this are already in bronze
    locator: ChunkLocator | None  # set while binlog changes may fall inside a chunk's window
    # Follow mode: a catch-up that found none of this table's rows may leave its checkpoint
    # where it is (see ``commits.idle_advance_held``) instead of committing an empty batch.
    hold_idle: bool = False
    rows: BronzeRows = field(default_factory=BronzeRows)
    failure: IngestError | None = None
    binlog_rows: int = 0
    # The bronze batches committed by this catch-up since silver last took them, as written (at
    # most about silver.HELD_ROWS rows): silver then merges them without reading bronze back.
    recent: dict[int, pa.Table] = field(default_factory=dict)
    # on_schema_change='ignore': rows are cut to the lake's columns (missing: NULL).
    project: bool = False
    # on_cascade='apply': the foreign keys whose cascades it derives, and the parent changes of
    # the rows buffered that cascade into it (resolved when they are committed: ``cascading``).
    cascades: tuple[Cascade, ...] = ()
    pending: list[cascading.Pending] = field(default_factory=list)
    # ``converter``'s, per ``texts``, for ``schema`` as it was when they were made.
    _converters: dict[tuple[str, ...], ImageConvert | None] = field(default_factory=dict, init=False, repr=False)
    _converters_of: TableSchema | None = field(default=None, init=False, repr=False)

    def converter(self, texts: tuple[str, ...] = ()) -> ImageConvert | None:
        """How a row image in the table's column order becomes canonical (None: it is already),
        its columns named in ``texts`` vouched for as text (``typemap.image_converter``). Made
        once per ``texts`` and schema: routing asks for one per transaction, and making one
        costs about 11 us for 18 columns, more than converting a small transaction's rows."""
        if self._converters_of is not self.schema:
            self._converters, self._converters_of = {}, self.schema
        try:
            return self._converters[texts]
        except KeyError:
            made = self._converters[texts] = image_converter(self.schema, texts)
            return made

    def fail(self, error: IngestError) -> None:
        """Stop this table: what it buffered is dropped, the other tables go on."""
        log.error("%s: stopped: %s", self.spec.name, error)
        self.failure = error
        self.rows = BronzeRows()  # uncommitted: the checkpoint stays at the last good commit
        self.pending = []


def table_stopped(table: str, detail: str, position: BinlogPosition | None = None) -> FatalError:
    return FatalError(
        f"table {table}: {detail}; nothing was written past the last checkpoint; re-snapshot with "
        f"`make ingest TABLE={table} FULL_REFRESH=1`",
        table=table, position=str(position) if position is not None else None,
    )


def schema_changed(table: str, detail: str, position: BinlogPosition | None = None) -> FatalError:
    return table_stopped(table, f"schema change ({detail}) cannot be applied", position)


def resume_position(checkpoint: Checkpoint) -> BinlogPosition | None:
    """Where the binlog phase of a table resumes: every change at or before it is in bronze
    (``None`` while no snapshot chunk is done)."""
    if checkpoint.position is not None:
        return checkpoint.position
    progress = checkpoint.snapshot
    if progress is not None and progress.done:
        return progress.low_watermark
    return None


def new_capture(conn: pymysql.connections.Connection, spec: TableSpec, schema: TableSchema,
                checkpoint: Checkpoint, delivery: Delivery, *, read_to: BinlogPosition | None = None,
                hold_idle: bool = False, cascades: tuple[Cascade, ...] = ()) -> TableCapture:
    """``read_to``: how far this process already read the binlog past the checkpoint without
    finding a row of the table (an idle advance held in memory); reading resumes there."""
    progress = checkpoint.snapshot
    start = resume_position(checkpoint)
    if start is None:
        raise FatalError(f"table {spec.name}: checkpoint has neither a position nor chunks", table=spec.name)
    if read_to is not None and read_to > start:
        start = read_to
    locator = None
    # Exactly-once: while a change may fall inside a chunk's window, the filter of ``routing``
    # needs the chunk each change's key is in.
    if delivery == Delivery.EXACTLY_ONCE and progress is not None and (
            start < progress.high_watermark or not progress.complete):
        locator = ChunkLocator(progress.chunks, SortKeys(conn, schema.key_columns))
    return TableCapture(spec, schema, checkpoint, start, locator, hold_idle=hold_idle,
                        project=spec.on_schema_change is SchemaPolicy.IGNORE, cascades=cascades)


def as_table_error(exc: BaseException, table: str, lake_root: str | None = None) -> IngestError:
    """An error to record against ``table``: engine errors as they are, Spark errors translated
    to one line, anything else as one line (its details go to the log). An error that Ctrl-C
    caused inside a Spark call is the interruption itself: it stops the run, not the table."""
    if failures.was_interrupted():
        raise KeyboardInterrupt from exc
    if isinstance(exc, IngestError):
        if TABLE in str(exc) or exc.table not in (None, table):
            return exc.for_table(table)  # an error the binlog stream's tables share: a copy each
        exc.table = table
        return exc
    log.error("%s: failed", table, exc_info=exc, extra=FILE_ONLY)  # the console gets the one line
    translated = failures.translate(exc, command=f"table {table}", lake_root=lake_root)
    if translated is not None:
        translated.table = table
        return translated
    text = str(exc).strip().splitlines()
    first = text[0][:300] if text else ""
    return FatalError(f"table {table}: {type(exc).__name__}: {first}; details in target/lakehouse.log",
                      table=table)
