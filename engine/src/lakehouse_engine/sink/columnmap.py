"""Delta column mapping: the name each column has inside the table's Parquet files.

A table with ``delta.columnMapping.mode = name`` reads every column from the Parquet column named
by its ``delta.columnMapping.physicalName`` field metadata, not by its (logical) name: that is
what lets RENAME and DROP COLUMN be metadata-only commits. The engine writes Parquet files itself
(snapshot chunks, binlog batches), so it must write those physical names.

Tables are created without column mapping; the first schema change that needs it upgrades the
table (:mod:`schemacommit`), and Delta's upgrade keeps every existing column's physical name
equal to its name. So a table without mapping, and every column of an upgraded table that was
there before the upgrade, is written under its own name; only columns added or renamed later
differ. The exception is a table with a column name that Delta refuses without mapping (a space
or one of ``,;{}()=``, newline, tab: Parquet's naming rules): it is created with mapping
(:func:`creation_properties`), so Delta gives every column a physical name of its own, which
writers read from the table once it exists. Whatever the writer assumed is checked against the
committing transaction's schema (:func:`deltafiles.append_files`), so a file is never committed
under names the table does not read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import SparkSession

from ..errors import ConfigError
from ..identifiers import quote_ident
from .log import deltalog

MODE = "delta.columnMapping.mode"
PHYSICAL_NAME = "delta.columnMapping.physicalName"
# What Delta refuses in a column name unless the table maps names (DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES).
INVALID_CHARACTERS = frozenset(" ,;{}()\n\t=")


class StaleColumns(Exception):
    """Files would hold other columns than the table reads (its columns changed since the
    writer looked): nothing is written or committed."""


def physical_names(schema_string: str, configuration: Mapping[str, str]) -> dict[str, str]:
    """Logical -> physical name of each top-level column of a Delta schema (JSON) whose table
    has ``configuration`` (its properties). Without column mapping, each column's own name."""
    fields: Sequence[dict[str, Any]] = json.loads(schema_string)["fields"]
    mode = configuration.get(MODE, "none")
    if mode == "none":
        return {f["name"]: f["name"] for f in fields}
    if mode != "name":
        raise ConfigError(f"a lake table uses Delta column mapping mode '{mode}', which the engine does not "
                          f"write (its files carry no field ids): set the table property {MODE} to 'name'")
    return {f["name"]: str(f.get("metadata", {}).get(PHYSICAL_NAME, f["name"])) for f in fields}


def needs_mapping(names: Sequence[str]) -> bool:
    """Whether Delta can store columns named ``names`` only in a table with column mapping."""
    return any(INVALID_CHARACTERS.intersection(name) for name in names)


def creation_properties(names: Sequence[str]) -> dict[str, str]:
    """The table properties a new table of columns ``names`` is created with: column mapping
    (by name) when a name needs it, else none (the table stays readable by readers without the
    ``columnMapping`` feature). Whatever ``defaults.table_features`` says: without mapping, Delta
    cannot create the table at all."""
    return {MODE: "name"} if needs_mapping(names) else {}


def enable_for_rewrite(spark: SparkSession, path: str, names: Sequence[str]) -> None:
    """Switch column mapping on (one metadata commit) for the existing table at ``path`` before it
    is rewritten with columns ``names`` that need it: an overwrite cannot turn it on, and Delta
    refuses such names without it. Nothing is done when they do not need it or it is on."""
    if not needs_mapping(names) or deltalog.newest_version(spark, path) < 0:
        return
    if deltalog.table_property(spark, path, MODE) not in (None, "none"):
        return
    spark.sql(f"ALTER TABLE delta.{quote_ident(path)} SET TBLPROPERTIES ('{MODE}' = 'name')")


def table_names(spark: SparkSession, path: str) -> dict[str, str] | None:
    """:func:`physical_names` of the table at ``path`` now; None when there is no table."""
    newest = deltalog.snapshot(spark, path)
    if int(newest.version()) < 0:
        return None
    metadata = newest.metadata()
    return physical_names(str(metadata.schemaString()), configuration(metadata))


def configuration(metadata: Any) -> dict[str, str]:
    """A Delta ``Metadata`` action's table properties (py4j Scala map) as a dict."""
    conf = metadata.configuration()
    keys = conf.keys().iterator()
    found = {}
    while keys.hasNext():
        key = str(keys.next())
        found[key] = str(conf.get(key).get())
    return found


def renamed(names: Sequence[str], physical: Mapping[str, str] | None) -> list[str]:
    """``names``, a file's columns, as written in it: their physical names (themselves without a
    mapping). Raises :class:`StaleColumns` unless they are exactly the table's columns: a column
    the table does not have could land under another column's physical name, and one the file
    lacks would read as NULL."""
    if physical is None:
        return list(names)
    if sorted(names) != sorted(physical):
        raise StaleColumns(f"the table has columns {sorted(physical)}, the file {sorted(names)}")
    return [physical[n] for n in names]
