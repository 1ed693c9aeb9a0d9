"""Delta's MERGE as SQL text, for portable mode (:mod:`.portable`).

``DeltaTable.merge`` is Delta's Python API over the driver's JVM: a Spark Connect client has
neither, and Delta's own Connect plugin is not part of every server. ``MERGE INTO`` is plain SQL
that any Spark with Delta's extension runs, from a temporary view of the source rows. The rules
are the same as the Python API's (the callers give the same conditions, as SQL).

Key bounds (the batch's min and max per key column) become literals of the target-only
predicate, which Delta uses to skip files by their statistics. A bound whose type has no exact
literal here is left out: the MERGE is the same, only less selective.
"""

from __future__ import annotations

import decimal
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from ..identifiers import quote_ident

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def literal(value: Any, dtype: T.DataType) -> str | None:
    """An exact Spark SQL literal of ``value`` as ``dtype``; None when there is none here.
    Text goes as the hex of its UTF-8 bytes, so no character needs escaping."""
    if value is None:
        return None
    if isinstance(dtype, _INTEGRAL) and isinstance(value, int) and not isinstance(value, bool):
        return f"CAST({value} AS {dtype.simpleString().upper()})"
    if isinstance(dtype, T.StringType) and isinstance(value, str):
        return f"CAST(X'{value.encode().hex().upper()}' AS STRING)"
    if isinstance(dtype, T.DecimalType) and isinstance(value, decimal.Decimal | int):
        return f"CAST('{value}' AS {dtype.simpleString().upper()})"
    return None


def key_condition(key: Sequence[str], bounds: Sequence[tuple[str, Any, Any]], types: Mapping[str, T.DataType]) -> str:
    """Key equality of target ``t`` and source ``s``, plus each bounded key column of ``t``
    between its literals (what :func:`.silverwrite.merge_condition` builds as Columns)."""
    terms = [f"t.{quote_ident(k)} = s.{quote_ident(k)}" for k in key]
    for name, low, high in bounds:
        lower, upper = literal(low, types[name]), literal(high, types[name])
        if lower is not None and upper is not None:
            terms.append(f"t.{quote_ident(name)} BETWEEN {lower} AND {upper}")
    return " AND ".join(terms)


def statement(path: str, view: str, on: str, clauses: Sequence[str]) -> str:
    """``MERGE INTO`` the Delta table at ``path`` (alias ``t``) from ``view`` (alias ``s``)."""
    return f"MERGE INTO delta.{quote_ident(path)} AS t USING {quote_ident(view)} AS s ON {on} " + " ".join(clauses)


def assignments(columns: Sequence[str]) -> str:
    """``UPDATE SET`` of every column from the source."""
    return ", ".join(f"{quote_ident(c)} = s.{quote_ident(c)}" for c in columns)


def insertion(columns: Sequence[str]) -> str:
    """``INSERT ... VALUES`` of every column from the source."""
    names = ", ".join(quote_ident(c) for c in columns)
    return f"({names}) VALUES ({', '.join(f's.{quote_ident(c)}' for c in columns)})"


def merge(spark: SparkSession, path: str, source: DataFrame, on: str, clauses: Sequence[str]) -> None:
    """Run the MERGE of ``source`` into the table at ``path``; the session's confs carry the
    commit's metadata and idempotency, as for ``DeltaTable.merge``."""
    view = f"lakehouse_merge_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    try:
        spark.sql(statement(path, view, on, clauses))
    finally:
        spark.catalog.dropTempView(view)
