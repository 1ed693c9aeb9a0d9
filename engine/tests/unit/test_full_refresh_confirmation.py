"""``--full-refresh`` replaces bronze's history: asked on a terminal, refused elsewhere unless
``--yes`` confirms it, in one line naming the tables and the fix."""

from __future__ import annotations

import io

import pytest

from lakehouse_engine.errors import ConfigError
from lakehouse_engine.run.commands.ingest import confirm_full_refresh
from lakehouse_engine.tables import TableSpec

SPECS = [TableSpec("orders", "orders"), TableSpec("customers", "customers")]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_yes_confirms_without_asking(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # no terminal, nothing to read
    confirm_full_refresh(SPECS, yes=True)


def test_without_a_terminal_it_is_refused_naming_the_tables_and_yes(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(ConfigError) as refused:
        confirm_full_refresh(SPECS, yes=False)
    assert str(refused.value) == ("--full-refresh re-snapshots orders, customers and replaces bronze's history; "
                                  "add --yes to confirm (make ingest ... FULL_REFRESH=1 YES=1)")
    assert refused.value.exit_code == 2


@pytest.mark.parametrize(("answer", "goes_on"), [("yes\n", True), ("y\n", False), ("\n", False)])
def test_a_terminal_is_asked_and_only_yes_goes_on(monkeypatch, capsys, answer, goes_on):
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    if goes_on:
        confirm_full_refresh(SPECS, yes=False)
    else:
        with pytest.raises(ConfigError, match="not refreshed: orders, customers left as they are"):
            confirm_full_refresh(SPECS, yes=False)
    assert "type yes to go on" in capsys.readouterr().out
