"""Every MySQL/MariaDB type, through both paths, on a server in a non-UTC time zone.

The same edge values are written once before the snapshot (read by SELECT) and again after it
(decoded from the binlog, as inserts and as update after-images). Silver must hold each value
exactly as spelled out below, the source's current state value by value, and, row for row, the
same values whichever path wrote them: a divergence cannot hide behind a comparison helper that
runs both sides through the same converter.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine.quality.arrowprint import term
from lakehouse_engine.quality.arrowsilver import silver_parts
from lakehouse_engine.quality.dq import LocalLog, compares_values, run_checks
from lakehouse_engine.quality.expectations import VALUES_CHECK
from lakehouse_engine.quality.fingerprint import spark_field, spark_term, sql_field, sql_term
from lakehouse_engine.quality.localdq import run_local_checks
from lakehouse_engine.quality.sourceview import PendingView
from lakehouse_engine.run.pipeline import Pipeline
from lakehouse_engine.source import embedded
from lakehouse_engine.source.connection import qualified, quote_ident
from lakehouse_engine.tables import TableSpec

from .helpers import assert_silver_equals_exact_source, silver_rows_by_key, table_schema

pytestmark = pytest.mark.integration

TABLE = "full_types"
ZONE = "+05:30"  # the server's zone during the test: TIMESTAMP literals below are in it
UTC_OFFSET = dt.timedelta(hours=5, minutes=30)


@dataclass(frozen=True)
class Wkb:
    """A spatial value whose expected silver form the server computes: ST_AsWKB of the WKT."""

    wkt: str


@dataclass(frozen=True)
class Edge:
    sql: str  # a literal SQL expression (test data, fixed here)
    expected: Any  # the value silver must hold


@dataclass(frozen=True)
class Kind:
    """One column type, created twice: ``<name>_n`` NULL and ``<name>_nn`` NOT NULL."""

    name: str
    sql_type: str
    edges: tuple[Edge, ...]


def e(sql: str, expected: Any) -> Edge:
    return Edge(sql, expected)


def f32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def instant(local: str) -> int:
    """UTC microseconds of a TIMESTAMP literal written in the server's zone."""
    naive = dt.datetime.fromisoformat(local)
    delta = naive - UTC_OFFSET - dt.datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def truncated(micros: int, fsp: int) -> int:
    """MariaDB truncates extra fractional digits (no TIME_ROUND_FRACTIONAL in sql_mode)."""
    return micros - micros % 10 ** (6 - fsp)


def time_text(negative: bool, hours: int, minutes: int, seconds: int, micros: int) -> str:
    sign = "-" if negative and (hours or minutes or seconds or micros) else ""  # no negative zero
    text = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
    return f"{text}.{micros:06d}" if micros else text


def time_kind(fsp: int) -> Kind:
    values = [(True, 838, 59, 59, 999_999), (False, 838, 59, 59, 999_999), (True, 0, 0, 1, 250_000),
              (True, 0, 0, 0, 500_000), (True, 1, 2, 3, 1), (False, 0, 0, 0, 0), (True, 0, 0, 59, 999_000)]
    edges = tuple(
        e(f"'{time_text(neg, h, m, s, us)}'", time_text(neg, h, m, s, truncated(us, fsp)))
        for neg, h, m, s, us in values
    )
    return Kind(f"time{fsp}", f"TIME({fsp})", edges)


def datetime_kind(fsp: int) -> Kind:
    def at(text: str) -> dt.datetime:
        value = dt.datetime.fromisoformat(text)
        return value.replace(microsecond=truncated(value.microsecond, fsp))

    return Kind(f"datetime{fsp}", f"DATETIME({fsp})", (
        e("'1000-01-01 00:00:00'", at("1000-01-01 00:00:00")),
        e("'9999-12-31 23:59:59.999999'", at("9999-12-31 23:59:59.999999")),
        e("'0000-00-00 00:00:00'", None),  # zero datetime: NULL on both paths
        e("'2024-00-10 10:00:00'", None),  # zero month
        e("'2024-02-29 12:34:56.123456'", at("2024-02-29 12:34:56.123456")),
    ))


