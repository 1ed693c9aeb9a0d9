"""The kind of change a bronze row records, in its ``_op`` column (Debezium's letters)."""

from __future__ import annotations

from enum import StrEnum


class Op(StrEnum):
    """A ``StrEnum``: members are the one-letter strings stored in bronze and compared in SQL."""

    READ = "r"  # a snapshot row
    INSERT = "c"
    UPDATE = "u"
    DELETE = "d"
