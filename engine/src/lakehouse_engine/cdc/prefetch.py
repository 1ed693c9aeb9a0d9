"""Read the binlog ahead in a child process, so decoding it and writing the lake overlap.

Decoding row events (python-mysql-replication) is pure Python and costs about as much as
everything else a catch-up does (converting rows, writing Parquet, committing). On a thread the
two would share one core through the GIL; in a process each has its own, and the catch-up runs
at nearly the decoder's own speed. Items cross in groups through a bounded queue (the child
blocks when the consumer falls ``depth`` groups behind, or, with ``max_bytes``, when the groups
waiting hold that many bytes pickled: so memory stays bounded). Errors raised by the reader are
re-raised in the consumer, in order, after the items read before them.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle
import queue
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, Generic, TypeVar

from .. import gcpace
from ..errors import SourceUnavailableError

T = TypeVar("T")
PR_SET_PDEATHSIG = 1


class _End:
    """The child's last message: the source is exhausted."""


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


class _Packed:
    """A group the child pickled itself, holding ``units`` of the byte budget until it is taken."""

    def __init__(self, data: bytes, units: int):
        self.data = data
        self.units = units


# The byte budget is counted in units of this many pickled bytes (a semaphore's count).
BUDGET_UNIT = 1 << 20


def _count_one(item: object) -> int:
    return 1


class ProcessPrefetcher(Generic[T]):
    """Iterates ``factory()`` in a spawned child process, at most ``depth`` groups ahead; items
    are grouped until ``weight`` of the group reaches ``group_weight``.

    ``factory`` and ``weight`` must be picklable (module-level functions, or ``partial`` of
    them), and so must the items. The child starts when iteration starts and is stopped when the
    consumer stops iterating, whatever the reason. ``niceness`` lowers the child's CPU priority
    (a reader that runs ahead should take only what the lake writes leave). ``max_bytes``: bound
    what waits by its pickled size instead of by ``depth`` (the child pickles each group itself,
    so the bound holds whatever the rows are like); at least one group is always let through.

    :meth:`start` starts the child before iteration (to read while the caller does other work);
    :meth:`close` stops it, whether or not iteration began."""

    def __init__(
        self,
        factory: Callable[[], Iterator[T]],
        *,
        depth: int = 8,
        group_weight: int = 2000,
        weight: Callable[[T], int] = _count_one,
        poll_s: float = 1.0,
        niceness: int = 0,
        max_bytes: int | None = None,
    ):
        # spawn, not fork: the parent holds threads (py4j, the JVM's output) whose locks a
        # forked child could inherit in a held state.
        context = multiprocessing.get_context("spawn")
        units = None if max_bytes is None else max(1, max_bytes // BUDGET_UNIT)
        self._budget = None if units is None else context.Semaphore(units)
        self._queue = context.Queue(maxsize=depth if units is None else 0)
        self._process = context.Process(
            target=_produce, name="binlog-reader", daemon=True,
            args=(factory, self._queue, group_weight, weight, os.getpid(), niceness, self._budget, units or 0))
        self._poll_s = poll_s
        self._started = False

    def start(self) -> None:
        """Start the child (once); iteration then takes what it has read meanwhile."""
        if not self._started:
            self._started = True
            with _sigint_ignored():  # inherited through exec: covers the child's start-up imports
                self._process.start()

    def close(self) -> None:
        """Stop the child if it still runs (the consumer stopped early, or never began)."""
        if not self._started:
            return
        if self._process.is_alive():
            self._process.terminate()
        self._process.join(5)
        self._queue.close()
        self._queue.cancel_join_thread()

    def __iter__(self) -> Iterator[T]:
        self.start()
        try:
            while True:
                item = self._next()
                if isinstance(item, _Packed):
                    assert self._budget is not None
                    group = pickle.loads(item.data)
                    for _ in range(item.units):
                        self._budget.release()
                    yield from group
                    continue
                if isinstance(item, _End):
                    return
                if isinstance(item, _Failure):
                    raise item.error
                yield from item  # type: ignore[misc]
        finally:
            self.close()  # the consumer stopped early: the reader goes too

    def _next(self) -> object:
        while True:
            try:
                return self._queue.get(timeout=self._poll_s)
            except queue.Empty:
                if self._process.is_alive():
                    continue
            try:  # it may have sent its last messages just before it ended
                return self._queue.get(timeout=self._poll_s)
            except queue.Empty:
                # Killed (out of memory, a signal): like a dropped connection, worth a retry.
                raise SourceUnavailableError(
                    f"the binlog reader process ended without a word (exit code {self._process.exitcode}): "
                    "run again, it resumes from the last commit") from None


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore Ctrl-C while the child is started (only the main thread may change handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _produce(factory: Callable[[], Iterator[T]], out: multiprocessing.Queue[Any], group_weight: int,
             weight: Callable[[T], int], parent: int, niceness: int, budget: Any = None, units: int = 0) -> None:
    """The child process: read, send groups of items, then an end marker or the error. With a
    ``budget`` (a semaphore of ``units``), each group is pickled here and holds its size in
    units until the consumer takes it."""
    if niceness:
        os.nice(niceness)
    # Ctrl-C reaches the whole foreground process group: the parent decides what it means
    # (follow mode finishes its cycle first) and stops this process when it has to.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _end_with_parent(parent)
    gcpace.set_bulk()  # its whole work is decoding rows into short-lived containers
    send = out.put if budget is None else partial(_send_packed, out, budget, units)
    group: list[T] = []
    total = 0
    try:
        for item in factory():
            group.append(item)
            total += weight(item)
            if total >= group_weight:
                send(group)
                group, total = [], 0
        if group:
            send(group)
        out.put(_End())
    except BaseException as exc:  # handed to the consumer, which re-raises it
        if group:
            send(group)  # what was read before the error still counts
        out.put(_Failure(_picklable(exc)))
    out.close()
    out.join_thread()  # every message is in the pipe before the process ends


def _send_packed(out: multiprocessing.Queue[Any], budget: Any, units: int, group: list[Any]) -> None:
    """Pickle ``group`` and send it once the budget has room for its size (a group bigger than
    the whole budget takes all of it, so it still passes alone)."""
    data = pickle.dumps(group, protocol=pickle.HIGHEST_PROTOCOL)
    need = min(units, max(1, -(-len(data) // BUDGET_UNIT)))
    for _ in range(need):
        budget.acquire()
    out.put(_Packed(data, need))


def _end_with_parent(parent: int) -> None:
    """Be terminated when the parent dies (even by kill -9), instead of blocking forever on a
    full queue nobody reads, holding the server connection."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the daemon flag covers a normal exit
        return
    if os.getppid() != parent:  # it died before the request was in place
        os._exit(1)


def _picklable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a ``RuntimeError`` carrying its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
