"""Schema changes and TRUNCATE, applied to bronze and silver at the DDL's binlog position.

Bronze takes each DDL as one atomic commit that carries the checkpoint at the DDL's position, so
a crash leaves either the whole change (and the position past it) or nothing (and the DDL is
read again):

- a column added with NULL for existing rows, a rename, a drop, a type Delta can widen, a new
  source description: a metadata-only commit (:mod:`schemacommit`, which gives the table column
  mapping and type widening the first time it needs them);
- any other change rewrites the table: existing rows get what the source gave them (the added
  column's default, a NOT NULL column's filled NULLs, a type Delta cannot widen). Bronze stays
  a changelog that folds into the source's current state, so silver rebuilt from it equals
  silver evolved step by step;
- TRUNCATE is recorded as a delete of every key bronze holds, at the TRUNCATE's position:
  silver empties through its usual MERGE, and bronze shows when it happened.

The engine's own Parquet writers name each column as the table reads it (:mod:`columnmap`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from decimal import Decimal

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import ConcurrentRunError
from ..identifiers import quote_ident
from ..ops import Op
from ..state.checkpoint import Checkpoint
from ..state.lakechange import Kind, LakeChange
from ..state.positions import BinlogPosition, sequence
from . import bronze, columnmap, schemacommit
from .layout import CHANGE_DATA_FEED
from .log import deltalog


def evolved(df: DataFrame, changes: Sequence[LakeChange], meta: Sequence[str],
            described: T.StructType | None = None) -> DataFrame:
    """``df`` with ``changes`` applied in order; data columns first, then the ``meta`` columns.
    ``described``: the data columns' fields as they should end up (their metadata is kept)."""
    df = _without_reads(df, [Decimal(s) for c in changes if c.kind is Kind.FORGET
                             for s in (c.value or "").split(",") if s])
    columns: dict[str, Column] = {f: F.col(quote_ident(f)) for f in df.columns}
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    for change in changes:
        name = change.column
        if change.kind is Kind.ADD:
            assert change.type is not None
            if name in columns:  # only if another run applied these changes since they were read
                raise ConcurrentRunError(f"column {name} is in the lake table already: another run changed "
                                         "its columns concurrently; nothing was written: run again")
            columns[name] = F.lit(change.value).cast(change.type)
            types[name] = change.type
        elif change.kind is Kind.DROP:
            columns.pop(name)
        elif change.kind is Kind.RENAME:
            assert change.to is not None
            columns = {(change.to if k == name else k): v for k, v in columns.items()}
            types[change.to] = types[name]
        elif change.kind in (Kind.FORGET, Kind.DESCRIBE):
            continue  # rows filtered above; a description goes with ``described``
        elif change.kind is Kind.CAST:
            assert change.type is not None
            columns[name] = columns[name].cast(change.type)
            types[name] = change.type
        else:
            columns[name] = F.coalesce(columns[name], F.lit(change.value).cast(types[name]))
    fields = {f.name: f for f in described.fields} if described is not None else {}
    data = [k for k in columns if k not in meta]
    return df.select(*[_named(columns[k], k, fields.get(k)) for k in data], *[columns[k] for k in meta if k in columns])


def _without_reads(df: DataFrame, seqs: Sequence[Decimal]) -> DataFrame:
    """``df`` without the snapshot rows of the chunk reads whose ``_seq`` is in ``seqs``."""
    if not seqs:
        return df
    return df.where(~((F.col("_op") == Op.READ.value) & F.col("_seq").isin(list(seqs))))


def _named(column: Column, name: str, field: T.StructField | None) -> Column:
    if field is None:
        return column.alias(name)
    return column.cast(field.dataType).alias(name, metadata=field.metadata)


def evolve_bronze(spark: SparkSession, path: str, changes: Sequence[LakeChange], described: T.StructType,
                  checkpoint: Checkpoint, features: Collection[str]) -> None:
    """Apply ``changes`` to bronze in one commit carrying ``checkpoint``. ``described``: the
    source columns afterwards (:func:`typemap.described_schema`); ``features``: the Delta table
    features it may switch on to avoid a rewrite (:mod:`schemacommit`)."""
    if bronze.commit_schema(spark, path, changes, described.jsonValue()["fields"], checkpoint, features):
        return
    rows = evolved(spark.read.format("delta").load(path), changes, bronze.META_COLUMNS, described)
    bronze.append(rows, path, checkpoint, replace_all=True)


def truncate_bronze(spark: SparkSession, path: str, key: Sequence[str], checkpoint: Checkpoint,
                    position: BinlogPosition, source_ts: int, run_id: str, read_after: Sequence[Decimal] = ()) -> None:
    """Record a TRUNCATE at ``position``: a delete of each key whose newest bronze row is not one.
    ``read_after``: the ``_seq`` of snapshot chunks read after the TRUNCATE, whose rows stay."""
    changes = _without_reads(spark.read.format("delta").load(path), read_after)
    keys = [F.col(quote_ident(k)) for k in key]
    current = bronze.latest_per_key(changes, key).where(F.col("_op") != Op.DELETE.value)
    data = [quote_ident(c) for c in changes.columns if c not in bronze.META_COLUMNS]
    base = F.lit(sequence(position, 0)).cast("decimal(38,0)")
    deletes = current.select(
        *data,
        F.lit(Op.DELETE.value).alias("_op"),
        (base + F.row_number().over(Window.orderBy(*keys))).cast("decimal(38,0)").alias("_seq"),
        F.lit(position.file).alias("_source_file"),
        F.lit(position.offset).cast("long").alias("_source_pos"),
        F.lit(dt.datetime.fromtimestamp(source_ts, dt.UTC)).alias("_source_ts"),
        F.lit(dt.datetime.now(dt.UTC)).alias("_ingested_at"),
        F.lit(run_id).alias("_run_id"),
        F.lit(checkpoint.batch).cast("long").alias("_batch"),
    )
    bronze.append(deletes, path, checkpoint)


def evolve_silver(spark: SparkSession, path: str, changes: Sequence[LakeChange], meta: Sequence[str],
                  marker: str, features: Collection[str]) -> None:
    """Apply ``changes`` to silver in one commit carrying ``marker``: a metadata-only commit when
    Delta can record them so (:mod:`schemacommit`) with the table ``features`` it may switch
    on, else a rewrite. A silver with a change data feed gets none: Delta gives no feed across a
    RENAME or DROP made by column mapping."""
    changes = [c for c in changes if c.changes_silver]
    if deltalog.table_property(spark, path, CHANGE_DATA_FEED) == "true":
        features = ()
    if schemacommit.commit(spark, path, changes, meta, user_metadata=marker, features=features):
        return
    rows = evolved(spark.read.format("delta").load(path), changes, meta)
    columnmap.enable_for_rewrite(spark, path, rows.columns)
    rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true").option(
        "userMetadata", marker).save(path)
