"""Schema changes that Delta records without touching a data file, committed with a checkpoint.

A DDL that adds a NULL column, renames or drops a column, widens a type (integers, DECIMAL
precision) or only changes a column's source description becomes one Delta commit that changes
the table's schema and nothing else, carrying the checkpoint (bronze) or marker (silver) like
any other ``WRITE`` of the table. It takes milliseconds whatever the table's size; a rewrite of
every file took seconds on the demo table and grows with the table.

- RENAME and DROP COLUMN need Delta column mapping (``delta.columnMapping.mode = name``): the
  files keep the column under its old (physical) name, the table maps it. Without mapping a
  renamed column would read as NULL, and a dropped one would come back with its old values if a
  column of that name were added again.
- Widening needs Delta type widening (``delta.enableTypeWidening``): the files keep the narrow
  type and Delta reads it as the wide one; each change is recorded in the column's metadata
  (``delta.typeChanges``), as Delta's own ``ALTER TABLE ... TYPE`` records it.

A table gets those features (a protocol upgrade: readers need Delta Lake 4.0+, or another reader
that supports the ``columnMapping`` and ``typeWidening`` table features) the first time a change
needs them, by a commit of its own before the schema change. The upgrade keeps each existing
column's physical name equal to its name; a crash between the two commits leaves an upgraded
table and the DDL still to apply, which the next run does. A silver with Delta's change data
feed is never upgraded: Delta refuses to give a change feed across a RENAME or DROP made by
column mapping, so such a silver is rewritten instead (its feed shows every row deleted and
inserted, as before).

Anything else (a column added with a value for existing rows, NULLs filled, snapshot rows
removed, a type change Delta cannot widen) still rewrites the table (:mod:`evolve`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

from pyspark.sql import SparkSession

from ..identifiers import quote_ident
from ..state.lakechange import Kind, LakeChange
from . import columnmap, portable
from .log import transaction

Field = dict[str, Any]  # one field of a Delta schema's JSON
TYPE_WIDENING = "delta.enableTypeWidening"
TYPE_CHANGES = "delta.typeChanges"
COLUMN_MAPPING = "column_mapping"
TYPE_WIDENING_FEATURE = "type_widening"


class Feature(NamedTuple):
    """A Delta table feature as a table property: its value when on, and when never set."""

    prop: str
    on: str
    unset: str


# The features a schema change may switch on (a project's ``defaults.table_features``).
FEATURES = {COLUMN_MAPPING: Feature(columnmap.MODE, "name", "none"),
            TYPE_WIDENING_FEATURE: Feature(TYPE_WIDENING, "true", "false")}
INTEGRAL = ("byte", "short", "integer", "long")
# Digits left of the point each integral type needs as a DECIMAL (Delta's minimum targets).
INTEGRAL_DIGITS = {"byte": 10, "short": 10, "integer": 10, "long": 20}
SIMPLE_TO_JSON = {"tinyint": "byte", "smallint": "short", "int": "integer", "bigint": "long"}
DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


def json_type(simple: str) -> str:
    """A Spark type's JSON name from its SQL simple string (``bigint`` -> ``long``)."""
    return SIMPLE_TO_JSON.get(simple, simple)


def widens(old: str, new: str) -> bool:
    """Whether Delta's type widening reads type ``old`` as ``new`` (JSON type names), keeping
    every value: integers to wider integers, to DOUBLE or to a DECIMAL with enough integer
    digits; FLOAT to DOUBLE; DECIMAL(p, s) to DECIMAL(p + k1, s + k2) with k1 >= k2 >= 0; DATE to
    TIMESTAMP_NTZ."""
    if old == new:
        return False
    wide = DECIMAL.fullmatch(new)
    if old in INTEGRAL:
        if new in INTEGRAL:
            return INTEGRAL.index(new) > INTEGRAL.index(old)
        if new == "double":
            return old != "long"
        return wide is not None and int(wide[1]) - int(wide[2]) >= INTEGRAL_DIGITS[old]
    narrow = DECIMAL.fullmatch(old)
    if narrow is not None and wide is not None:
        (p, s), (p2, s2) = (int(narrow[1]), int(narrow[2])), (int(wide[1]), int(wide[2]))
        return p2 - p >= s2 - s >= 0
    return (old, new) in {("float", "double"), ("date", "timestamp_ntz")}


