"""A local master's snapshot tasks run in worker processes of the driver's own Python: the same
runs of chunks Spark would give its tasks, and a failure that reads as a Spark task's does."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from lakehouse_engine import errors
from lakehouse_engine.config.project import SourceProfile
from lakehouse_engine.sink import shipping
from lakehouse_engine.snapshot import localtasks
from lakehouse_engine.snapshot.chunking import Chunk
from lakehouse_engine.snapshot.chunktask import ChunkTask
from lakehouse_engine.snapshot.localtasks import LocalTasks, TaskFailed, driver_python_runs_tasks, runs_of
from lakehouse_engine.snapshot.reader import task_error
from lakehouse_engine.source.introspect import ColumnInfo, TableSchema


@pytest.mark.parametrize(("count", "slices"), [(10, 4), (39, 4), (3, 3), (1, 1), (7, 2)])
def test_tasks_are_cut_into_runs_of_consecutive_chunks_as_spark_slices_a_list(count, slices):
    runs = runs_of(list(range(count)), slices)  # type: ignore[arg-type]
    assert len(runs) == slices
    assert [t for run in runs for t in run] == list(range(count))  # each once, in order
    # Spark's ParallelCollectionRDD.slice: run i holds positions [i*n/slices, (i+1)*n/slices).
    assert [len(run) for run in runs] == [(i + 1) * count // slices - i * count // slices for i in range(slices)]


def test_only_a_local_master_running_the_drivers_python_reads_in_the_drivers_workers(tmp_path):
    other = str(tmp_path / "python3")

    def setting(python: str) -> dict[str, str]:
        return {shipping.PYTHON_SETTING: python}

    assert driver_python_runs_tasks("local[*]", {}, None)
    assert driver_python_runs_tasks("local", {}, sys.executable)
    assert driver_python_runs_tasks("local[2]", setting(sys.executable), other)  # the setting wins over the environment
    assert not driver_python_runs_tasks("local[2]", setting(other), None)
    assert not driver_python_runs_tasks("local[2]", {}, other)
    # Another venv's python links to the same base interpreter, but it is another environment.
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(os.path.realpath(sys.executable))
    assert not driver_python_runs_tasks("local[2]", setting(str(venv / "python")), None)
    assert driver_python_runs_tasks("local[2]", setting(os.path.join(os.path.dirname(sys.executable), "python3")), None)
    for master in ("local-cluster[1,1,1024]", "spark://h:7077", "yarn", "k8s://https://k:443", "sc://h:15002"):
        assert not driver_python_runs_tasks(master, {}, None)


def _unreachable_task(index: int) -> ChunkTask:
    table = TableSchema("db", "t", (ColumnInfo("id", "int", "int(11)", False),), ("id",))
    # Port 1 on loopback refuses at once: the worker's connect fails as a lost source's would.
    return ChunkTask(SourceProfile("127.0.0.1", 1, "u", "p", "db", connect_timeout=2), table,
                     Chunk(index, None, None), "run1", 1, "/nonexistent")


def test_a_failed_worker_run_comes_back_as_the_error_a_spark_task_reports_and_the_workers_stop():
    workers = LocalTasks(2)
    with pytest.raises(TaskFailed) as failed:
        workers.run(runs_of([_unreachable_task(0), _unreachable_task(1)], 2))
    assert str(failed.value).startswith("Traceback (most recent call last):")  # the worker's, as text
    error = task_error(failed.value, "t")
    # The engine error the worker raised, as itself, with its one line naming the fix.
    assert type(error) is errors.SourceUnavailableError
    assert "\n" not in str(error) and "127.0.0.1:1" in str(error) and "run again" in str(error)
    workers.close()
    assert workers._pool is None


def _killed(run):
    os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer ends a worker


def test_a_worker_that_dies_fails_the_batch_with_one_line_instead_of_hanging_it(monkeypatch):
    monkeypatch.setattr(localtasks, "_stage_run", _killed)  # pickled by name: the workers run _killed
    workers = LocalTasks(1)
    with pytest.raises(TaskFailed) as failed:
        workers.run([[_unreachable_task(0)]])
    error = task_error(failed.value, "t")
    assert isinstance(error, errors.SourceUnavailableError) and localtasks.WORKER_LOST in str(error)
    assert "\n" not in str(error) and "run again" in str(error)
    assert workers._pool is None  # the next batch starts new workers


def test_stopping_the_workers_lets_the_next_snapshot_start_new_ones():
    localtasks._shared = LocalTasks(1)
    localtasks.stop_workers()
    assert localtasks._shared is None
