"""The binlog reader process: order, errors, early stops (a real child process, no mocks)."""

from __future__ import annotations

import os
import time
from functools import partial

import pytest

from {{ cookiecutter.package_name }}.engine.errors import FatalError
from {{ cookiecutter.package_name }}.engine.prefetch import ProcessPrefetcher


def numbers(count: int, fail_after: int | None = None):
    for n in range(count):
        if n == fail_after:
            raise FatalError(f"broken at {n}", table="orders")
        yield n


def endless_with_pid(path: str):
    with open(path, "w") as out:
        out.write(str(os.getpid()))
    n = 0
    while True:
        yield n
        n += 1


def dies():
    os._exit(3)
    yield 0  # pragma: no cover


def weight_of(n: int) -> int:
    return n


def test_items_arrive_in_order_across_groups():
    reader = ProcessPrefetcher(partial(numbers, 5000), group_weight=7, depth=2)

    assert list(reader) == list(range(5000))


def test_items_read_before_an_error_arrive_and_the_error_keeps_its_class_message_and_table():
    seen = []
    with pytest.raises(FatalError, match="broken at 25") as raised:
        for n in ProcessPrefetcher(partial(numbers, 100, 25), group_weight=1000):
            seen.append(n)

    assert seen == list(range(25))  # the partial group before the error is not lost
    assert raised.value.table == "orders"


def test_groups_are_cut_by_weight():
    reader = ProcessPrefetcher(partial(numbers, 10), group_weight=10, weight=weight_of)

    assert list(reader) == list(range(10))


def test_a_consumer_that_stops_early_stops_the_reader_process(tmp_path):
    pid_file = tmp_path / "pid"
    for n in ProcessPrefetcher(partial(endless_with_pid, str(pid_file))):
        if n == 100:
            break
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}")


def test_a_reader_process_that_dies_silently_is_an_error_not_a_hang():
    with pytest.raises(RuntimeError, match="exit code 3"):
        list(ProcessPrefetcher(dies, poll_s=0.2))
