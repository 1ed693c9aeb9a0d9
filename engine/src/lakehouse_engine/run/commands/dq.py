"""``lakehouse dq``: the Great Expectations checks of silver against the source at one binlog
position, as a report on stdout."""

from __future__ import annotations

import threading

from ..context import CommandContext
from ..options import Selection
from ..printer import error_line, print_checks
from ..results import RunStatus
from .common import start_pipeline


def run(ctx: CommandContext, selection: Selection) -> int:
    from ...quality.dq import compares_values, run_checks
    from ...quality.sourceview import PendingView

    specs = ctx.specs(selection)
    _import_great_expectations_meanwhile()
    # The source's read view is opened and summed on a thread of its own while Spark starts
    # (``sourceview``): neither needs the other until silver is compared.
    with PendingView(ctx.config.source, specs, compares_values) as view:
        # No table locks: dq only reads the lake, so it runs beside an ingest or follow of the
        # tables, and on a lake mounted read-only (an analyst's machine, a checker with read-only rights).
        spark, _ = start_pipeline(ctx, writes=False)
        results = run_checks(ctx.config, spark, specs, view=view)
    print_checks(results)
    failed = [r.table for r in results if not r.success]
    ctx.record(RunStatus.FAIL if failed else RunStatus.SUCCESS, results)
    if failed:
        error_line(f"ERROR [data quality]: checks failed for {', '.join(failed)}; see the report above",
                   ctx.log_format, "data quality")
        return 1
    return 0


def _import_great_expectations_meanwhile() -> None:
    """Import Great Expectations in the background: 3 s of Python that the checks need only after
    Spark's JVM has started, which takes as long and mostly waits. What both threads import
    (pyspark, pyarrow, numpy) is imported here first, so that they never import one module at once."""
    import numpy  # noqa: F401
    import pyarrow  # noqa: F401
    import pyspark.sql  # noqa: F401

    def load() -> None:
        try:
            import great_expectations  # noqa: F401
        except Exception:  # noqa: BLE001 - the checks import it again and report the error there
            pass

    threading.Thread(target=load, name="import-great-expectations", daemon=True).start()