def evolved_fields(current: Sequence[Field], changes: Sequence[LakeChange], meta: Sequence[str],
                   described: Sequence[Field] | None = None) -> list[Field] | None:
    """The table's fields after ``changes``, when Delta can make them a metadata-only change;
    None when the rows must be rewritten.

    ``current``: the table's fields now (column mapping and type change metadata included),
    ``meta``: the lake's own columns, kept last; ``described``: the source columns afterwards
    (bronze), whose descriptions the data fields take (a field keeps its ``delta.*`` metadata:
    its physical name, id and type changes). An added column goes after the other data columns,
    as a rewrite puts it."""
    data = {f["name"]: json.loads(json.dumps(f)) for f in current if f["name"] not in meta}
    for change in changes:
        name = change.column
        if change.kind is Kind.ADD and change.value is None and name not in data:
            data[name] = {"name": name, "type": json_type(change.type or ""), "nullable": True, "metadata": {}}
        elif change.kind is Kind.DROP and name in data:
            del data[name]
        elif change.kind is Kind.RENAME and name in data and change.to is not None and change.to not in data:
            data = {(change.to if k == name else k): v for k, v in data.items()}
            data[change.to]["name"] = change.to
        elif change.kind is Kind.CAST and name in data and widens(data[name]["type"], json_type(change.type or "")):
            # Recorded as Delta's ALTER TABLE ... TYPE records it: readers of the older files
            # (and DROP FEATURE typeWidening) go by it.
            old = data[name]["type"]
            data[name]["type"] = json_type(change.type or "")
            history = data[name]["metadata"].setdefault(TYPE_CHANGES, [])
            history.append({"toType": data[name]["type"], "fromType": old})
        elif change.kind is not Kind.DESCRIBE:
            # Values change (ADD with a value, FILL, FORGET), a change Delta cannot record, or one
            # that does not fit the table (a column that exists already or is missing: another
            # run changed it concurrently).
            return None
    if described is not None:
        if sorted(f["name"] for f in described) != sorted(data):
            return None  # the changes do not lead to the source's columns: rewrite from them
        for source in described:
            field = data[source["name"]]
            if field["type"] != source["type"]:
                return None
            own = {k: v for k, v in field["metadata"].items() if k.startswith("delta.")}
            field["metadata"] = {**{k: v for k, v in source.get("metadata", {}).items()
                                    if not k.startswith("delta.")}, **own}
    return [*data.values(), *(f for f in current if f["name"] in meta)]


def needed_features(changes: Sequence[LakeChange]) -> set[str]:
    """The table features (names of :data:`FEATURES`) the metadata-only form of ``changes`` needs."""
    needs = set()
    if any(c.kind in (Kind.RENAME, Kind.DROP) for c in changes):
        needs.add(COLUMN_MAPPING)
    needs |= _unavoidable(changes)  # a column added (or renamed) under a name only mapping stores
    if any(c.kind is Kind.CAST for c in changes):
        needs.add(TYPE_WIDENING_FEATURE)
    return needs


def _unavoidable(changes: Sequence[LakeChange]) -> set[str]:
    """Features ``changes`` need whatever the project allows: a column named as Delta stores only
    under column mapping cannot be written otherwise, not even by a rewrite."""
    named = [c.to or "" if c.kind is Kind.RENAME else c.column for c in changes if c.kind in (Kind.ADD, Kind.RENAME)]
    return {COLUMN_MAPPING} if columnmap.needs_mapping(named) else set()


def commit(spark: SparkSession, path: str, changes: Sequence[LakeChange], meta: Sequence[str], *,
           user_metadata: str, described: Sequence[Field] | None = None, app_id: str | None = None,
           version: int = 0, features: Collection[str] = tuple(FEATURES)) -> bool:
    """Apply ``changes`` to the table at ``path`` as one metadata-only ``WRITE`` commit carrying
    ``user_metadata`` (and ``app_id``'s ``version``); False, with nothing committed, when they
    need the rows rewritten, or a table feature the table lacks and ``features`` (those it may
    be given) leaves out. Raises :class:`~.log.transaction.AlreadyCommitted` (before anything is done)
    and Delta's conflicts as :func:`deltafiles.append_files` does. In portable mode (no
    transaction to write a schema into) it is always False: the rows are rewritten."""
    if portable.active(spark):
        return False
    opened = transaction.open_transaction(spark, path, app_id, version)
    if _evolved(opened, changes, meta, described) is None:
        return False
    properties = columnmap.configuration(opened.txn.metadata())
    missing = sorted(name for name in needed_features(changes)
                     if properties.get(FEATURES[name].prop, FEATURES[name].unset) != FEATURES[name].on)
    if missing:
        if not set(missing) <= set(features) | _unavoidable(changes):
            return False
        settings = ", ".join(f"'{FEATURES[n].prop}' = '{FEATURES[n].on}'" for n in missing)
        spark.sql(f"ALTER TABLE delta.{quote_ident(path)} SET TBLPROPERTIES ({settings})")
        opened = transaction.open_transaction(spark, path, app_id, version)  # on the upgraded table
    fields = _evolved(opened, changes, meta, described)
    if fields is None:  # another writer changed the table meanwhile: leave it to the rewrite
        return False
    metadata = opened.txn.metadata()
    schema = opened.jvm.org.apache.spark.sql.types.DataType.fromJson(json.dumps({"type": "struct", "fields": fields}))
    opened.txn.updateMetadata(metadata.copy(
        metadata.id(), metadata.name(), metadata.description(), metadata.format(), schema.json(),
        metadata.partitionColumns(), metadata.configuration(), metadata.createdTime()), False)
    opened.commit(opened.jvm.java.util.ArrayList(), user_metadata)
    return True


def _evolved(opened: transaction.Transaction, changes: Sequence[LakeChange], meta: Sequence[str],
             described: Sequence[Field] | None) -> list[Field] | None:
    current = json.loads(str(opened.txn.metadata().schemaString()))["fields"]
    return evolved_fields(current, changes, meta, described)
