"""A snapshot chunk as checkpoints record it: a key range (the chunking itself is
``snapshot.chunking``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The values of a table's key columns, in key order.
KeyValue = tuple[Any, ...]


@dataclass(frozen=True)
class Chunk:
    """Rows with ``start <= key < end``; ``None`` means unbounded on that side."""

    index: int
    start: KeyValue | None
    end: KeyValue | None
