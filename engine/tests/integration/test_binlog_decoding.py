"""The fast row-image decoder against python-mysql-replication, on a real server's binlog.

Every column type the fast decoder takes, with the edge values of ``test_full_types`` (and a
latin1 column), is inserted, updated (also a key change) and deleted; the same binlog range read
with the fast decoder and with the library alone must give equal transactions, value for value
and type for type, and the fast decoder must have decoded every rows event of the range."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lakehouse_engine.cdc import rowimage
from lakehouse_engine.cdc.binlog import BinlogSource
from lakehouse_engine.source import embedded
from lakehouse_engine.source.connection import connection, current_position, quote_ident

from .test_full_types import KINDS, Kind, e

pytestmark = pytest.mark.integration

TABLE = "fast_types"
SLOW = {"bit1", "bit12", "bit64", "js", "geom", "pnt", "line", "poly", "mpnt", "mline", "mpoly",
        "coll"}  # and every TIME: types the library decodes
FAST_KINDS: tuple[Kind, ...] = (
    *(k for k in KINDS if k.name not in SLOW and not k.name.startswith("time")),
    Kind("latin", "VARCHAR(20) CHARACTER SET latin1", (e("'café €'", "café €"), e("''", ""))),
    Kind("wide", "VARCHAR(300)", (e("REPEAT('ü', 300)", "ü" * 300),)),  # a two-byte length prefix
)
ROWS = max(len(k.edges) for k in FAST_KINDS) + 1  # the last row: NULL in every nullable column


def value_sql(kind: Kind, row: int, nullable: bool) -> str:
    if row == ROWS - 1 and nullable:
        return "NULL"
    return kind.edges[row % len(kind.edges)].sql


COLUMNS = [(f"{k.name}_{'n' if nullable else 'nn'}", k, nullable) for k in FAST_KINDS for nullable in (True, False)]


def row_values(row: int) -> str:
    return ", ".join(value_sql(kind, row, nullable) for _, kind, nullable in COLUMNS)


def assignments(row: int) -> str:
    return ", ".join(f"{quote_ident(name)} = {value_sql(kind, row, nullable)}" for name, kind, nullable in COLUMNS)


def test_the_fast_decoder_reads_every_value_exactly_as_the_library(config, mariadb, monkeypatch):
    db = config.source.database
    definitions = ", ".join(f"{quote_ident(name)} {kind.sql_type} {'NULL' if nullable else 'NOT NULL'}"
                            for name, kind, nullable in COLUMNS)
    with embedded.root_connection(mariadb, db) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'")  # zero dates are edge values
        cur.execute(f"CREATE TABLE {TABLE} (id INT NOT NULL PRIMARY KEY, {definitions})")
        with connection(config.source) as probe:
            start = current_position(probe)
        cur.execute(f"INSERT INTO {TABLE} VALUES " + ", ".join(f"({r + 1}, {row_values(r)})" for r in range(ROWS)))
        for r in range(ROWS):  # every row takes the next row's values: before and after images differ
            cur.execute(f"UPDATE {TABLE} SET {assignments((r + 1) % ROWS)} WHERE id = %s", (r + 1,))
        cur.execute(f"UPDATE {TABLE} SET id = 100 WHERE id = 1")  # a key change
        cur.execute(f"DELETE FROM {TABLE} WHERE id IN (2, 100)")
        with connection(config.source) as probe:
            stop = current_position(probe)

    fast_events = []

    def counted(event):
        images = decode(event)
        fast_events.append(images is not None)
        return images

    decode = rowimage.decode
    monkeypatch.setattr(rowimage, "decode", counted)
    fast = list(BinlogSource(config.source, 5497, db, {TABLE: ("id",)}).transactions(start, stop))
    library = list(BinlogSource(config.source, 5498, db, {TABLE: ("id",)}, fast_decode=False).transactions(start, stop))

    assert fast_events and all(fast_events), "every rows event must have gone through the fast decoder"
    changes = [c for t in fast for c in t.changes]
    # the inserts, the updates, the key change (a delete and an update) and the two deletes
    assert len(changes) == 2 * ROWS + 4
    differences = [
        (ours.op, ours.values["id"], name, value, theirs.values[name])
        for ours, theirs in zip(changes, (c for t in library for c in t.changes), strict=True)
        for name, value in ours.values.items()
        if value != theirs.values[name] or type(value) is not type(theirs.values[name])
    ]
    assert not differences, f"{len(differences)} values differ, first: {differences[:5]}"[:3000]
    # The columns the fast decoder vouches for as text hold only str or None (their conversion
    # is skipped), and they are the text columns in a charset Python decodes.
    events = [event for t in fast for event in t.events]
    vouched = {name for event in events for name in event.texts}
    assert {"latin_n", "latin_nn", "wide_n", "wide_nn"} <= vouched
    broken = [(name, image[event.columns.index(name)]) for event in events for name in event.texts
              for image in event.images if not isinstance(image[event.columns.index(name)], str | None)]
    assert not broken, f"values of columns vouched for as text are not str: {broken[:5]}"
    # and everything around the values is the library's (which vouches for nothing)
    assert [replace(t, events=tuple(ev._replace(texts=()) for ev in t.events)) for t in fast] == library