def timestamp_kind(fsp: int) -> Kind:
    def at(text: str) -> int:
        return truncated(instant(text), fsp)

    return Kind(f"timestamp{fsp}", f"TIMESTAMP({fsp})", (
        e("'1970-01-01 05:30:01'", at("1970-01-01 05:30:01")),  # the first instant: 00:00:01 UTC
        e("'2038-01-19 08:44:07.999999'", at("2038-01-19 08:44:07.999999")),  # the last one
        e("'0000-00-00 00:00:00'", None),
        e("'2024-03-10 12:00:00.5'", at("2024-03-10 12:00:00.5")),
    ))


DEC65 = "12345678901234567890123456789012345.123456789012345678901234567891"
KINDS: tuple[Kind, ...] = (
    Kind("tiny", "TINYINT", (e("-128", -128), e("127", 127), e("0", 0))),
    Kind("utiny", "TINYINT UNSIGNED", (e("255", 255), e("0", 0))),
    Kind("small", "SMALLINT", (e("-32768", -32768), e("32767", 32767))),
    Kind("usmall", "SMALLINT UNSIGNED", (e("65535", 65535),)),
    Kind("medium", "MEDIUMINT", (e("-8388608", -8388608), e("8388607", 8388607))),
    Kind("umedium", "MEDIUMINT UNSIGNED", (e("16777215", 16777215),)),
    Kind("int", "INT", (e("-2147483648", -2147483648), e("2147483647", 2147483647))),
    Kind("uint", "INT UNSIGNED", (e("4294967295", 4294967295), e("0", 0))),
    Kind("big", "BIGINT", (e("-9223372036854775808", -(2**63)), e("9223372036854775807", 2**63 - 1))),
    Kind("ubig", "BIGINT UNSIGNED", (e("18446744073709551615", Decimal(2**64 - 1)), e("0", Decimal(0)),
                                     e("9223372036854775808", Decimal(2**63)))),
    Kind("dec", "DECIMAL(10,2)", (e("-99999999.99", Decimal("-99999999.99")), e("0", Decimal("0.00")),
                                  e("12.5", Decimal("12.50")))),
    Kind("dec38", "DECIMAL(38,10)", (e("'9999999999999999999999999999.9999999999'",
                                       Decimal("9999999999999999999999999999.9999999999")),
                                     e("'-0.0000000001'", Decimal("-0.0000000001")))),
    Kind("dec65", "DECIMAL(65,30)", (
        e(f"'{DEC65}'", DEC65),
        e("'-0.000000000000000000000000000001'", "-0.000000000000000000000000000001"),
        e("0", "0.000000000000000000000000000000"),
        e("'-99999999999999999999999999999999999.999999999999999999999999999999'",
          "-99999999999999999999999999999999999.999999999999999999999999999999"),
    )),
    Kind("dec65i", "DECIMAL(65,0)", (e("'1" + "0" * 64 + "'", "1" + "0" * 64), e("'-7'", "-7"))),
    Kind("float", "FLOAT", (
        e("3.14159265", f32(3.14159265)), e("1234567", 1234567.0), e("16777217", 16777216.0),
        e("-3.4028234e38", f32(-3.4028234e38)), e("1.17549435e-38", f32(1.17549435e-38)), e("0", 0.0),
        # Powers of two and their neighbours, where a logarithm's exponent guess is off by one;
        # float32 subnormals (normal once widened to DOUBLE).
        e("1", 1.0), e("0.5", 0.5), e("16777215", 16777215.0), e("1.4e-45", f32(1.4e-45)),
        e("-1.1754942e-38", f32(-1.1754942e-38)),
    )),
    Kind("float74", "FLOAT(7,4)", (e("3.14159265", f32(3.1416)), e("-123.45678", f32(-123.4568)))),
    Kind("double", "DOUBLE", (e("1.7976931348623157e308", 1.7976931348623157e308),
                              e("-2.2250738585072014e-308", -2.2250738585072014e-308),
                              e("0.1", 0.1), e("5e-324", 5e-324),
                              # Powers of two and their neighbours; the largest subnormal.
                              e("1", 1.0), e("0.5", 0.5), e("9007199254740991", 9007199254740991.0),
                              e("8.98846567431158e307", 2.0 ** 1023), e("2.2250738585072014e-308", 2.0 ** -1022),
                              e("2.225073858507201e-308", 2.225073858507201e-308),
                              e("0.9999999999999999", 0.9999999999999999),
                              e("-1.0000000000000002", -1.0000000000000002))),
    Kind("bit1", "BIT(1)", (e("b'1'", True), e("b'0'", False))),
    Kind("bit12", "BIT(12)", (e("b'101000000101'", b"\x0a\x05"), e("b'0'", b"\x00\x00"),
                              e("b'111111111111'", b"\x0f\xff"))),
    Kind("bit64", "BIT(64)", (e("b'" + "1" * 64 + "'", b"\xff" * 8), e("b'1'", b"\x00" * 7 + b"\x01"))),
    Kind("chr", "CHAR(5)", (e("'ñ😀'", "ñ😀"), e("''", ""), e("'ab  '", "ab"), e("'ÉÉÉÉÉ'", "ÉÉÉÉÉ"))),
    Kind("vchr", "VARCHAR(100)", (e("'😀 emoji 中文'", "😀 emoji 中文"), e("''", ""),
                                  e("'trailing  '", "trailing  "), e("'it''s \\\\ here'", "it's \\ here"))),
    Kind("ttext", "TINYTEXT", (e("REPEAT('€', 85)", "€" * 85), e("''", ""))),
    Kind("text", "TEXT", (e("REPEAT('é', 5000)", "é" * 5000), e("'a\\nb'", "a\nb"))),
    Kind("mtext", "MEDIUMTEXT", (e("'Ünïcödé'", "Ünïcödé"),)),
    Kind("ltext", "LONGTEXT", (e("REPEAT('😀', 3000)", "😀" * 3000),)),
    Kind("bin", "BINARY(4)", (e("x'6162'", b"ab\x00\x00"), e("x'00'", b"\x00" * 4), e("x'ffffffff'", b"\xff" * 4),
                              e("x'c3a4'", b"\xc3\xa4\x00\x00"), e("''", b"\x00" * 4))),
    Kind("vbin", "VARBINARY(8)", (e("x''", b""), e("x'00ff'", b"\x00\xff"), e("x'c3a4e282ac'", "ä€".encode()),
                                  e("x'0000'", b"\x00\x00"))),
    Kind("tblob", "TINYBLOB", (e("x'e282'", b"\xe2\x82"), e("x''", b""))),
    Kind("blob", "BLOB", (e("x'00010203ff'", b"\x00\x01\x02\x03\xff"), e("REPEAT(x'80', 3000)", b"\x80" * 3000))),
    Kind("mblob", "MEDIUMBLOB", (e("x'ff'", b"\xff"),)),
    Kind("lblob", "LONGBLOB", (e("x'0000'", b"\x00\x00"),)),
    Kind("enm", "ENUM('x','y','ä')", (e("'x'", "x"), e("'ä'", "ä"), e("'not a member'", ""))),
    Kind("st", "SET('a','b','ç')", (e("''", ""), e("'a,b,ç'", "a,b,ç"), e("'ç'", "ç"), e("'b,a'", "a,b"))),
    Kind("js", "JSON", (e("'{\"a\": [1, \"é\"], \"b\": null}'", '{"a": [1, "é"], "b": null}'), e("'[]'", "[]"),
                        e("'\"x\"'", '"x"'))),
    Kind("dte", "DATE", (e("'0000-00-00'", None), e("'1000-01-01'", dt.date(1000, 1, 1)),
                         e("'9999-12-31'", dt.date(9999, 12, 31)), e("'2024-02-29'", dt.date(2024, 2, 29)),
                         e("'2024-00-10'", None))),
    *(datetime_kind(fsp) for fsp in range(7)),
    *(timestamp_kind(fsp) for fsp in range(7)),
    *(time_kind(fsp) for fsp in range(7)),
    Kind("yr", "YEAR", (e("0", 0), e("1901", 1901), e("2155", 2155), e("'0'", 2000))),
    # An SRID other than 0 is kept as EWKB: PostGIS's ST_AsEWKB('SRID=4326;POINT(1 2)').
    Kind("geom", "GEOMETRY", (e("ST_GeomFromText('POINT(1 2)', 4326)",
                                bytes.fromhex("0101000020e6100000000000000000f03f0000000000000040")),
                              e("ST_GeomFromText('GEOMETRYCOLLECTION EMPTY')", Wkb("GEOMETRYCOLLECTION EMPTY")))),
    Kind("pnt", "POINT", (e("ST_GeomFromText('POINT(-1.5 2e10)')", Wkb("POINT(-1.5 2e10)")),)),
    Kind("line", "LINESTRING", (e("ST_GeomFromText('LINESTRING(0 0,1 1,2 2)')", Wkb("LINESTRING(0 0,1 1,2 2)")),)),
    Kind("poly", "POLYGON", (e("ST_GeomFromText('POLYGON((0 0,4 0,4 4,0 4,0 0),(1 1,2 1,2 2,1 1))')",
                               Wkb("POLYGON((0 0,4 0,4 4,0 4,0 0),(1 1,2 1,2 2,1 1))")),)),
    Kind("mpnt", "MULTIPOINT", (e("ST_GeomFromText('MULTIPOINT(0 0,1 1)')", Wkb("MULTIPOINT(0 0,1 1)")),)),
    Kind("mline", "MULTILINESTRING", (e("ST_GeomFromText('MULTILINESTRING((0 0,1 1),(2 2,3 3))')",
                                        Wkb("MULTILINESTRING((0 0,1 1),(2 2,3 3))")),)),
    Kind("mpoly", "MULTIPOLYGON", (e("ST_GeomFromText('MULTIPOLYGON(((0 0,1 0,1 1,0 0)),((2 2,3 2,3 3,2 2)))')",
                                     Wkb("MULTIPOLYGON(((0 0,1 0,1 1,0 0)),((2 2,3 2,3 3,2 2)))")),)),
    Kind("coll", "GEOMETRYCOLLECTION", (e("ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))')",
                                          Wkb("GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))")),)),
    # MariaDB's own types: raw bytes in the binlog, text in SELECT.
    Kind("uid", "UUID", (e("'123e4567-e89b-12d3-a456-426614174000'", "123e4567-e89b-12d3-a456-426614174000"),
                         e("'00000000-0000-1000-8000-000000000000'", "00000000-0000-1000-8000-000000000000"))),
    Kind("ip6", "INET6", (e("'::ffff:1.2.3.4'", "::ffff:1.2.3.4"), e("'fe80::1:0:0:0'", "fe80::1:0:0:0"),
                          e("'::'", "::"))),
    Kind("ip4", "INET4", (e("'10.0.0.0'", "10.0.0.0"), e("'255.255.255.255'", "255.255.255.255"))),
)

