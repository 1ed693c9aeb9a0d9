"""A local master's snapshot tasks in worker processes of the driver's own, not a Spark job.

On ``local[N]`` Spark runs a Python task in a pyspark worker on this host anyway, so a Spark
job buys the snapshot nothing a process pool does not, and costs it: each task's worker re-reads
pyspark's zip archives and collects garbage (about 0.15 s of CPU a task), and the JVM schedules
the job and carries every result through py4j. :class:`LocalTasks` runs the same tasks
(:func:`.chunktask.stage_chunks` over the same runs of consecutive chunks) in ``N`` processes
spawned from the driver's Python once per process and kept for its later snapshots, as Spark
keeps its workers (spawned: the driver has threads, py4j's among them, that a fork would copy
half-way).
Measured on make bench's 2M-row table (2-core VM, quiet, alternating): see ``engine/CHANGELOG.md``.

Only where the executors' Python is the driver's (:func:`runs_locally`): a project that points
``spark.pyspark.python`` or ``PYSPARK_PYTHON`` elsewhere, a cluster, ``local-cluster`` and Spark
Connect keep Spark tasks. A task's failure comes back as its traceback's text
(:class:`TaskFailed`), which ``reader.task_error`` reads as it reads a Spark task's: an
exception object need not survive pickling both ways. A worker that dies (the kernel's
out-of-memory killer) fails the batch as a lost Spark executor would, never hangs it.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import shutil
import signal
import sys
import traceback
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from pyspark.sql import SparkSession

from ..sink import portable, shipping
from .chunktask import ChunkTask, StagedChunk, stage_chunks

WORKER_LOST = ("a snapshot worker process died (killed, e.g. by the out-of-memory killer; "
               "if it repeats, lower chunk_size in lakehouse_project.yml)")


class TaskFailed(Exception):
    """A local snapshot task raised: the message is its traceback as text."""


def runs_locally(spark: SparkSession) -> bool:
    """Whether this session's snapshot tasks would run in this host's Python, the driver's."""
    if portable.active(spark):
        return False
    context = spark.sparkContext
    return driver_python_runs_tasks(context.master or "", dict(context.getConf().getAll()),
                                    os.environ.get("PYSPARK_PYTHON"))


def driver_python_runs_tasks(master: str, conf: Mapping[str, str], environment: str | None) -> bool:
    """Whether ``master``'s Python tasks run on this host in the driver's own Python, given the
    session's ``conf`` and ``PYSPARK_PYTHON`` (``environment``), as ``shipping.executor_python``
    picks the executors' Python from them."""
    if not shipping.is_local_master(master):
        return False
    chosen = shipping.executor_python(conf, master, environment) or sys.executable
    found = chosen if os.sep in chosen else shutil.which(chosen)  # a bare name is looked up as Spark does
    # One folder of interpreters is one environment (python and python3 of one venv); symlinks
    # are not followed: every venv's python links to the same base interpreter.
    return found is not None and os.path.dirname(os.path.abspath(found)) == os.path.dirname(sys.executable)


def runs_of(tasks: Sequence[ChunkTask], slices: int) -> list[list[ChunkTask]]:
    """``tasks`` cut into ``slices`` runs of consecutive tasks, as ``parallelize`` slices a list."""
    count = len(tasks)
    return [list(tasks[i * count // slices:(i + 1) * count // slices]) for i in range(slices)]


def _quiet_interrupts() -> None:
    """A worker leaves Ctrl-C to the driver, which stops the pool (a terminal signals the whole
    process group)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stage_run(run: list[ChunkTask]) -> tuple[list[StagedChunk], str | None]:
    """One worker's run of chunks: what it staged, or the traceback of what it raised."""
    try:
        return list(stage_chunks(run)), None
    except Exception:  # handed back as text: see the module's docstring
        return [], traceback.format_exc()


class LocalTasks:
    """Up to ``cores`` worker processes, started at the first batch and kept for the next ones
    (as Spark keeps its Python workers), until an error or an interrupt stops them."""

    def __init__(self, cores: int):
        self.cores = max(1, cores)
        self._pool: ProcessPoolExecutor | None = None

    def run(self, runs: Sequence[list[ChunkTask]]) -> list[StagedChunk]:
        """Stage every run, each in one worker; raises :class:`TaskFailed` for the first run
        (in order) that failed, after every run ended (their files are the caller's to remove),
        and for a worker that died (killed, out of memory) with the others stopped."""
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.cores, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_quiet_interrupts)
        try:
            done = list(self._pool.map(_stage_run, runs))
        except BrokenProcessPool:
            self.close()
            # As a Python error's last line, which ``reader.task_error`` puts in its message.
            raise TaskFailed(f"{traceback.format_exc()}WorkerLostError: {WORKER_LOST}") from None
        except BaseException:  # an interrupt: no read goes on behind it
            self.close()
            raise
        staged: list[StagedChunk] = []
        for chunks, failure in done:
            if failure is not None:
                raise TaskFailed(failure)
            staged.extend(chunks)
        return staged

    def close(self) -> None:
        """Stop the workers once the runs they are reading are done (none queued is begun), so
        that no file is written into a staging folder after its batch removed it."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


_shared: LocalTasks | None = None  # this process's workers, for every table and run it snapshots


def local_tasks(spark: SparkSession) -> LocalTasks | None:
    """This process's workers for a local master's snapshot tasks (one per core of the master),
    or None where Spark runs them."""
    return _workers(spark.sparkContext.defaultParallelism) if runs_locally(spark) else None


def _workers(cores: int) -> LocalTasks:
    global _shared
    if _shared is None or _shared.cores != max(1, cores):
        if _shared is not None:
            _shared.close()
        _shared = LocalTasks(cores)
    return _shared


def stop_workers() -> None:
    """Stop this process's workers (a follow that rests stops them with Spark's context)."""
    global _shared
    shared, _shared = _shared, None
    if shared is not None:
        shared.close()


atexit.register(stop_workers)  # idle workers exit with the driver (an interrupted run's were stopped already)
