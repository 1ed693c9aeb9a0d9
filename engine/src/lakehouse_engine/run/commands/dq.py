"""``lakehouse dq``: the Great Expectations checks of silver against the source at one binlog
position, as a report on stdout."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ..context import CommandContext
from ..options import Selection
from ..printer import error_line, print_checks
from ..results import RunStatus
from .common import start_pipeline


def run(ctx: CommandContext, selection: Selection) -> int:
    from ...errors import IngestError
    from ...quality.dq import compares_values, failed, in_order, run_checks
    from ...quality.gxload import load_in_background
    from ...quality.localdq import key_reason, qualifies, run_local_checks, source_columns
    from ...quality.sourceview import PendingView

    specs = ctx.specs(selection)
    local_lake = qualifies(ctx.config, specs)
    if not local_lake:
        load_in_background()  # GX: 3 s of Python, needed only once silver is summed
    # The source's read view is opened and summed on a thread of its own while Spark starts
    # (``sourceview``): neither needs the other until silver is compared.
    with PendingView(ctx.config.source, specs, compares_values,
                     readers=ctx.config.dq_source_readers) as view:
        # No table locks: dq only reads the lake, so it runs beside an ingest or follow of the
        # tables, and on a lake mounted read-only (an analyst's machine, a checker with read-only rights).
        if not local_lake:
            spark, _ = start_pipeline(ctx, writes=False)
            results = run_checks(ctx.config, spark, specs, view=view)
        else:
            # Without a JVM (``localdq``). A table whose key sends it to Spark (a collated key)
            # has Spark started at once, beside the others' checks, as on Spark's own path.
            _preflight(ctx)
            columns = source_columns(ctx.config, specs)
            early = any(key_reason(columns[s.name].key_columns) for s in specs if s.name in columns)
            if early:
                _import_what_spark_start_imports()
            with ThreadPoolExecutor(1, thread_name_prefix="dq-spark-start") as starting:
                spark_started = (starting.submit(start_pipeline, ctx, writes=False, preflighted=True)
                                 if early else None)
                local = run_local_checks(ctx.config, specs, view, columns)
                results, rest = local.results, [s for s in specs if s.name in local.for_spark]
                if rest:
                    try:
                        spark, _ = (spark_started.result() if spark_started is not None
                                    else start_pipeline(ctx, writes=False, preflighted=True))
                    except IngestError as exc:  # the tables checked here keep their results
                        results += [failed(s.name, f"it needs Spark ({local.for_spark[s.name]}), which did "
                                                   f"not start: {exc}") for s in rest]
                    else:
                        results += run_checks(ctx.config, spark, rest, view=view)
        results = in_order(specs, results)
    print_checks(results)
    failing = [r.table for r in results if not r.success]
    ctx.record(RunStatus.FAIL if failing else RunStatus.SUCCESS, results)
    if failing:
        error_line(f"ERROR [data quality]: checks failed for {', '.join(failing)}; see the report above",
                   ctx.log_format, "data quality")
        return 1
    return 0


def _preflight(ctx: CommandContext) -> None:
    """The source's binlog settings and grants, as :func:`start_pipeline` checks them for Spark's path."""
    from ...source.connection import connection
    from ...source.preflight import run_preflight

    with connection(ctx.config.source) as conn:
        run_preflight(conn)


def _import_what_spark_start_imports() -> None:
    """The modules :func:`start_pipeline` imports, imported here before it runs on a thread of
    its own: two threads importing one module at once may see it half initialised."""
    import lakehouse_engine.cdc.feed  # noqa: F401
    import lakehouse_engine.run.pipeline  # noqa: F401
    import lakehouse_engine.sink.resting  # noqa: F401
    import lakehouse_engine.sink.spark  # noqa: F401
    import lakehouse_engine.source.preflight  # noqa: F401
