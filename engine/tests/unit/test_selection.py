"""--select / --exclude with names, shell wildcards and tags: every selector must match."""

import pytest

from lakehouse_engine.config.selection import select_tables
from lakehouse_engine.errors import ConfigError
from lakehouse_engine.tables import TableSpec


def specs() -> dict[str, TableSpec]:
    return {
        "customers": TableSpec("customers", "customers", tags=("crm",)),
        "order_items": TableSpec("order_items", "order_items", tags=("finance",)),
        "orders": TableSpec("orders", "orders", tags=("finance", "hourly")),
        "refunds": TableSpec("refunds", "refunds", tags=("finance_eu",)),
    }


def names(*args, **kwargs) -> list[str]:
    return [s.name for s in select_tables(specs(), *args, **kwargs)]


def test_wildcards_pick_every_matching_table():
    assert names(["order*"]) == ["order_items", "orders"]
    assert names(["*s"]) == ["customers", "order_items", "orders", "refunds"]
    assert names(["order?"]) == ["orders"]
    assert names(["[cr]*"]) == ["customers", "refunds"]


def test_wildcards_in_tags_and_in_exclude():
    assert names(["tag:finance*"]) == ["order_items", "orders", "refunds"]
    assert names(["tag:finance"], ["*items"]) == ["orders"]
    assert names([], ["order*", "tag:crm"]) == ["refunds"]


def test_names_match_exactly_and_case_sensitively():
    assert names(["orders"]) == ["orders"]
    with pytest.raises(ConfigError, match="no table named 'Orders'"):
        names(["Orders"])


def test_nothing_selected_means_every_table():
    assert names() == ["customers", "order_items", "orders", "refunds"]


@pytest.mark.parametrize(("selector", "message"), [
    ("nope", r"no table named 'nope' \(known: customers, order_items, orders, refunds\); add it with"),
    ("zz*", r"the pattern 'zz\*' matches no table \(known: customers, "),
    ("tag:nightly", r"no table has a tag matching 'nightly' \(tags in use: crm, finance, finance_eu, hourly\)"),
])
def test_a_selector_matching_nothing_is_a_configuration_error(selector, message):
    with pytest.raises(ConfigError, match=message) as raised:
        names([selector])
    assert raised.value.exit_code == 2
    with pytest.raises(ConfigError, match=message):  # in --exclude too: a typo there would exclude nothing
        names([], [selector])


def test_excluding_everything_selected_is_an_error():
    with pytest.raises(ConfigError, match="the selection matches no table"):
        names(["orders"], ["ord*"])
