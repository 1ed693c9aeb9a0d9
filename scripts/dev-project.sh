#!/usr/bin/env bash
# A generated project to develop the engine in: `bash scripts/dev-project.sh [OUT]` renders the
# template (default answers) into OUT (default build/dev) and links its engine/ to this
# checkout's, so an engine edit is live in the project at once. Run it again after editing a
# rendered file (tests, Makefile, table modules): it renders them anew and keeps the link.
# Then: cd OUT/acme-lakehouse && ../../../.venv/bin/python -m pytest tests/unit -q
# ruff does not follow the link: lint the engine in a project generated without it, as `make
# test` does (e.g. `cookiecutter --no-input . -o /tmp/x project_name="Template Check"`, whose
# other package name also catches a test that imports acme_lakehouse instead of the rendered name).
set -euo pipefail
TEMPLATE="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$(mkdir -p "${1:-$TEMPLATE/build/dev}" && cd "${1:-$TEMPLATE/build/dev}" && pwd)"
PY="${PY:-$TEMPLATE/.venv/bin/python}"
PROJECT="$OUT/acme-lakehouse"
ENGINE="$PROJECT/acme_lakehouse/engine"
RENDER="$(mktemp -d)"
trap 'rm -rf "$RENDER"' EXIT
"$PY" -m cookiecutter --no-input "$TEMPLATE" -o "$RENDER" >/dev/null
mkdir -p "$PROJECT"
# Rendered files are copied over (the engine is linked, not copied); nothing else is removed.
(cd "$RENDER/acme-lakehouse" && tar --exclude=./acme_lakehouse/engine -cf - .) | (cd "$PROJECT" && tar -xf -)
[ -L "$ENGINE" ] || { rm -rf "$ENGINE"; ln -s "$TEMPLATE/{{cookiecutter.project_slug}}/{{cookiecutter.package_name}}/engine" "$ENGINE"; }
echo "$PROJECT (engine linked to $TEMPLATE)"
