"""make bench's child: one listing of a table's Delta log grown by many files, through the
engine's log store and through Delta's own, in the bench project's Spark session.

A follow commits each table every cycle and Delta keeps the commit files for 30 days, so a busy
table's ``_delta_log`` holds hundreds of thousands of files; Delta lists the folder at every
snapshot update and commit. The grown files are hidden ``.crc`` names (as Hadoop's own
checksums), added for the measurement and removed after it.

Usage: bench_log_listing.py PROJECT_DIR TABLE EXTRA_FILES; prints one JSON object.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

REPEATS = 7


def main() -> int:
    project, table, extra = Path(sys.argv[1]).resolve(), sys.argv[2], int(sys.argv[3])
    from lakehouse_engine.config.project import load_project
    from lakehouse_engine.sink.spark import get_spark, jvm_view

    config = load_project(project)
    log = project / "lake" / "silver" / table / "_delta_log"
    spark = get_spark(config, app_name="bench-log-listing")
    jvm = jvm_view(spark)
    conf = spark._jsc.hadoopConfiguration()
    stores = {"engine": jvm.lakehouse.delta.NamesFirstLocalLogStore(conf),
              "delta": jvm.io.delta.storage.HDFSLogStore(conf)}  # Delta's for file: when none is set
    # Delta lists from its newest checkpoint on (from version 0 where the log has none yet:
    # fewer than ten commits, e.g. a run with BENCH_SKIP_FOLLOW=1).
    last = log / "_last_checkpoint"
    checkpoint = json.loads(last.read_text())["version"] if last.exists() else 0
    start = jvm.org.apache.hadoop.fs.Path(str(log / f"{checkpoint:020d}"))
    added = [log / f".bench-listing-{i:07d}.crc" for i in range(extra)]
    try:
        for path in added:
            path.touch()
        timings = {}
        for name, store in stores.items():
            spent = []
            for _ in range(REPEATS):
                began = time.perf_counter()
                listed = store.listFrom(start, conf)
                while listed.hasNext():
                    listed.next()
                spent.append(time.perf_counter() - began)
            timings[f"{name}_ms"] = round(statistics.median(spent[1:]) * 1000, 1)  # the first warms the JIT
        files = sum(1 for _ in log.iterdir())
    finally:
        for path in added:
            path.unlink(missing_ok=True)
    print(json.dumps({"files_in_log": files, **timings}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