ROWS = max(len(k.edges) for k in KINDS) + 1  # the last row holds NULL in every nullable column
SNAPSHOT_IDS = range(1, ROWS + 1)  # read by the snapshot, never changed
UPDATED_IDS = range(101, 101 + ROWS)  # read by the snapshot, then updated through the binlog
BINLOG_IDS = range(1001, 1001 + ROWS)  # inserted after the snapshot: decoded from the binlog


def columns() -> Iterator[tuple[str, Kind, bool]]:
    for kind in KINDS:
        yield f"{kind.name}_n", kind, True
        yield f"{kind.name}_nn", kind, False


def edge(kind: Kind, row: int, nullable: bool) -> Edge | None:
    """The value of a column in value row ``row`` (0-based); None stands for NULL."""
    if row == ROWS - 1:
        return None if nullable else kind.edges[0]
    return kind.edges[row % len(kind.edges)]


def row_sql(row: int) -> list[str]:
    return [(v.sql if (v := edge(kind, row, nullable)) else "NULL") for _, kind, nullable in columns()]


def create_table_sql() -> str:
    definitions = [f"{quote_ident(name)} {kind.sql_type} {'NULL' if nullable else 'NOT NULL'}"
                   for name, kind, nullable in columns()]
    return f"CREATE TABLE {quote_ident(TABLE)} (`id` INT NOT NULL PRIMARY KEY, {', '.join(definitions)})"


