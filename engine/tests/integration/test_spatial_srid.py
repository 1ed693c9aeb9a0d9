"""A spatial value keeps its SRID in the lake, from the snapshot and from the binlog.

SRID 0 (none) lands as standard WKB, any other SRID as EWKB (the type's SRID flag and the SRID
after it), so POINT(1 2) in SRID 4326 and in SRID 0 are two values in silver, and dq's value
check (which spells the source's value the same way in SQL) agrees with silver."""

from __future__ import annotations

import pytest

from lakehouse_engine.quality.dq import run_checks
from lakehouse_engine.quality.expectations import VALUES_CHECK
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.tables import TableSpec

from .helpers import assert_silver_equals_exact_source, run_source_sql, silver_rows_by_key

pytestmark = pytest.mark.integration

TABLE = "places"
# The bytes PostGIS gives for the same values: ST_AsBinary('POINT(1 2)') and
# ST_AsEWKB('SRID=4326;POINT(1 2)'), ST_AsEWKB('SRID=3857;POINT(1 2)').
WKB_POINT = bytes.fromhex("0101000000000000000000f03f0000000000000040")
EWKB_POINT_4326 = bytes.fromhex("0101000020e6100000000000000000f03f0000000000000040")
EWKB_POINT_3857 = bytes.fromhex("0101000020110f0000000000000000f03f0000000000000040")
POINT_4326 = "ST_GeomFromText('POINT(1 2)', 4326)"
POINT_0 = "ST_GeomFromText('POINT(1 2)')"
POINT_3857 = "ST_GeomFromText('POINT(1 2)', 3857)"
SQUARE_2154 = "ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 1,0 0))', 2154)"


def test_geometry_keeps_its_srid_through_the_snapshot_and_the_binlog(spark, config, mariadb):
    db = config.source.database
    spec = TableSpec(TABLE, TABLE)
    run_source_sql(mariadb, db, f"""
        CREATE TABLE {TABLE} (id INT NOT NULL PRIMARY KEY, g GEOMETRY NULL, p POINT NULL);
        INSERT INTO {TABLE} VALUES (1, {POINT_4326}, {POINT_0}), (2, {POINT_0}, {POINT_3857}),
                                   (3, {SQUARE_2154}, NULL), (4, {POINT_0}, {POINT_4326});
    """)
    Pipeline(config, spark, "run-1").ingest([spec])
    run_source_sql(mariadb, db, f"""
        INSERT INTO {TABLE} VALUES (11, {POINT_4326}, {POINT_0}), (12, {POINT_0}, {POINT_3857}),
                                   (13, {SQUARE_2154}, NULL);
        UPDATE {TABLE} SET g = {POINT_4326} WHERE id = 2;
        UPDATE {TABLE} SET p = {POINT_0} WHERE id = 4;
        DELETE FROM {TABLE} WHERE id = 3;
    """)
    (second,) = Pipeline(config, spark, "run-2").ingest([spec])
    assert second.snapshot_rows == 0 and second.binlog_rows > 0

    silver = {key: (row["g"], row["p"]) for (key,), row in silver_rows_by_key(spark, config, TABLE).items()}
    assert silver[1] == (EWKB_POINT_4326, WKB_POINT)  # snapshot
    assert silver[11] == (EWKB_POINT_4326, WKB_POINT)  # binlog insert
    assert silver[12] == (WKB_POINT, EWKB_POINT_3857)
    assert silver[2] == (EWKB_POINT_4326, EWKB_POINT_3857)  # an update of g changing its SRID alone
    assert silver[4] == (WKB_POINT, WKB_POINT)
    assert silver[13][0][:9] == bytes.fromhex("0103000020") + (2154).to_bytes(4, "little")
    assert 3 not in silver
    assert_silver_equals_exact_source(spark, config, TABLE)

    (result,) = run_checks(config, spark, [spec])
    (values,) = [c for c in result.checks if c.expectation == VALUES_CHECK]
    assert values.success and "not compared" not in values.observed, values.observed
