"""Columns of one Parquet file: read without the datasets API, written with dictionaries only
where values repeat.

``pyarrow.parquet.read_table`` goes through the datasets API for a single file as well (a
dataset, a fragment, a scanner): about 2 ms per file on top of the read, which is most of the
time for silver's small files (265 silver files of the bench's 2M-row table after a catch-up:
0.58-0.85 s against 0.41-0.46 s through ``ParquetFile``). ``ParquetFile.read`` skips a column the
file lacks without a word; this module raises instead, as ``read_table`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def read_columns(path: str | Path, columns: Sequence[str], dictionary: Sequence[str] = ()) -> pa.Table:
    """``columns`` of the file at ``path``, in that order; ``dictionary``: those of them read as
    dictionary arrays (from the file's dictionary pages). Raises ``pa.ArrowInvalid`` for a
    column the file does not hold."""
    with pq.ParquetFile(path, read_dictionary=list(dictionary) or None) as file:
        missing = [c for c in columns if c not in file.schema_arrow.names]
        if missing:
            raise pa.ArrowInvalid(f"{path} holds no column {', '.join(missing)}")
        return file.read(columns=list(columns)).select(list(columns))


def write(table: pa.Table, path: str | Path) -> None:
    """``table`` as one snappy Parquet file at ``path``, dictionaries where values repeat."""
    pq.write_table(table, path, compression="snappy", use_dictionary=dictionary_columns(table))


# Rows at the start of a file whose distinct values decide each column's Parquet encoding.
DICTIONARY_SAMPLE_ROWS = 20_000


def dictionary_columns(rows: pa.Table, sample_rows: int = DICTIONARY_SAMPLE_ROWS) -> list[str]:
    """The columns worth dictionary-encoding in Parquet: those whose first ``sample_rows`` values
    repeat (fewer distinct values than half the rows). Parquet writers try a dictionary for every
    column and fall back to plain encoding once it grows too large, which for a column of unique
    values (a key, an e-mail address) costs the attempt and leaves a larger file: for 292k rows
    of TPC-DS ``customer``, choosing per column writes the file in 0.10 CPU-s instead of 0.15 and
    7.1 MB instead of 9.0. Only the encoding depends on it, never a value."""
    sample = rows.slice(0, sample_rows)
    if sample.num_rows == 0:
        return list(rows.column_names)
    return [name for name, column in zip(rows.column_names, sample.columns, strict=True)
            if pc.count_distinct(column, mode="all").as_py() * 2 < sample.num_rows]
