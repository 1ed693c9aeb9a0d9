#!/bin/sh
# Container entry point: `lakehouse <command> [options]` (default: follow). The engine replaces
# this shell (exec), so SIGTERM from Kubernetes or `docker stop` reaches it: follow finishes the
# cycle in progress, commits it and exits 0; a restarted container resumes from the last
# committed binlog position. MYSQL_PASSWORD (and object-store keys) come from the environment
# (a Kubernetes Secret); LAKEHOUSE_TARGET picks an output of profiles.yml.
set -eu
cd "$(dirname "$0")/.."
if [ -n "${LAKEHOUSE_TARGET:-}" ]; then
    exec lakehouse --target "$LAKEHOUSE_TARGET" "$@"
fi
exec lakehouse "$@"
