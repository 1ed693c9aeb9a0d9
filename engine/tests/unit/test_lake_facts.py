"""What a silver MERGE learns of its batch in memory, and what a commit file says of itself."""

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
from pyspark.sql import types as T

from lakehouse_engine.sink.log.commitfile import parse_commit
from lakehouse_engine.sink.silverbatch import arrow_facts, held


def _schema(**types: T.DataType) -> T.StructType:
    return T.StructType([T.StructField(name, t) for name, t in types.items()])


def test_numeric_and_date_keys_are_bounded_by_their_min_and_max():
    rows = pa.table({"id": pa.array([7, 3, 11], pa.int64()),
                     "day": pa.array([dt.date(2024, 5, 1), dt.date(2023, 1, 2), dt.date(2024, 1, 1)]),
                     "amount": pa.array([Decimal("2"), Decimal("18446744073709551615"), Decimal("5")],
                                        pa.decimal128(20, 0)),
                     "_op": ["u", "d", "c"]})
    schema = _schema(id=T.LongType(), day=T.DateType(), amount=T.DecimalType(20, 0), _op=T.StringType())

    facts = arrow_facts(rows, ["id", "day", "amount"], schema)

    assert facts.rows == 3 and not facts.snapshot_only
    assert facts.key_bounds == (("id", 3, 11), ("day", dt.date(2023, 1, 2), dt.date(2024, 5, 1)),
                                ("amount", Decimal("2"), Decimal("18446744073709551615")))


def test_string_float_and_timestamp_keys_get_no_bounds():
    # Strings: MariaDB collations and Delta's truncated string statistics; floats: NaN;
    # timestamps: Delta keeps their statistics in milliseconds.
    rows = pa.table({"code": ["b", "A"], "ratio": [0.5, float("nan")],
                     "at": pa.array([dt.datetime(2024, 1, 1, 0, 0, 0, 1)] * 2, pa.timestamp("us", "UTC")),
                     "_op": ["r", "r"]})
    schema = _schema(code=T.StringType(), ratio=T.DoubleType(), at=T.TimestampType(), _op=T.StringType())

    facts = arrow_facts(rows, ["code", "ratio", "at"], schema)

    assert facts.key_bounds == () and facts.snapshot_only and facts.rows == 2


def test_an_empty_batch_has_no_rows_and_no_bounds():
    rows = pa.table({"id": pa.array([], pa.int32()), "_op": pa.array([], pa.string())})

    facts = arrow_facts(rows, ["id"], _schema(id=T.IntegerType(), _op=T.StringType()))

    assert (facts.rows, facts.key_bounds) == (0, ())


def test_a_commit_file_gives_its_operation_metadata_and_transaction_ids():
    lines = [json.dumps({"commitInfo": {"operation": "WRITE", "userMetadata": '{"batch": 4}'}}),
             json.dumps({"txn": {"appId": "bronze:t", "version": 4, "lastUpdated": 1}}),
             json.dumps({"add": {"path": "a.parquet", "stats": '{"txn": "not an action"}'}})]

    commit = parse_commit(12, lines)

    assert (commit.version, commit.operation, commit.user_metadata) == (12, "WRITE", '{"batch": 4}')
    assert commit.txns == {"bronze:t": 4}


def test_a_commit_without_commit_info_or_transaction_has_neither():
    commit = parse_commit(0, [json.dumps({"protocol": {"minReaderVersion": 1}})])

    assert (commit.operation, commit.user_metadata, dict(commit.txns)) == (None, None, {})


def _batch(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


def test_silver_takes_batches_from_memory_only_when_it_holds_every_batch_to_apply():
    recent = {3: _batch(1, 2), 4: _batch(3), 5: _batch(4, 5)}

    assert held(recent, 2, 5).column("id").to_pylist() == [1, 2, 3, 4, 5]  # in batch order
    assert held(recent, 3, 4).column("id").to_pylist() == [3]
    assert held(recent, 1, 5) is None  # batch 2 is not held: read bronze
    assert held(recent, 2, 6) is None
    assert held({}, 2, 3) is None and held(None, 2, 3) is None
