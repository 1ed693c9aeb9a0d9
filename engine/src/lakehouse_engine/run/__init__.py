"""Running the engine: the CLI, ingest and follow loops, locks, run results, status and failures."""
