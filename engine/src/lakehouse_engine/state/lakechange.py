"""A change to a lake table's columns, as recorded with the bronze commit that made it.

Bronze records the changes of a DDL in that commit's checkpoint; silver replays them, in order,
before it merges the batches that follow. Values are SQL literal text (the server's own form of
the DDL's default) cast to the column's Spark type when applied.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    ADD = "add"  # a new column; existing rows hold ``value`` (None: NULL)
    DROP = "drop"
    RENAME = "rename"  # ``column`` is now called ``to``
    CAST = "cast"  # ``column`` widens to ``type`` (every value kept exactly)
    FILL = "fill"  # ``column``'s NULLs become ``value`` (the column became NOT NULL)
    # Snapshot rows of chunks read after the DDL (their ``_seq`` values, comma separated in
    # ``value``) are removed: those chunks are read again with the new columns.
    FORGET = "forget"
    # The column's source description changed, nothing it holds (SET/ENUM members appended, a
    # character set): bronze records the new description, silver has nothing to do.
    DESCRIBE = "describe"


@dataclass(frozen=True)
class LakeChange:
    kind: Kind
    column: str
    to: str | None = None
    type: str | None = None  # a Spark SQL type, e.g. "bigint", "decimal(12,3)"
    value: str | None = None

    @property
    def rewrites_rows(self) -> bool:
        """Whether existing files must be rewritten (else a metadata-only schema change)."""
        return not (self.kind is Kind.ADD and self.value is None)

    @property
    def changes_silver(self) -> bool:
        return self.kind is not Kind.DESCRIBE

    def to_json(self) -> dict[str, Any]:
        return {k: (v.value if isinstance(v, Kind) else v) for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> LakeChange:
        return cls(Kind(body["kind"]), body["column"], body.get("to"), body.get("type"), body.get("value"))