def insert_sql(database: str, ids: Sequence[int], rows: Sequence[int]) -> tuple[str, list[int]]:
    names = ", ".join(["`id`", *(quote_ident(name) for name, _, _ in columns())])
    tuples = ", ".join(f"(%s, {', '.join(row_sql(row))})" for row in rows)
    return f"INSERT INTO {qualified(database, TABLE)} ({names}) VALUES {tuples}", list(ids)


def update_sql(database: str, key: int, row: int) -> tuple[str, list[int]]:
    sets = ", ".join(f"{quote_ident(name)} = {value}"
                     for (name, _, _), value in zip(columns(), row_sql(row), strict=True))
    return f"UPDATE {qualified(database, TABLE)} SET {sets} WHERE `id` = %s", [key]


def expected_row(row: int, wkb: dict[str, bytes]) -> dict[str, Any]:
    expected: dict[str, Any] = {}
    for name, kind, nullable in columns():
        value = edge(kind, row, nullable)
        wanted = None if value is None else value.expected
        expected[name] = wkb[wanted.wkt] if isinstance(wanted, Wkb) else wanted
    return expected


class SourceSession:
    """A root session on the source in the test's zone, in non-strict mode so that an invalid
    ENUM value stores the empty member; any other warning fails the test."""

    def __init__(self, server: embedded.EmbeddedServer, database: str):
        self._conn = embedded.root_connection(server, database)
        with self._conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'")
            cur.execute("SELECT @@session.time_zone")
            assert cur.fetchone()[0] == ZONE

    def run(self, statement: str, args: Any = None) -> list[tuple]:
        with self._conn.cursor() as cur:
            cur.execute(statement, args)
            rows = list(cur.fetchall())
            cur.execute("SHOW WARNINGS")
            unexpected = [w for w in cur.fetchall() if w[0] != "Note" and "'enm_" not in w[2]]
        assert not unexpected, unexpected
        return rows

    def close(self) -> None:
        self._conn.close()


