"""``on_cascade='apply'``: the child rows InnoDB's cascades change, derived from the parent's.

The binlog carries a parent's delete or key update but not what its foreign keys' ``ON DELETE``/
``ON UPDATE`` ``CASCADE`` and ``SET NULL`` did to the child (``source.cascades``). A child table
that applies them gets, for each such parent change at binlog position ``X``, the change InnoDB
made to every child row that referenced the parent's old key values at ``X``:

- its state at ``X`` is bronze's newest row of the key (everything committed before this
  catch-up's batch) overlaid with the batch's own changes before ``X``, and with the changes
  earlier cascades of the batch derived;
- the derived change (a delete, or an update setting the key columns to NULL or to the parent's
  new values) is written to bronze as an ordinary change at ``X`` (``_source_file``/``_source_pos``
  are the parent event's; row indexes from 1, which no change of the child itself can have there,
  since each rows event holds one table), so silver, ``rebuild`` and every reader of bronze see it;
- a parent change logged with ``foreign_key_checks=0`` cascaded nothing, and derives nothing.

Only what InnoDB does in one step is derived: a cascade whose parent is itself a cascading child
(several levels), a table referencing itself (recursive), and keys compared by a collation are
refused when the table is checked (``source.cascades.unappliable``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ..identifiers import quote_ident
from ..ops import Op
from ..sink import bronze
from ..source.cascades import Cascade
from ..state.positions import BinlogPosition, sequence
from .binlog import ParentChange

# What a parent change does to a referencing child row: delete it, or set its key columns.
DELETE, SET_NULL, SET_NEW = "delete", "set null", "set new"

Key = tuple[Any, ...]
# (op, parent change, row index at its position) -> the bronze meta columns of a derived row.
Meta = Callable[[Op, ParentChange, int], tuple[Any, ...]]
# (keys, position) -> for each key, whether its snapshot chunk already holds what a change at
# ``position`` does (or will, once read): such keys get no derived row.
Stale = Callable[[Sequence[Key], BinlogPosition], Sequence[bool]]


@dataclass(frozen=True)
class Pending:
    """A parent change that cascades into the child through ``cascade``."""

    cascade: Cascade
    change: ParentChange
    action: str  # DELETE, SET_NULL or SET_NEW


def action(cascade: Cascade, change: ParentChange) -> str | None:
    """What ``change`` of the parent does to the children that reference it through ``cascade``
    (None: nothing, e.g. an update that keeps the referenced values, or RESTRICT)."""
    if not change.checked:
        return None
    old = [change.before.get(c) for c in cascade.parent_columns]
    if any(v is None for v in old):  # a NULL references nothing
        return None
    if change.after is None:
        rule = cascade.on_delete
    elif all(change.before.get(c) == change.after.get(c) for c in cascade.parent_columns):
        return None
    else:
        rule = cascade.on_update
    if rule == "SET NULL":
        return SET_NULL
    if rule == "CASCADE":
        return DELETE if change.after is None else SET_NEW
    return None


def normal(value: Any) -> Any:
    """A value as compared: bytes as Spark returns them (bytearray) and as decoded (bytes) alike."""
    return bytes(value) if isinstance(value, bytearray) else value


def _sorted(keys: Iterable[Key]) -> list[Key]:
    """Keys in a repeatable order (their derived rows' row indexes follow it)."""
    keys = list(keys)
    try:
        return sorted(keys)
    except TypeError:
        return sorted(keys, key=repr)


@dataclass
class ChildState:
    """The child's rows that matter to the batch's cascades, as the batch goes on: each key's
    current values (None once deleted) and, per cascade, the keys referencing each value."""

    columns: tuple[str, ...]
    key: tuple[str, ...]
    cascades: tuple[Cascade, ...]

    def __post_init__(self) -> None:
        self._key_at = [self.columns.index(k) for k in self.key]
        self._refs_at = {c: [self.columns.index(col) for col in c.columns] for c in self.cascades}
        self.rows: dict[Key, tuple[Any, ...] | None] = {}
        self.refs: dict[Cascade, dict[Key, set[Key]]] = {c: defaultdict(set) for c in self.cascades}

    def key_of(self, data: Sequence[Any]) -> Key:
        return tuple(normal(data[i]) for i in self._key_at)

    def references(self, cascade: Cascade, data: Sequence[Any]) -> Key:
        return tuple(normal(data[i]) for i in self._refs_at[cascade])

    def place(self, key: Key, data: tuple[Any, ...] | None) -> None:
        old = self.rows.get(key)
        if old is not None:
            for cascade, refs in self.refs.items():
                refs[self.references(cascade, old)].discard(key)
        self.rows[key] = data
        if data is not None:
            for cascade, refs in self.refs.items():
                value = self.references(cascade, data)
                if None not in value:
                    refs[value].add(key)

    def referencing(self, cascade: Cascade, value: Key) -> list[Key]:
        return _sorted(self.refs[cascade].get(value, ()))

    def changed(self, cascade: Cascade, data: tuple[Any, ...], new: Key | None) -> tuple[Any, ...]:
        """``data`` with the cascade's columns set to ``new`` (None: NULL)."""
        values = list(data)
        for n, i in enumerate(self._refs_at[cascade]):
            values[i] = None if new is None else new[n]
        return tuple(values)


def derive(columns: Sequence[str], key: Sequence[str], current: Iterable[tuple[Any, ...]],
           batch: Iterable[tuple[Any, ...]], pending: Sequence[Pending], convert: Mapping[str, Callable[[Any], Any]],
           meta: Meta, stale: Stale | None = None) -> list[tuple[Any, ...]]:
    """The bronze rows the ``pending`` cascades derive, in binlog order.

    ``current``: the data columns of bronze's newest row of each key that may reference a
    pending change's old values (not deleted). ``batch``: the batch's own bronze rows (data
    columns, then the meta columns; in binlog order). ``convert``: each child column's binlog
    value to its lake value (the parent's values are turned into the child's with it)."""
    if not pending:
        return []
    columns = tuple(columns)
    width = len(columns)
    state = ChildState(columns, tuple(key), tuple(dict.fromkeys(p.cascade for p in pending)))
    for values in current:
        state.place(state.key_of(values), tuple(values))
    seq_at = width + 1  # bronze.META_COLUMNS: _op, _seq, ...
    rows = iter(batch)
    row = next(rows, None)
    derived: list[tuple[Any, ...]] = []
    index: dict[BinlogPosition, int] = defaultdict(int)
    for p in pending:
        at = sequence(p.change.position, 0)
        while row is not None and Decimal(row[seq_at]) < at:
            state.place(state.key_of(row), None if row[width] == Op.DELETE.value else tuple(row[:width]))
            row = next(rows, None)
        parent = p.cascade.parent_columns
        old = tuple(normal(convert[c](p.change.before[pc])) for c, pc in zip(p.cascade.columns, parent, strict=True))
        new = None
        if p.action == SET_NEW:
            assert p.change.after is not None
            new = tuple(convert[c](p.change.after[pc]) for c, pc in zip(p.cascade.columns, parent, strict=True))
        keys = state.referencing(p.cascade, old)
        if keys and stale is not None:
            keys = [k for k, gone in zip(keys, stale(keys, p.change.position), strict=True) if not gone]
        for k in keys:
            data = state.rows[k]
            assert data is not None  # only live rows reference a value
            changes: list[tuple[Op, tuple[Any, ...]]] = []
            if p.action == DELETE:
                state.place(k, None)
                changes.append((Op.DELETE, data))
            else:
                changed = state.changed(p.cascade, data, new)
                moved = state.key_of(changed)
                if moved != k:
                    # The foreign key is part of the child's key (ON UPDATE CASCADE of an
                    # association table): as for any key-changing update, a delete of the old
                    # key, then the row under its new one; silver would keep the old key else.
                    state.place(k, None)
                    changes.append((Op.DELETE, data))
                state.place(moved, changed)
                changes.append((Op.UPDATE, changed))
            for op, image in changes:
                index[p.change.position] += 1
                derived.append((*image, *meta(op, p.change, index[p.change.position])))
    return derived


def candidates(spark: SparkSession, path: str, columns: Sequence[str], key: Sequence[str],
               values: Mapping[Cascade, set[Key]]) -> list[tuple[Any, ...]]:
    """The data columns (in ``columns``' order) of bronze's newest row of every key that has a row
    referencing one of ``values`` (per cascade, in lake form), unless that newest row is a delete.
    One query, whatever the number of values; a table not written yet has none."""
    if not any(values.values()) or not bronze.exists(spark, path):
        return []
    changes = spark.read.format("delta").load(path)
    fields = {f.name: f for f in changes.schema.fields}
    keys: DataFrame | None = None
    for cascade, wanted in values.items():
        if not wanted:
            continue
        table = spark.createDataFrame([tuple(v) for v in wanted], StructType([fields[c] for c in cascade.columns]))
        hits = changes.join(F.broadcast(table), on=list(cascade.columns), how="left_semi")
        found = hits.select(*[F.col(quote_ident(k)) for k in key])
        keys = found if keys is None else keys.unionByName(found)
    assert keys is not None
    rows = changes.join(keys.distinct(), on=list(key), how="left_semi")
    newest = bronze.latest_per_key(rows, key).where(F.col("_op") != Op.DELETE.value)
    # Through Arrow, as silver reads batches: values come back as the capture made them (aware
    # timestamps, bytes), ready to be written again in a derived row.
    found = newest.select(*[F.col(quote_ident(c)).alias(f"c{i}") for i, c in enumerate(columns)]).toArrow()
    return list(zip(*(found.column(i).to_pylist() for i in range(len(columns))), strict=True)) \
        if found.num_rows else []
