#!/usr/bin/env python3
"""The plainest fast copy for the ingestion benchmark: connectorx reads one MySQL/MariaDB table
into Arrow (a Rust reader, ``--partitions`` connections split on the integer key) and delta-rs
writes it as a Delta table. No change capture, no checkpoint, no second layer: the floor a
snapshot tool is measured against.

Runs in the dlt virtualenv (``scripts/bench-dlt-requirements.txt`` has connectorx and deltalake)::

    MYSQL_PASSWORD=... build/bench/dlt-venv/bin/python scripts/bench_cx_delta.py \\
        --host 127.0.0.1 --port 3317 --user U --database D --table customer --key c_customer_sk \\
        --dest build/bench/cx-lake

Output: one JSON line on stdout, ``{"rows": N, "seconds": S, "connectorx_version": ...}``; rows
are counted back from the Delta table. Any failure prints one line on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any
from urllib.parse import quote


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="connectorx -> delta-rs copy of one table")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3306)
    parser.add_argument("--user", required=True)
    parser.add_argument("--database", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--key", required=True, help="the integer column the read is split on")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--dest", required=True, type=Path)
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    password = os.environ.get("MYSQL_PASSWORD")
    if password is None:
        raise RuntimeError("MYSQL_PASSWORD is not set")
    import connectorx as cx
    from deltalake import DeltaTable, write_deltalake

    shutil.rmtree(args.dest, ignore_errors=True)
    url = f"mysql://{quote(args.user)}:{quote(password)}@{args.host}:{args.port}/{args.database}"
    started = time.perf_counter()
    table = cx.read_sql(url, f"SELECT * FROM `{args.table}`", return_type="arrow",
                        partition_on=args.key, partition_num=args.partitions)
    write_deltalake(str(args.dest), table, mode="overwrite")
    seconds = time.perf_counter() - started
    rows = DeltaTable(str(args.dest)).to_pyarrow_dataset().count_rows()
    if rows != table.num_rows:
        raise RuntimeError(f"read {table.num_rows} rows but the Delta table holds {rows}")
    return {"rows": rows, "seconds": round(seconds, 3), "connectorx_version": dist_version("connectorx"),
            "deltalake_version": dist_version("deltalake")}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        print(json.dumps(run(parse_args(argv))), flush=True)
    except Exception as exc:  # noqa: BLE001 - one line on stderr for any failure
        print(f"bench_cx_delta: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