@pytest.fixture
def source_in_a_non_utc_zone(mariadb: embedded.EmbeddedServer, config) -> Iterator[SourceSession]:
    """The server's global zone is +05:30 while the test runs (restored afterwards)."""
    with embedded.root_connection(mariadb) as conn, conn.cursor() as cur:
        cur.execute("SELECT @@global.time_zone")
        (previous,) = cur.fetchone()
        cur.execute("SET GLOBAL time_zone = %s", (ZONE,))
    session = SourceSession(mariadb, config.source.database)
    try:
        yield session
    finally:
        session.close()
        with embedded.root_connection(mariadb) as conn, conn.cursor() as cur:
            cur.execute("SET GLOBAL time_zone = %s", (previous,))


def wkb_of(session: SourceSession) -> dict[str, bytes]:
    """The server's standard WKB (no SRID) of every spatial edge value."""
    texts = {v.expected.wkt for k in KINDS for v in k.edges if isinstance(v.expected, Wkb)}
    return {wkt: bytes(session.run("SELECT ST_AsWKB(ST_GeomFromText(%s))", (wkt,))[0][0]) for wkt in texts}


def differences(actual: dict[str, Any], expected: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    return [(name, actual[name], want) for name, want in expected.items()
            if name != "id" and (actual[name] != want or type(actual[name]) is not type(want))]


def summary(problems: list[tuple]) -> str:
    """Which columns differ on which path, then the first differences (path, value row, compared
    with, column, silver, wanted), each shortened."""
    where = sorted({f"{column}: {path} vs {against}" for path, _, against, column, _, _ in problems})
    first = [repr(p)[:300] for p in problems[:6]]
    return f"{len(problems)} differences; " + "; ".join(where) + "\nfirst: " + "\n".join(first)


def ingest_every_type(spark, config, source: SourceSession) -> None:
    """The table with every type: snapshotted, then changed through the binlog (inserts, updates
    moving every row's values on by one, deletes) and caught up."""
    database = config.source.database
    spec = [TableSpec(TABLE, TABLE)]
    source.run(create_table_sql())
    source.run(*insert_sql(database, SNAPSHOT_IDS, range(ROWS)))
    source.run(*insert_sql(database, UPDATED_IDS, range(ROWS)))

    (first,) = Pipeline(config, spark, "run-1").ingest(spec)
    assert first.snapshot_rows == 2 * ROWS

    source.run(*insert_sql(database, BINLOG_IDS, range(ROWS)))
    for offset, key in enumerate(UPDATED_IDS[:-1]):
        source.run(*update_sql(database, key, (offset + 1) % ROWS))  # every row's values move on by one
    source.run(f"DELETE FROM {qualified(database, TABLE)} WHERE `id` = %s", (UPDATED_IDS[-1],))
    source.run(*insert_sql(database, [9999], [0]))
    source.run(f"DELETE FROM {qualified(database, TABLE)} WHERE `id` = %s", (9999,))

    (second,) = Pipeline(config, spark, "run-2").ingest(spec)
    assert second.snapshot_rows == 0, "the second run must read the binlog, not re-snapshot"
    assert second.binlog_rows > 0


def test_every_type_lands_identically_from_both_paths_and_fingerprints_alike_in_sql_and_spark(
    spark, config, source_in_a_non_utc_zone: SourceSession
):
    source = source_in_a_non_utc_zone
    ingest_every_type(spark, config, source)

    silver = silver_rows_by_key(spark, config, TABLE)
    wkb = wkb_of(source)
    # Value row r is held by SNAPSHOT_IDS[r] (snapshot), BINLOG_IDS[r] (binlog insert) and, for
    # r > 0, UPDATED_IDS[r - 1] (binlog update after-image).
    problems = []
    for row in range(ROWS):
        holders = {"snapshot": SNAPSHOT_IDS[row], "binlog insert": BINLOG_IDS[row]}
        if row:
            holders["binlog update"] = UPDATED_IDS[row - 1]
        expected = expected_row(row, wkb)
        read = silver[(SNAPSHOT_IDS[row],)]
        for path, key in holders.items():
            # 1. Each edge value as spelled out above, whichever path wrote it.
            problems += [(path, row, "expected", *d) for d in differences(silver[(key,)], expected)]
            # 2. The binlog paths against the snapshot, column by column, nothing spelled out.
            problems += [(path, row, "snapshot", *d) for d in differences(silver[(key,)], read)]
    assert not problems, summary(problems)
    # 3. Deleted rows are gone, and silver is the source's current state value by value.
    assert (UPDATED_IDS[-1],) not in silver and (9999,) not in silver
    assert_silver_equals_exact_source(spark, config, TABLE)
    # 4. One setup for both (it is the slow part): dq's fingerprints of every value.
    assert_fingerprints_alike(spark, config, source)


def assert_fingerprints_alike(spark, config, source: SourceSession) -> None:
    """dq's value reconciliation spells each value twice, in SQL and in Spark: every column of
    every row (snapshot and binlog paths, NULLs, zero dates, edge values) must give one field."""
    compared = table_schema(config, TABLE).columns
    frame = spark.read.format("delta").load(config.table_path("silver", TABLE))
    # Each column's term (what the fingerprint sums) and its spelling (what names a key).
    for sql, spark_side in ((sql_term, spark_term), (lambda c, _: sql_field(c), lambda c, _: spark_field(c))):
        fields = ", ".join(sql(c, i) for i, c in enumerate(compared))
        in_source = {row[0]: tuple(int(v) if isinstance(v, Decimal) else v for v in row[1:]) for row in source.run(
            f"SELECT `id`, {fields} FROM {qualified(config.source.database, TABLE)}")}
        in_silver = {row[0]: tuple(row[1:]) for row in
                     frame.select("id", *(spark_side(c, i) for i, c in enumerate(compared))).collect()}
        assert in_source.keys() == in_silver.keys()
        problems = [(key, col.name, mine, theirs) for key in sorted(in_source)
                    for col, mine, theirs in zip(compared, in_silver[key], in_source[key], strict=True)
                    if mine != theirs]
        assert not problems, f"{len(problems)} fields differ (key, column, silver, source): {problems[:8]}"
        if sql is sql_term:
            assert_arrow_terms_alike(config, compared, in_source)

    # The whole comparison, as dq makes it: nothing differs, nothing is left out; with Spark,
    # and without a JVM (silver read from its files, every column's terms computed over Arrow).
    (result,) = run_checks(config, spark, [TableSpec(TABLE, TABLE)])
    specs = [TableSpec(TABLE, TABLE)]
    with PendingView(config.source, specs, compares_values) as view:
        local = run_local_checks(config, specs, view)
    assert not local.for_spark, local.for_spark
    for checked in (result, *local.results):
        (values,) = [c for c in checked.checks if c.expectation == VALUES_CHECK]
        assert values.success and "hold the source's values" in values.observed, values.observed
        assert "not compared" not in values.observed


def assert_arrow_terms_alike(config, compared, in_source: dict[Any, tuple]) -> None:
    """Every column's term computed over Arrow (``arrowprint``, for ``dq`` without a JVM) from
    silver's files as the engine reads them, equal to the source's SQL term value by value."""
    path = config.table_path("silver", TABLE)
    rows = pa.concat_tables(silver_parts(path, LocalLog().newest_version(path), [c.name for c in compared]))
    terms = [term(c, i, rows.column(c.name)).tolist() for i, c in enumerate(compared)]
    in_arrow = {key: tuple(t[row] for t in terms) for row, key in enumerate(rows.column("id").to_pylist())}
    assert in_arrow.keys() == in_source.keys()
    problems = [(key, col.name, mine, theirs) for key in sorted(in_source)
                for col, mine, theirs in zip(compared, in_arrow[key], in_source[key], strict=True) if mine != theirs]
    assert not problems, f"{len(problems)} Arrow terms differ (key, column, arrow, source): {problems[:8]}"
