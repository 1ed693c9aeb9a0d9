"""latin1 text lands as the server reads it, from the snapshot and from the binlog.

The server's latin1 is cp1252 with the five bytes cp1252 leaves undefined (0x81, 0x8D, 0x8F,
0x90, 0x9D) read as the C1 controls U+0081...; SELECT returns them, so the binlog path must too.
Every byte value is written to CHAR, VARCHAR and TEXT columns, and ENUM/SET members outside
ASCII (one of them, 'Ã©', is valid UTF-8 when its latin1 bytes are read as such), in two tables:
one of types the engine's own decoder reads, one with a TIME column, which sends every row of
the table through python-mysql-replication."""

from __future__ import annotations

import pytest

from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.source import embedded
from lakehouse_engine.tables import TableSpec

from .helpers import assert_silver_equals_exact_source, silver_rows_by_key

pytestmark = pytest.mark.integration

LATIN1 = "CHARACTER SET latin1 COLLATE latin1_swedish_ci"
MEMBERS = ("é", "Ã©", "€", "ÿ")  # as the server reads them; stored as latin1 bytes
COLUMNS = (f"c CHAR(1) {LATIN1} NULL, v VARCHAR(300) {LATIN1} NULL, t TEXT {LATIN1} NULL, "
           f"e ENUM('é','Ã©','€','ÿ') {LATIN1} NULL, s SET('é','Ã©','€','ÿ') {LATIN1} NULL")
TABLES = {"latin1_fast": "", "latin1_library": ", tm TIME NULL"}  # TIME: the library decodes the table
C1_BYTES = (0x81, 0x8D, 0x8F, 0x90, 0x9D)
SNAPSHOT_KEYS = range(256)  # key b holds byte b, read by the snapshot and then updated
BINLOG_KEYS = range(1000, 1256)  # key 1000 + b holds byte b, inserted after the snapshot
EVERY_BYTE = bytes(range(256))


def row(key: int, byte: int, library: bool) -> tuple:
    """The row of ``key`` holding ``byte``: alone, between ASCII letters, and with every other byte."""
    one = bytes([byte])
    values = (key, one, b"a" + one + b"z", EVERY_BYTE[byte:] + EVERY_BYTE[:byte],
              MEMBERS[byte % len(MEMBERS)], ",".join(MEMBERS[: byte % (len(MEMBERS) + 1)]))
    return (*values, f"00:00:{byte % 60:02d}") if library else values


def write(mariadb, database: str, table: str, rows: list[tuple], replace: bool = False) -> None:
    """Rows whose text bytes are bound as binary strings: the latin1 columns store them as they are."""
    marks = ", ".join(["%s"] * len(rows[0]))
    verb = "REPLACE" if replace else "INSERT"
    with embedded.root_connection(mariadb, database) as conn, conn.cursor() as cur:
        cur.executemany(f"{verb} INTO `{table}` VALUES ({marks})", rows)


def test_latin1_bytes_land_as_the_server_reads_them_from_both_paths(spark, config, mariadb):
    database = config.source.database
    specs = [TableSpec(name, name) for name in TABLES]
    with embedded.root_connection(mariadb, database) as conn, conn.cursor() as cur:
        for name, extra in TABLES.items():
            cur.execute(f"CREATE TABLE `{name}` (id INT NOT NULL PRIMARY KEY, {COLUMNS}{extra})")
    for name in TABLES:
        write(mariadb, database, name, [row(k, k, name == "latin1_library") for k in SNAPSHOT_KEYS])

    first = Pipeline(config, spark, "run-1").ingest(specs)
    assert [r.status for r in first] == ["success", "success"], [r.message for r in first]

    for name in TABLES:
        library = name == "latin1_library"
        write(mariadb, database, name, [row(1000 + b, b, library) for b in range(256)])
        # every snapshot row takes another byte (an update whose before and after images differ)
        write(mariadb, database, name, [row(k, (k + 1) % 256, library) for k in SNAPSHOT_KEYS], replace=True)
        with embedded.root_connection(mariadb, database) as conn, conn.cursor() as cur:
            cur.execute(f"UPDATE `{name}` SET v = CONCAT(v, _latin1 x'8d') WHERE id < 10")
            cur.execute(f"DELETE FROM `{name}` WHERE id IN (200, 1200)")

    second = Pipeline(config, spark, "run-2").ingest(specs)
    assert [r.status for r in second] == ["success", "success"], [r.message for r in second]
    assert all(r.snapshot_rows == 0 and r.binlog_rows > 0 for r in second)

    for name in TABLES:
        assert_silver_equals_exact_source(spark, config, name)  # value for value, as SELECT reads them
        silver = silver_rows_by_key(spark, config, name)
        for byte in C1_BYTES:  # spelled out: the server's characters, not a shared converter's
            assert silver[(1000 + byte,)]["v"] == f"a{chr(byte)}z"
            assert silver[(byte - 1,)]["c"] == chr(byte)
        assert silver[(1000 + 0x80,)]["v"] == "a€z"
        assert silver[(1001,)]["e"] == "Ã©" and silver[(1003,)]["s"] == "é,Ã©,€"
