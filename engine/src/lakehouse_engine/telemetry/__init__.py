"""What the engine tells the outside world after each invocation: alerts on failure
(``alerts``), Prometheus textfile metrics (``metrics``) and OpenLineage events (``lineage``).

All three read the invocation's run results, the body of ``target/run_results.json`` (its
schema is versioned by ``metadata.schema_version``), so what a scheduler, a dashboard and a
lineage server see is what the file says. None of them may change the invocation's outcome:
a broken hook or an unreachable endpoint is one warning in the log.
"""
