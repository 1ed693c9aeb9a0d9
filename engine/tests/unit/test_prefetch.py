"""The binlog reader process: order, errors, early stops (a real child process, no mocks)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

from lakehouse_engine.cdc.prefetch import ProcessPrefetcher
from lakehouse_engine.errors import FatalError, SourceUnavailableError

TESTS = Path(__file__).resolve().parents[1]  # engine/tests: unit.test_prefetch imports from there


def numbers(count: int, fail_after: int | None = None):
    for n in range(count):
        if n == fail_after:
            raise FatalError(f"broken at {n}", table="orders")
        yield n


def own_niceness():
    yield os.nice(0)


def endless_with_pid(path: str):
    with open(path, "w") as out:
        out.write(str(os.getpid()))
    n = 0
    while True:
        yield n
        n += 1


def collector_pace():
    import gc

    yield gc.get_threshold()


def dies():
    os._exit(3)
    yield 0  # pragma: no cover


def weight_of(n: int) -> int:
    return n


def blobs_counted(path: str, count: int, size: int):
    """``count`` byte strings of ``size`` bytes, each counted in ``path`` as it is produced.

    The count is written aside and renamed over ``path``, so the test never reads a file that is
    truncated but not yet written (it did, once in a CI run).
    """
    for n in range(count):
        aside = f"{path}.{n}"
        with open(aside, "w") as out:
            out.write(str(n + 1))
        os.replace(aside, path)
        yield bytes([n % 256]) * size


def _produced(path: Path, at_least: int, timeout_s: float = 30) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and int(path.read_text()) >= at_least:
            break
        time.sleep(0.05)
    time.sleep(1.0)  # time to run further, were it not held back
    return int(path.read_text())


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


def test_a_reader_process_that_dies_silently_is_a_retriable_error_not_a_hang():
    with pytest.raises(SourceUnavailableError, match="exit code 3"):
        list(ProcessPrefetcher(dies, poll_s=0.2))


def test_the_reader_process_ends_when_its_parent_is_killed(tmp_path):
    # kill -9 of the parent: the reader must not block forever on a queue nobody reads.
    pid_file = tmp_path / "pid"
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from functools import partial\n"
         "from unit.test_prefetch import endless_with_pid\n"
         "from lakehouse_engine.cdc.prefetch import ProcessPrefetcher\n"
         f"reader = iter(ProcessPrefetcher(partial(endless_with_pid, {str(pid_file)!r}), depth=1))\n"
         "next(reader)\n"
         "time.sleep(60)\n"],
        cwd=TESTS)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (pid_file.exists() and pid_file.read_text()):
        time.sleep(0.05)
    reader = int(pid_file.read_text())
    time.sleep(0.5)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(reader):
        time.sleep(0.05)
    assert not _alive(reader)


def _alive(pid: int) -> bool:
    """Running, not a zombie (a zombie has ended; only its exit status waits to be read)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_reader_can_run_at_a_lower_cpu_priority_than_its_consumer():
    assert list(ProcessPrefetcher(own_niceness, niceness=5)) == [min(os.nice(0) + 5, 19)]
    assert list(ProcessPrefetcher(own_niceness)) == [os.nice(0)]


def test_the_reader_process_runs_the_collector_at_the_bulk_pace():
    from lakehouse_engine import gcpace

    assert list(ProcessPrefetcher(collector_pace)) == [gcpace.BULK]


def test_a_byte_budget_passes_every_item_in_order_even_a_group_bigger_than_the_whole_budget(tmp_path):
    reader = ProcessPrefetcher(partial(blobs_counted, str(tmp_path / "n"), 6, 3 << 20), group_weight=1,
                               max_bytes=1 << 20)

    assert [len(b) for b in reader] == [3 << 20] * 6


def test_a_byte_budget_bounds_how_far_the_reader_runs_ahead_of_its_consumer(tmp_path):
    progress = tmp_path / "n"
    reader = ProcessPrefetcher(partial(blobs_counted, str(progress), 100, 600 << 10), group_weight=1,
                               max_bytes=2 << 20)
    items = iter(reader)
    assert len(next(items)) == 600 << 10
    # Two groups of 600 KiB fill the 2 MiB budget; the third waits for room, the fourth is not made.
    assert _produced(progress, 3) <= 4
    assert sum(1 for _ in items) == 99


def test_a_started_reader_reads_before_iteration_and_close_stops_it_unread(tmp_path):
    pid_file = tmp_path / "pid"
    reader = ProcessPrefetcher(partial(endless_with_pid, str(pid_file)))
    reader.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (pid_file.exists() and pid_file.read_text()):
        time.sleep(0.05)
    pid = int(pid_file.read_text())  # it ran, and nobody iterated
    reader.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid)
