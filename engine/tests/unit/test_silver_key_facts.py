"""Silver's key facts taken from the value sums where they equal the source's, and the Spark
setting the fingerprint passes run under, handed back as it was."""

from __future__ import annotations

import pytest

from lakehouse_engine.quality.silverpass import KeyFacts, SilverPass
from lakehouse_engine.quality.unchecked import ANSI, unchecked_arithmetic

KEY = ("order_id", "line_no")


def test_equal_sums_give_their_rows_plus_the_changed_keys_rows_and_only_those_rows_key_problems():
    changed = KeyFacts(3, 2, {"order_id": 0, "line_no": 1}, ("order_id=7, line_no=1: 2 rows",))
    facts = SilverPass({0: (10, 99), 4: (5, 7)}, changed).facts_where_equal(KEY)
    assert facts == KeyFacts(18, 2, {"order_id": 0, "line_no": 1}, ("order_id=7, line_no=1: 2 rows",))
    clean = SilverPass({0: (10, 99)}, KeyFacts(0, 0, {})).facts_where_equal(KEY)
    assert clean == KeyFacts(10, 0, {"order_id": 0, "line_no": 0})


def test_no_facts_are_derived_where_they_were_not_counted_or_rows_lie_in_no_bucket():
    assert SilverPass({0: (10, 99)}, None).facts_where_equal(KEY) is None
    assert SilverPass({0: (10, 99)}, KeyFacts(0, 0, {}), unbucketed_rows=1).facts_where_equal(KEY) is None


class Conf:
    """A SparkSession's ``conf`` as the context manager uses it."""

    def __init__(self, values: dict[str, str]):
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class Session:
    def __init__(self, values: dict[str, str]):
        self.conf = Conf(values)


@pytest.mark.parametrize("before", [{ANSI: "true"}, {ANSI: "false"}, {}])
def test_the_sessions_own_ansi_setting_comes_back_after_the_block_also_when_it_raises(before):
    session = Session(dict(before))
    with unchecked_arithmetic(session):  # type: ignore[arg-type]
        assert session.conf.values[ANSI] == "false"
        with unchecked_arithmetic(session):  # type: ignore[arg-type]
            pass
        assert session.conf.values[ANSI] == "false"
    assert session.conf.values == before
    with pytest.raises(RuntimeError), unchecked_arithmetic(session):  # type: ignore[arg-type]
        raise RuntimeError("a failed job")
    assert session.conf.values == before


def test_a_spark_connect_session_keeps_its_checks_on():
    connect = type("SparkSession", (Session,), {"__module__": "pyspark.sql.connect.session"})({ANSI: "true"})
    with unchecked_arithmetic(connect):  # type: ignore[arg-type]
        assert connect.conf.values[ANSI] == "true"
