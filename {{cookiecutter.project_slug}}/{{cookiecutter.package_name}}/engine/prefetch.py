"""Read ahead on a background thread, so decoding the binlog and writing the lake overlap.

While the lake write of one batch runs (mostly in the JVM, without the GIL), the reader thread
keeps draining the server's binlog stream into a bounded buffer. Errors raised by the reader are
re-raised in the consumer, in order, after the items read before them.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

_DONE = object()


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


class Prefetcher(Generic[T]):
    """Iterates ``source`` on a daemon thread, at most ``depth`` groups ahead. Items are grouped
    until ``weight`` of the group reaches ``group_weight`` so the queue holds few, larger items."""

    def __init__(
        self,
        source: Iterator[T],
        *,
        depth: int = 8,
        group_weight: int = 2000,
        weight: Callable[[T], int] = lambda item: 1,
        join_timeout: float = 30.0,
    ):
        self._source = source
        self._queue: queue.Queue[object] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._group_weight = group_weight
        self._weight = weight
        self._join_timeout = join_timeout
        self._thread = threading.Thread(target=self._run, name="binlog-reader", daemon=True)

    def __iter__(self) -> Iterator[T]:
        self._thread.start()
        try:
            while True:
                item = self._queue.get()
                if item is _DONE:
                    return
                if isinstance(item, _Failure):
                    raise item.error
                yield from item  # type: ignore[misc]
        finally:
            self._stop.set()
            self._drain()
            # The reader closes its source (and the server connection) on its way out.
            self._thread.join(self._join_timeout)

    def _run(self) -> None:
        group: list[T] = []
        weight = 0
        try:
            for item in self._source:
                group.append(item)
                weight += self._weight(item)
                if weight >= self._group_weight:
                    if not self._put(group):
                        return
                    group, weight = [], 0
            if group and not self._put(group):
                return
            self._put(_DONE)
        except BaseException as exc:  # handed to the consumer, which re-raises it
            self._put(_Failure(exc))
        finally:
            close = getattr(self._source, "close", None)
            if close is not None:
                close()

    def _put(self, item: object) -> bool:
        """Block until there is room; False when the consumer has gone away."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _drain(self) -> None:
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                return
