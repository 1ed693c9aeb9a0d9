"""Work on a thread of its own while the caller goes on: a Spark job (which waits in a py4j call
and so releases the GIL) beside a source query, or a table's creation beside the reads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

R = TypeVar("R")


class Background(Generic[R]):
    """``fn(*args)`` run on a daemon thread (a Ctrl-C never waits for it); :meth:`result` joins it
    and returns its value or raises its error."""

    def __init__(self, fn: Callable[..., R], *args: object) -> None:
        self._value: R | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., R], args: tuple[object, ...]) -> None:
        try:
            self._value = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by result()
            self._error = exc

    def result(self) -> R:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set by _run when no error was raised
