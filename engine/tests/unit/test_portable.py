"""Portable mode's pure parts: when it is on, the SQL its MERGE runs, Spark Connect addresses and
settings, and Delta's conflicts recognised by their error condition."""

from __future__ import annotations

import decimal

import pytest
from pyspark.sql import types as T

from lakehouse_engine.errors import ConfigError
from lakehouse_engine.sink import bronze, connect, portable, sqlmerge


class _ConnectLike:
    """Stands in for a Spark Connect session: portable mode goes by the session's module."""


_ConnectLike.__module__ = "pyspark.sql.connect.session"


class _ClassicLike:
    pass


_ClassicLike.__module__ = "pyspark.sql.session"


def test_portable_mode_is_on_for_spark_connect_sessions_and_when_forced():
    try:
        portable.force(False)
        assert portable.active(_ConnectLike())  # type: ignore[arg-type]
        assert not portable.active(_ClassicLike())  # type: ignore[arg-type]
        portable.force(True)
        assert portable.active(_ClassicLike())  # type: ignore[arg-type]
    finally:
        portable.force(False)


@pytest.mark.parametrize(("value", "dtype", "expected"), [
    (42, T.IntegerType(), "CAST(42 AS INT)"),
    (-9223372036854775808, T.LongType(), "CAST(-9223372036854775808 AS BIGINT)"),
    ("it's\\`x", T.StringType(), "CAST(X'697427735C6078' AS STRING)"),
    (decimal.Decimal("-12.50"), T.DecimalType(12, 2), "CAST('-12.50' AS DECIMAL(12,2))"),
])
def test_bound_literals_are_exact_and_need_no_escaping(value, dtype, expected):
    assert sqlmerge.literal(value, dtype) == expected


@pytest.mark.parametrize(("value", "dtype"), [
    (None, T.IntegerType()), (True, T.IntegerType()), (1.5, T.DoubleType()), (b"\x00", T.BinaryType()),
    ("2024-01-01", T.DateType()),
])
def test_a_bound_without_an_exact_literal_is_left_out(value, dtype):
    assert sqlmerge.literal(value, dtype) is None


def test_the_merge_condition_matches_keys_and_bounds_only_the_target():
    types = {"id": T.IntegerType(), "region": T.StringType(), "at": T.DateType()}
    on = sqlmerge.key_condition(["id", "region"], [("id", 3, 9), ("at", "a", "b")], types)
    assert on == "t.`id` = s.`id` AND t.`region` = s.`region` AND t.`id` BETWEEN CAST(3 AS INT) AND CAST(9 AS INT)"


def test_the_merge_statement_quotes_the_path_and_every_column():
    clauses = ["WHEN MATCHED THEN UPDATE SET " + sqlmerge.assignments(["a`b", "c"]),
               "WHEN NOT MATCHED THEN INSERT " + sqlmerge.insertion(["a`b", "c"])]
    text = sqlmerge.statement("/lake/silver/t`x", "v1", "t.`a``b` = s.`a``b`", clauses)
    assert text == ("MERGE INTO delta.`/lake/silver/t``x` AS t USING `v1` AS s ON t.`a``b` = s.`a``b` "
                    "WHEN MATCHED THEN UPDATE SET `a``b` = s.`a``b`, `c` = s.`c` "
                    "WHEN NOT MATCHED THEN INSERT (`a``b`, `c`) VALUES (s.`a``b`, s.`c`)")


@pytest.mark.parametrize(("url", "expected"), [
    ("sc://spark.example.com:443/;token=abc", ("spark.example.com", 443)),
    ("sc://127.0.0.1:15099", ("127.0.0.1", 15099)),
    ("sc://cluster", ("cluster", connect.DEFAULT_PORT)),
    ("sc://", ("localhost", connect.DEFAULT_PORT)),
])
def test_a_connect_url_gives_its_host_and_port(url, expected):
    assert connect.address(url) == expected


def test_a_connect_client_sets_session_settings_only():
    settings = connect.session_settings({"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "8",
                                         "spark.databricks.delta.optimizeWrite.enabled": "true",
                                         "spark.jars.packages": "x:y:1"})
    assert settings == {"spark.sql.shuffle.partitions": "8", "spark.databricks.delta.optimizeWrite.enabled": "true"}


def test_a_connect_session_gets_the_engines_session_settings_under_the_projects(monkeypatch):
    from lakehouse_engine.sink import spark

    given = {}
    monkeypatch.setattr(connect, "connect_session", lambda url, name, conf: given.update(conf))
    config = type("C", (), {"spark": type("S", (), {"master": "sc://h:1", "portable": False,
                                                    "conf": {"spark.sql.shuffle.partitions": "64"}})()})()
    spark.get_spark(config)  # type: ignore[arg-type]
    assert given["spark.sql.session.timeZone"] == "UTC"
    assert given["spark.databricks.delta.snapshotPartitions"] == "2"
    assert given["spark.sql.shuffle.partitions"] == "64"


def test_an_unreachable_connect_server_is_one_line_naming_the_setting():
    from lakehouse_engine.source.embedded import free_port

    with pytest.raises(ConfigError, match=r"cannot reach the Spark Connect server at sc://127\.0\.0\.1:\d+ .*"
                                          r"fix spark\.master in lakehouse_project\.yml"):
        connect.connect_session(f"sc://127.0.0.1:{free_port()}", "t", {})


class _ConnectConflict(Exception):
    def __init__(self, condition: str):
        super().__init__(f"[{condition}] ...")
        self.condition = condition

    def getCondition(self) -> str:  # noqa: N802 (pyspark's name)
        return self.condition


def test_a_delta_conflict_reaching_a_connect_client_is_a_commit_conflict():
    assert bronze.is_commit_conflict(_ConnectConflict("DELTA_CONCURRENT_APPEND"))
    assert bronze.is_commit_conflict(_ConnectConflict("DELTA_METADATA_CHANGED"))
    assert bronze.is_commit_conflict(_ConnectConflict("DELTA_CONCURRENT_APPEND.WITHOUT_HINT"))  # Delta 4.4's
    assert not bronze.is_commit_conflict(_ConnectConflict("DELTA_MISSING_DELTA_TABLE"))


def test_a_spark_connect_server_that_stopped_answering_is_one_line_naming_what_to_check():
    import grpc

    from lakehouse_engine import failures

    class Gone(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.UNAVAILABLE

        def __str__(self):
            return "<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = StatusCode.UNAVAILABLE ...>"

    error = failures.translate(Gone(), command="table orders", lake_root="/lake")
    assert error is not None and "\n" not in str(error)
    assert "the Spark Connect server stopped answering (UNAVAILABLE); check that it runs" in str(error)
    assert failures.translate(ValueError("x"), command="table orders", lake_root="/lake") is None


def test_a_call_pyspark_reraised_without_details_is_the_same_line():
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    from lakehouse_engine import failures

    raised = SparkConnectGrpcException(
        "<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = StatusCode.UNAVAILABLE\n\tdetails = "
        '"failed to connect to all addresses"')
    error = failures.translate(raised, command="table orders", lake_root="/lake")
    assert error is not None and "the Spark Connect server stopped answering (UNAVAILABLE)" in str(error)
    analysis = SparkConnectGrpcException("[TABLE_OR_VIEW_NOT_FOUND] no such table")
    assert "stopped answering" not in str(failures.translate(analysis, command="table orders", lake_root="/lake"))
