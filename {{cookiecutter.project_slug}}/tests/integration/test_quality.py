"""Great Expectations checks of silver against the source at one binlog position."""

from __future__ import annotations

import pytest

from {{ cookiecutter.package_name }}.engine.dq import run_checks
from {{ cookiecutter.package_name }}.engine.pipeline import Pipeline

from .helpers import demo_specs, run_source_sql

pytestmark = pytest.mark.integration


def test_checks_pass_when_silver_matches_the_source_even_after_new_source_changes(spark, config, mariadb):
    specs = demo_specs()
    pipeline = Pipeline(config, spark, "run-1")
    pipeline.ingest(specs)
    # Changes after the last ingest: the checks first bring silver to the counted position.
    run_source_sql(mariadb, config.source.database, "DELETE FROM customers WHERE customer_id < 30;")
    results = run_checks(config, spark, Pipeline(config, spark, "dq"), specs)
    assert [r.table for r in results] == [s.name for s in specs]
    assert all(r.success for r in results), [(r.table, [c for c in r.checks if not c.success]) for r in results]
    assert any("unique" in c.expectation for c in results[3].checks)  # composite key of order_items
    assert results[0].docs_path and results[0].docs_path.endswith(".html")


def test_a_silver_row_missing_from_the_count_fails_the_checks(spark, config):
    specs = [s for s in demo_specs() if s.name == "customers"]
    Pipeline(config, spark, "run-1").ingest(specs)
    spark.sql(f"DELETE FROM delta.`{config.table_path('silver', 'customers')}` WHERE customer_id = 42")
    (result,) = run_checks(config, spark, Pipeline(config, spark, "dq"), specs)
    assert not result.success
    failed = [c for c in result.checks if not c.success]
    assert len(failed) == 1 and "row_count" in failed[0].expectation
