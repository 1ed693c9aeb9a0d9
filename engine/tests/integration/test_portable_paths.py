"""The portable paths (public Spark and Delta APIs only, as on Spark Connect) forced on the test
session, through scenarios written for the default paths: every demo table across two runs
(integer, text and composite keys), schema changes (which portable mode applies by rewriting the
rows; a column name Delta refuses switches column mapping on first) and SCD type 2 history. Each
must end exactly as it does on the default paths."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lakehouse_engine.sink import portable

from . import test_column_names, test_end_to_end, test_history, test_schema_evolution

pytestmark = pytest.mark.integration


@pytest.fixture
def portable_mode() -> Iterator[None]:
    portable.force(True)
    yield
    portable.force(False)


def test_every_demo_table_through_the_portable_paths_equals_the_source(spark, config, mariadb, portable_mode):
    test_end_to_end.test_changes_between_two_runs_leave_silver_equal_to_the_source_for_every_table(
        spark, config, mariadb)


def test_schema_changes_through_the_portable_paths_reach_bronze_and_silver(
        spark, config, mariadb, tmp_path, portable_mode):
    test_schema_evolution.test_added_renamed_widened_and_dropped_columns_reach_bronze_and_silver_at_their_position(
        spark, config, mariadb, tmp_path)


def test_history_through_the_portable_paths_keeps_every_version(spark, config, mariadb, portable_mode):
    test_history.test_history_keeps_every_version_with_exact_intervals_and_a_rebuild_makes_the_same(
        spark, config, mariadb)


def test_a_column_name_delta_refuses_through_the_portable_paths_switches_column_mapping_on(
        spark, config, mariadb, portable_mode):
    test_column_names.test_a_column_added_under_a_name_delta_refuses_switches_column_mapping_on(spark, config, mariadb)
