"""Silver's table options from its table module: Delta's change data feed and liquid clustering.

Both are set on the silver table by metadata commits once it exists (after the table's first
silver commit, the snapshot's), and again only when the table module asks for something the
table does not have yet:

- ``change_data_feed=True`` sets ``delta.enableChangeDataFeed``: every later commit (each MERGE)
  records its row-level changes, readable with ``readChangeFeed``; the snapshot before it is
  silver's version at that point.
- ``cluster_by=("col", ...)`` sets liquid clustering on those columns: ``maintain``'s OPTIMIZE
  then clusters the files by them (no partition folders, and the columns can change later).

What this process already checked is remembered, so a follow cycle costs no extra read.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession

from ..identifiers import quote_ident
from ..tables import Layout
from .log import deltalog

CHANGE_DATA_FEED = "delta.enableChangeDataFeed"

_settled: set[tuple[str, Layout]] = set()


def clustering_columns(spark: SparkSession, path: str) -> tuple[str, ...]:
    detail = spark.sql(f"DESCRIBE DETAIL delta.{quote_ident(path)}").select("clusteringColumns").first()
    return tuple(detail[0] or ()) if detail is not None else ()


def apply_layout(spark: SparkSession, path: str, layout: Layout) -> list[str]:
    """Give silver at ``path`` what ``layout`` asks for; returns the statements run."""
    if layout == Layout() or (path, layout) in _settled or deltalog.newest_version(spark, path) < 0:
        return []
    target = f"delta.{quote_ident(path)}"
    statements = []
    if layout.change_data_feed and deltalog.table_property(spark, path, CHANGE_DATA_FEED) != "true":
        statements.append(f"ALTER TABLE {target} SET TBLPROPERTIES ('{CHANGE_DATA_FEED}' = 'true')")
    if layout.cluster_by and clustering_columns(spark, path) != layout.cluster_by:
        statements.append(f"ALTER TABLE {target} CLUSTER BY ({_columns(layout.cluster_by)})")
    for statement in statements:
        spark.sql(statement)
    _settled.add((path, layout))
    return statements


def _columns(names: Sequence[str]) -> str:
    return ", ".join(quote_ident(n) for n in names)
