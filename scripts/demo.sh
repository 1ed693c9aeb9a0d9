#!/usr/bin/env bash
# make demo: generate a project, start its embedded MariaDB with demo data, ingest every table,
# change rows in the source, ingest again (binlog catch-up), run the quality checks, summarise.
set -euo pipefail

template=$(pwd)
: "${VENV:?}" "${BUILD:?}"
project="$BUILD/demo-lakehouse"
step() { printf '\n==> %s\n' "$*"; }

if [ -d "$project" ]; then
  make -s -C "$project" source-down VENV="$VENV" >/dev/null 2>&1 || true
  rm -rf "$project"
fi
mkdir -p "$BUILD"

step "Generating a project from the template into $project"
"$VENV/bin/cookiecutter" --no-input "$template" -o "$BUILD" project_name="Demo Lakehouse"
cd "$project"
# The embedded demo source's password; real sources get theirs from the environment only.
export MYSQL_PASSWORD=demo-only-password
run() { make -s VENV="$VENV" "$@"; }

step "Starting the embedded MariaDB (own data dir, port 3307, binlog ROW/FULL) with demo data"
run source-up
step "First ingestion: chunked lock-free snapshot of every table into bronze, MERGE into silver"
run ingest-all
step "Changing the source: inserts, updates (some change primary keys) and deletes"
run source-changes
step "Second ingestion: binlog catch-up from the recorded position"
run ingest-all
step "Quality checks: silver against the source at one binlog position (Great Expectations)"
dq_status=0
run dq || dq_status=$?
step "Summary"
run status
if [ "$dq_status" -eq 0 ]; then
  echo "All quality checks passed. Project: $project (stop its MariaDB with: make demo-down)"
else
  echo "Quality checks FAILED (exit $dq_status): see the report above." >&2
fi
exit "$dq_status"
