"""Great Expectations imported on a thread of its own, while ``dq`` does its other work.

GX takes about 3 s of Python to import and is needed only once a table's suite runs, after the
source's read view is open and silver is summed (with or without Spark). Two threads importing
one package at once can meet a module the other has only half initialised (GX then fails with a
circular-import error), so whatever both threads use is imported before the thread starts, and
every use of GX waits for the thread first (:func:`loaded`). What GX imports for expectations dq
never runs is left to a stand-in while it imports (``deferred``): 2.2-2.8 CPU-s -> 1.2-1.5.
"""

from __future__ import annotations

import threading

from .deferred import GX_UNUSED, deferring

_loading: threading.Thread | None = None


def load_in_background() -> None:
    """Start importing GX (once per process); the modules both threads use are imported here."""
    global _loading
    if _loading is not None:
        return
    import numpy  # noqa: F401
    import pandas  # type: ignore[import-untyped]  # noqa: F401  (pyarrow probes for it on its first array)
    import pyarrow  # noqa: F401
    import pyarrow.compute  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import pyspark.sql  # noqa: F401

    def load() -> None:
        try:
            with deferring(GX_UNUSED):
                import great_expectations  # noqa: F401
                import great_expectations.expectations  # noqa: F401
        except Exception:  # noqa: BLE001 - the checks import it again and report the error there
            pass

    _loading = threading.Thread(target=load, name="import-great-expectations", daemon=True)
    _loading.start()


def loaded() -> None:
    """Wait for a background import of GX, if one was started, before using GX."""
    if _loading is not None:
        _loading.join()
