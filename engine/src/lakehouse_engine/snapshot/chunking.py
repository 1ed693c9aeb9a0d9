"""Split a table into key-range chunks.

Boundaries are always values the database returned, and every comparison between keys happens
in the database's own collation: in SQL while splitting, and through ``WEIGHT_STRING()`` sort
keys when a binlog event must be matched to its chunk (``source.keyorder``). Python's ``<`` on
strings is never used (``'aaaa' < 'ZZZZ'`` and ``'E' = 'e'`` in ``utf8mb4_general_ci``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pymysql

from ..source.connection import qualified, query, quote_ident
from ..source.introspect import TableSchema
from ..state.chunks import Chunk as Chunk  # re-exported: checkpoints hold chunks, state owns the type
from ..state.chunks import KeyValue as KeyValue

INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})
# An even chunk may hold this many times chunk_size rows before it is split further.
OVERSIZE = 2


def chunks_from_boundaries(boundaries: Sequence[KeyValue]) -> list[Chunk]:
    """``[b1, b2]`` -> ``(-inf, b1)``, ``[b1, b2)``, ``[b2, +inf)``."""
    edges: list[KeyValue | None] = [None, *boundaries, None]
    return [Chunk(i, edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def reading_order(chunks: Sequence[Chunk]) -> list[Chunk]:
    """The unbounded last chunk first: it is the one that grows while the others are read."""
    return sorted(chunks, key=lambda c: (c.end is not None, c.index))


def even_boundaries(low: int, high: int, step: int) -> list[KeyValue]:
    """Boundaries ``low+step, low+2*step, ...`` strictly inside ``(low, high]``."""
    if step <= 0:
        raise ValueError("step must be positive")
    return [(b,) for b in range(low + step, high + 1, step)]


def is_even_candidate(table: TableSchema) -> bool:
    if len(table.key) != 1:
        return False
    col = table.key_columns[0]
    return col.data_type in INTEGER_TYPES or (col.data_type == "decimal" and not col.scale)


def even_step(low: int, high: int, rows: int, chunk_size: int, bounds: tuple[float, float]) -> int | None:
    """The key step of an even split, or ``None`` when the keys are too sparse or too dense
    for an even split to give chunks near ``chunk_size`` rows (Flink's distribution factor)."""
    factor = (high - low + 1) / max(rows, 1)
    if not bounds[0] <= factor <= bounds[1]:
        return None
    return max(1, math.ceil(chunk_size * factor))


def refine_even(
    boundaries: Sequence[KeyValue],
    step: int,
    chunk_size: int,
    estimate: Callable[[Chunk], int],
    walk: Callable[[Chunk], list[KeyValue]],
) -> list[KeyValue]:
    """Split the even chunks that hold far more than ``chunk_size`` rows.

    Unique integer keys put at most ``step`` rows in a bounded even chunk, so while ``step`` is
    within ``OVERSIZE`` times ``chunk_size`` nothing is asked. Otherwise (sparse keys, dense in
    places) each chunk's row count is estimated (``estimate``, cheap) and an oversized one is cut
    by walking its keys (``walk``: boundaries strictly inside the chunk, ``chunk_size`` apart)."""
    chunks = chunks_from_boundaries(boundaries)
    if step <= OVERSIZE * chunk_size or len(chunks) < 2:
        return list(boundaries)
    refined: list[KeyValue] = []
    for chunk in chunks:
        if chunk.start is not None:
            refined.append(chunk.start)
        if estimate(chunk) > OVERSIZE * chunk_size:
            refined.extend(walk(chunk))
    return refined


def plan_chunks(
    conn: pymysql.connections.Connection,
    table: TableSchema,
    chunk_size: int,
    even_bounds: tuple[float, float] = (0.05, 1000.0),
) -> list[Chunk]:
    if is_even_candidate(table):
        boundaries = _even_split(conn, table, chunk_size, even_bounds)
        if boundaries is not None:
            return chunks_from_boundaries(boundaries)
    return chunks_from_boundaries(_uneven_split(conn, table, chunk_size))


def _even_split(
    conn: pymysql.connections.Connection,
    table: TableSchema,
    chunk_size: int,
    bounds: tuple[float, float],
) -> list[KeyValue] | None:
    key = quote_ident(table.key[0])
    name = qualified(table.schema, table.table)
    ((low, high),) = query(conn, f"SELECT MIN({key}), MAX({key}) FROM {name}")
    if low is None:
        return []
    low, high = int(low), int(high)
    rows = _row_estimate(conn, table, chunk_size)
    step = even_step(low, high, rows, chunk_size, bounds)
    if step is None:
        return None
    as_type = Decimal if table.key_columns[0].data_type == "decimal" else int
    boundaries = [(as_type(b),) for (b,) in even_boundaries(low, high, step)]
    return refine_even(boundaries, step, chunk_size, lambda c: _estimate_rows(conn, table, c),
                       lambda c: _walk(conn, table, chunk_size, c))


def _estimate_rows(conn: pymysql.connections.Connection, table: TableSchema, chunk: Chunk) -> int:
    """The optimizer's row estimate for the chunk's key range: index dives, no row read."""
    where, args = chunk_predicate(table.key, chunk)
    with conn.cursor() as cur:
        cur.execute(f"EXPLAIN SELECT 1 FROM {qualified(table.schema, table.table)} WHERE {where}", args)
        names = [d[0].lower() for d in cur.description or ()]
        return sum(int(row[names.index("rows")] or 0) for row in cur.fetchall())


def _row_estimate(conn: pymysql.connections.Connection, table: TableSchema, chunk_size: int) -> int:
    ((estimate,),) = query(
        conn,
        "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s",
        (table.schema, table.table),
    )
    # InnoDB's estimate is rough and can be 0 on a fresh table: count small tables exactly. A
    # larger table's estimate is close enough (the split only needs its density within the even
    # bounds, and refine_even cuts chunks the optimizer finds oversized), and COUNT(*) would scan
    # it: about a second for 2M rows.
    if not estimate or int(estimate) < 10 * chunk_size:
        ((count,),) = query(conn, f"SELECT COUNT(*) FROM {qualified(table.schema, table.table)}")
        return int(count)
    return int(estimate)


def _uneven_split(
    conn: pymysql.connections.Connection, table: TableSchema, chunk_size: int
) -> list[KeyValue]:
    """Walk the key index: each boundary is the first key of the next chunk."""
    return _walk(conn, table, chunk_size, Chunk(0, None, None))


def _walk(conn: pymysql.connections.Connection, table: TableSchema, chunk_size: int,
          within: Chunk) -> list[KeyValue]:
    """Boundaries ``chunk_size`` keys apart, strictly inside ``within``."""
    columns = ", ".join(quote_ident(k) for k in table.key)
    name = qualified(table.schema, table.table)
    boundaries: list[KeyValue] = []
    while True:
        low = boundaries[-1] if boundaries else within.start
        where, args = chunk_predicate(table.key, Chunk(0, low, within.end))
        rows = query(
            conn,
            f"SELECT {columns} FROM {name} WHERE {where} ORDER BY {columns} LIMIT 1 OFFSET %s",
            (*args, chunk_size),
        )
        if not rows:
            return boundaries
        boundaries.append(tuple(rows[0]))


def lower_bound(columns: Sequence[str], values: KeyValue) -> tuple[str, list[Any]]:
    """``key >= values`` as expanded OR/AND terms: row constructors often defeat the index."""
    return _lexicographic(columns, values, last_op=">=")


def upper_bound(columns: Sequence[str], values: KeyValue) -> tuple[str, list[Any]]:
    """``key < values``."""
    return _lexicographic(columns, values, last_op="<")


def _lexicographic(columns: Sequence[str], values: KeyValue, last_op: str) -> tuple[str, list[Any]]:
    strict = ">" if last_op == ">=" else "<"
    terms: list[str] = []
    args: list[Any] = []
    for i, column in enumerate(columns):
        parts = [f"{quote_ident(c)} = %s" for c in columns[:i]]
        op = last_op if i == len(columns) - 1 else strict
        parts.append(f"{quote_ident(column)} {op} %s")
        args.extend(values[: i + 1])
        terms.append("(" + " AND ".join(parts) + ")")
    return "(" + " OR ".join(terms) + ")", args


def chunk_predicate(columns: Sequence[str], chunk: Chunk) -> tuple[str, list[Any]]:
    parts: list[str] = []
    args: list[Any] = []
    if chunk.start is not None:
        sql, values = lower_bound(columns, chunk.start)
        parts.append(sql)
        args += values
    if chunk.end is not None:
        sql, values = upper_bound(columns, chunk.end)
        parts.append(sql)
        args += values
    return (" AND ".join(parts) or "TRUE"), args
