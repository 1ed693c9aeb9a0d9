# Lakehouse ingestion cookiecutter template. `make demo` shows it end to end; `make test` tests it.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV := $(abspath .venv)
PY := $(VENV)/bin/python
BUILD := $(abspath build)

.PHONY: help setup demo demo-down test test-s3 test-gcs test-azure test-dagster bench lint clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  make %-8s %s\n", $$1, $$2}'

setup: $(VENV)/.installed ## install system packages (Java, mariadb-server) and the pinned Python packages

$(VENV)/.installed: requirements-dev.txt engine/requirements.txt engine/requirements-dev.txt engine/requirements-connect.txt engine/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "ERROR: Python 3.11+ is needed, found $$($(PYTHON) --version 2>&1); run with PYTHON=python3.11"; exit 2; }
	bash scripts/system-deps.sh
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements-dev.txt
	@touch $@

demo: setup ## generate a project, ingest the embedded MariaDB, change rows, ingest again, check quality
	VENV=$(VENV) BUILD=$(BUILD) bash scripts/demo.sh

demo-down: ## stop the demo's MariaDB (make demo leaves it running for you to explore)
	@[ -d $(BUILD)/demo-lakehouse ] || { echo "no demo project in $(BUILD): nothing to stop"; exit 0; }
	$(MAKE) -s -C $(BUILD)/demo-lakehouse source-down VENV=$(VENV)

test: setup ## run the template's tests, the engine's suite and generated projects' suites
	@# A generated project's `make setup` (make demo) installs its pinned engine over this one.
	$(PY) -m pip install -q --no-deps -e engine
	@# --durations: the slowest tests, named at the end (CI allows the whole run 90 minutes).
	$(PY) -m pytest -m "not s3 and not gcs and not azure and not dagster" --durations=25

test-s3: setup ## opt-in: the engine's s3a:// lake tests (local master, a standalone cluster, Spark Connect) against a local S3 server (642 MB of jars once)
	$(PY) -m pip install -q 'moto[server]==5.2.5'
	$(PY) -m pip install -q --no-deps -e engine
	$(PY) -m pytest -m s3 engine/tests/integration/test_s3_lake.py engine/tests/integration/test_s3_cluster.py \
		engine/tests/integration/test_s3_connect.py

test-gcs: setup ## opt-in: the engine's gs:// lake test against a local GCS emulator (built with Go; a 38 MB jar once)
	@command -v go >/dev/null || { echo "make test-gcs builds its GCS emulator with Go: install Go 1.24 or later (https://go.dev/doc/install)"; exit 1; }
	$(PY) -m pip install -q --no-deps -e engine
	$(PY) -m pytest -m gcs engine/tests/integration/test_gcs_lake.py

test-azure: setup ## opt-in: an abfss:// lake's snapshot files through pyarrow against Azurite (from npm once; Spark's ABFS side has no emulator)
	@command -v npm >/dev/null || { echo "make test-azure installs Azurite with npm: install Node.js 18 or later (https://nodejs.org)"; exit 1; }
	$(PY) -m pip install -q --no-deps -e engine
	$(PY) -m pytest -m azure engine/tests/integration/test_azure_store.py

test-dagster: setup ## opt-in: the generated Dagster assets and checks under Dagster's executor (installs Dagster)
	$(PY) -m pip install -q dagster==1.13.29
	$(PY) -m pip install -q --no-deps -e engine
	$(PY) -m pytest -m dagster tests/test_dagster.py

bench: setup ## measure snapshot, catch-up, dq and follow mode beside the peers (dlt, connectorx, the C client, Debezium)
	bash scripts/system-deps.sh maven
	cd scripts && $(PY) bench.py run

lint: setup ## lint the template's code and the engine, type-check the engine (make test does too)
	$(PY) -m ruff check hooks tests scripts engine
	cd engine && $(PY) -m mypy
	$(PY) -m pytest -q -p no:cacheprovider engine/tests/unit/test_import_rules.py

clean: ## stop the demo source and remove build/ and .venv/
	-[ -d $(BUILD)/demo-lakehouse ] && $(MAKE) -C $(BUILD)/demo-lakehouse source-down VENV=$(VENV)
	rm -rf $(BUILD) $(VENV)
