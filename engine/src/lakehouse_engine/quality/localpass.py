"""Silver's bucket sums and changed-key facts over Arrow parts: :func:`silverpass.silver_pass`
without Spark, for ``dq`` on a local lake.

The parts are summed one at a time (``arrowsilver`` hands out one file each), so memory holds a
file, not the table. The result is the same :class:`SilverPass` Spark's pass gives, compared
with the source's sums by the same code: the rows holding a key changed between the two
positions are left out of the sums and their key facts counted apart; rows whose first key
column is NULL lie in no bucket.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..sink.dvmerge import KEY_TYPES
from ..source.introspect import TableSchema
from .arrowprint import Unprintable, buckets, row_hashes
from .bucketing import Bucketing
from .silverpass import KeyFacts, SilverPass, bucket_sums, example
from .uniqueness import Key

EXAMPLES = 5


@dataclass(frozen=True)
class Fingerprinted:
    """Silver's rows reduced to what the sums need, part by part: the key columns and each row's
    fingerprint of ``schema``'s columns. Computed before the source's read view is open (its
    bucketing and changed keys are known only then)."""

    schema: TableSchema
    parts: tuple[tuple[pa.Table, np.ndarray], ...]


def fingerprinted(parts: Iterable[pa.Table], schema: TableSchema) -> Fingerprinted:
    kept = []
    for part in parts:
        _check_key_types(part, schema)
        kept.append((part.select(list(schema.key)), row_hashes(schema.columns, part)))
    return Fingerprinted(schema, tuple(kept))


def local_pass(parts: Iterable[pa.Table], schema: TableSchema, bucketing: Bucketing,
               changed: Sequence[Key]) -> SilverPass:
    """Bucket sums of silver's ``parts`` without the rows of the ``changed`` keys (values as silver
    stores them), and the key facts of those rows."""
    return summed(fingerprinted(parts, schema), bucketing, changed)


def summed(rows: Fingerprinted, bucketing: Bucketing, changed: Sequence[Key]) -> SilverPass:
    """:func:`local_pass` of rows already fingerprinted."""
    key = rows.schema.key
    counts: dict[int, int] = {}
    xors: dict[int, int] = {}
    unbucketed = 0
    held: list[Key] = []
    wanted = set(changed)
    for part, hashes in rows.parts:
        bucket, has_bucket = buckets(bucketing, part)
        holding = holds(part, key, wanted)
        if holding.any():
            held.extend(k for k in _keys(part.filter(pa.array(holding)), key) if k in wanted)
        kept = ~holding
        unbucketed += int(np.count_nonzero(kept & ~has_bucket))
        chosen = kept & has_bucket
        for b, n, x in _per_bucket(bucket[chosen], hashes[chosen]):
            counts[b] = counts.get(b, 0) + n
            xors[b] = xors.get(b, 0) ^ x
    sums = bucket_sums((b, counts[b], xors[b]) for b in counts)
    return SilverPass(sums, _facts(key, held), unbucketed)


def holds(part: pa.Table, key: Sequence[str], wanted: set[Key]) -> np.ndarray:
    """Which rows of ``part`` hold one of the ``wanted`` keys: each key column's values matched
    against the keys' values in that column, then (for a key of several columns) the tuples."""
    mask = np.zeros(part.num_rows, dtype=bool)
    if not wanted or not part.num_rows:
        return mask
    mask[:] = True
    for i, name in enumerate(key):
        column = part.column(name)
        try:
            values = pa.array(list({k[i] for k in wanted}), type=column.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise Unprintable(f"changed keys of {name} as {column.type}: {exc}") from None
        found = pc.is_in(column, value_set=values)
        mask &= np.asarray(found.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    if len(key) > 1 and mask.any():
        candidates = np.flatnonzero(mask)
        exact = [k in wanted for k in _keys(part.take(pa.array(candidates)), key)]
        mask[candidates] = np.asarray(exact, dtype=bool)
    return mask


def _check_key_types(part: pa.Table, schema: TableSchema) -> None:
    """Keys are matched by Arrow's equality: only where it is Spark's (no time zones, NaNs)."""
    for name in schema.key:
        kind = part.schema.field(name).type
        if not any(accepts(kind) for accepts in KEY_TYPES):
            raise Unprintable(f"key column {name} is {kind}")


def _keys(part: pa.Table, key: Sequence[str]) -> list[Key]:
    return list(zip(*(part.column(name).to_pylist() for name in key), strict=True))


def _per_bucket(bucket: np.ndarray, hashes: np.ndarray) -> Iterable[tuple[int, int, int]]:
    """(bucket, rows, XOR of fingerprints) of each bucket present."""
    if not len(bucket):
        return []
    order = np.argsort(bucket, kind="stable")
    ordered, fingerprints = bucket[order], hashes[order]
    present, starts = np.unique(ordered, return_index=True)
    rows = np.diff(np.append(starts, len(ordered)))
    xor = np.bitwise_xor.reduceat(fingerprints, starts)
    return zip(present.tolist(), rows.tolist(), xor.tolist(), strict=True)


def _facts(key: Sequence[str], held: Sequence[Key]) -> KeyFacts:
    """The key facts of the rows holding changed keys (never NULL: they are the binlog's keys)."""
    per_key = Counter(held)
    shared = [(k, n) for k, n in per_key.items() if n > 1]
    examples = tuple(example(key, k, n) for k, n in shared[:EXAMPLES])
    nulls: dict[str, int] = dict.fromkeys(key, 0)
    return KeyFacts(len(held), sum(n for _, n in shared), nulls, examples)
