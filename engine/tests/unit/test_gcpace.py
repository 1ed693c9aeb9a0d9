"""The collector's pace: the bulk pace while a command runs, the caller's own before and after."""

from __future__ import annotations

import gc

import pytest

from lakehouse_engine import gcpace
from lakehouse_engine.run import cli


@pytest.fixture(autouse=True)
def default_pace():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_a_command_runs_at_the_bulk_pace_and_its_caller_gets_its_own_pace_back(monkeypatch):
    seen = []
    monkeypatch.setattr(cli, "_main", lambda argv, package, prog: seen.append(gc.get_threshold()) or 0)
    assert cli.main(["status"]) == 0
    assert seen == [gcpace.BULK] and gc.get_threshold() == (700, 10, 10)


def test_the_callers_pace_comes_back_when_the_command_raises():
    with pytest.raises(SystemExit), gcpace.bulk():
        assert gc.get_threshold() == gcpace.BULK
        raise SystemExit(2)
    assert gc.get_threshold() == (700, 10, 10)
