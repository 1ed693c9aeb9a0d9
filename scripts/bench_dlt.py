#!/usr/bin/env python3
"""dlt baseline for the ingestion benchmark: one MySQL/MariaDB table -> a local Delta table.

Runs in its own virtualenv (see ``scripts/bench-dlt-requirements.txt``), never in
the project's venv::

    python3 -m venv build/bench/dlt-venv
    build/bench/dlt-venv/bin/pip install -q -r scripts/bench-dlt-requirements.txt
    MYSQL_PASSWORD=... build/bench/dlt-venv/bin/python scripts/bench_dlt.py \\
        --host 127.0.0.1 --port 3306 --user U --database D --table customer \\
        --dest build/bench/dlt-out

What it does: a full snapshot of ``--table`` with dlt's ``sql_table`` source
(``--backend``: ``pyarrow``, the default, or ``connectorx``; ``--chunk-size`` rows per batch, dlt
defaults otherwise)
into the ``filesystem`` destination rooted at ``--dest`` with
``table_format="delta"`` and ``write_disposition="replace"``.

Layout under ``--dest`` (which must be absent or empty, so every run starts
from the same state and no dlt state is shared between runs):

* ``<dest>/<dataset>/<table>/``  the Delta table (``<dataset>`` defaults to ``--database``)
* ``<dest>/<dataset>/_dlt_*``    dlt's own bookkeeping tables/files
* ``<dest>/_dlt_home/``          dlt's pipelines dir, data dir and project dir

Output: exactly one JSON line on stdout::

    {"rows": N, "seconds": S, "dlt_version": "...", "deltalake_version": "..."}

``rows`` is the exact row count read back from the Delta table with the
``deltalake`` package (cross-checked against dlt's normalize row count);
``seconds`` is the wall time of the whole dlt run (source reflection, extract,
normalize and load). Any failure prints one line on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

# dlt reads its configuration from the environment when it is imported and when
# a pipeline is created: set it up before importing dlt. No network exists on
# the benchmark machines, so telemetry must be off; keep logging quiet so the
# JSON line is the only thing on stdout.
_DLT_ENV: dict[str, str] = {
    "RUNTIME__DLTHUB_TELEMETRY": "false",
    "RUNTIME__LOG_LEVEL": "WARNING",
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line; the password comes from ``$MYSQL_PASSWORD``."""
    parser = argparse.ArgumentParser(
        description="Load one MySQL/MariaDB table into a local Delta table with dlt "
        "and print one JSON line with rows and seconds.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3306)
    parser.add_argument("--user", required=True)
    parser.add_argument("--database", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--dest", required=True, type=Path, help="output folder; must be absent or empty")
    parser.add_argument("--dataset", default=None, help="dlt dataset name (folder under --dest); default: --database")
    parser.add_argument("--chunk-size", type=int, default=50_000, help="rows per batch from the source (default 50000)")
    parser.add_argument("--backend", choices=("pyarrow", "connectorx"), default="pyarrow",
                        help="dlt's reader: pyarrow (SQLAlchemy rows to Arrow) or connectorx (a Rust reader)")
    return parser.parse_args(argv)


def _prepare_dest(dest: Path) -> Path:
    """Create ``dest`` (absolute) and refuse one that already holds files."""
    dest = dest.resolve()
    if dest.exists():
        if not dest.is_dir():
            raise RuntimeError(f"--dest {dest} exists and is not a directory")
        if any(dest.iterdir()):
            raise RuntimeError(f"--dest {dest} is not empty; give a fresh folder per run")
    dest.mkdir(parents=True, exist_ok=True)
    return dest


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the dlt pipeline and return the result record printed as JSON."""
    password = os.environ.get("MYSQL_PASSWORD")
    if password is None:
        raise RuntimeError("MYSQL_PASSWORD is not set")
    dest = _prepare_dest(args.dest)
    dataset = args.dataset or args.database
    home = dest / "_dlt_home"
    home.mkdir()
    os.environ.update(_DLT_ENV)
    # Isolate dlt from ~/.dlt and from any .dlt/config.toml in the working dir.
    os.environ["DLT_DATA_DIR"] = str(home / "data")
    os.environ["DLT_PROJECT_DIR"] = str(home / "project")

    import dlt
    import sqlalchemy as sa
    from deltalake import DeltaTable
    from dlt.sources.sql_database import sql_table

    # URL.create quotes the password safely; the dialect must be mysql+pymysql.
    url = sa.engine.URL.create(
        "mysql+pymysql",
        username=args.user,
        password=password,
        host=args.host,
        port=args.port,
        database=args.database,
    )
    engine = sa.create_engine(url)
    try:
        started = time.perf_counter()
        resource = sql_table(
            credentials=engine,
            table=args.table,
            backend=args.backend,
            chunk_size=args.chunk_size,
        )
        pipeline = dlt.pipeline(
            pipeline_name="bench_dlt",
            pipelines_dir=str(home / "pipelines"),
            destination=dlt.destinations.filesystem(bucket_url=str(dest)),
            dataset_name=dataset,
        )
        load_info = pipeline.run(resource, table_format="delta", write_disposition="replace")
        seconds = time.perf_counter() - started
    finally:
        engine.dispose()

    load_info.raise_on_failed_jobs()
    # dlt normalizes identifiers (snake_case) for folder names too; plain names are unchanged.
    naming = pipeline.default_schema.naming
    table_name = naming.normalize_table_identifier(args.table)
    trace = pipeline.last_trace
    normalize_info = trace.last_normalize_info if trace is not None else None
    normalized = normalize_info.row_counts.get(table_name) if normalize_info is not None else None
    table_path = dest / naming.normalize_table_identifier(dataset) / table_name
    if not DeltaTable.is_deltatable(str(table_path)):
        raise RuntimeError(f"no Delta table at {table_path}")
    rows = DeltaTable(str(table_path)).to_pyarrow_dataset().count_rows()
    if normalized is not None and normalized != rows:
        raise RuntimeError(f"dlt normalized {normalized} rows but the Delta table holds {rows}")
    return {
        "rows": rows,
        "seconds": round(seconds, 3),
        "dlt_version": dist_version("dlt"),
        "deltalake_version": dist_version("deltalake"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: print the JSON line, or one error line and return 1."""
    args = parse_args(argv)
    try:
        result = run(args)
    except Exception as exc:  # noqa: BLE001 - one line on stderr for any failure
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        print(f"bench_dlt: {message}", file=sys.stderr)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
