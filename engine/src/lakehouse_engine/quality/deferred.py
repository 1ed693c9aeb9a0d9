"""Stand-ins for modules a package imports but a run never uses, imported for real on first use.

Great Expectations imports scipy.stats and altair for two expectations ``dq`` never runs (a
KL divergence and its chart), and pyspark.ml, which it imports too, imports scipy.sparse. They
are 0.8-1.3 CPU-s of GX's 2.2-2.8 s import, which runs beside the source's bucket sums on a
2-core machine. :func:`deferring` puts a :class:`Deferred` in ``sys.modules`` under each name
while the package imports, so that ``import altair`` or ``from scipy import stats`` binds the
stand-in at once.

The first attribute read on a stand-in (``stats.entropy``, ``alt.Chart``, ``__path__`` for a
submodule) imports the real module and answers from it, so a run that does use one gets the
real thing, only later. ``importlib.util.LazyLoader`` cannot do this on Python 3.11: every
``import x`` reads ``x.__spec__``, which makes a lazy module load at once. A stand-in's
``__spec__`` is its own, so reading it costs nothing.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

# What GX 1.x imports but dq never uses (see the module's docstring).
GX_UNUSED = ("scipy.stats", "scipy.sparse", "altair")


class Deferred(ModuleType):
    """A module's stand-in: reading any attribute it lacks imports the real module, then reads it there."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__spec__ = importlib.machinery.ModuleSpec(name, None)
        self._deferred_lock = threading.Lock()
        self._deferred_real: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        # Only called for what the stand-in lacks, so its own two attributes never get here
        # once set; before they are (inside ModuleType.__init__), there is nothing to load.
        if attr.startswith("_deferred_"):
            raise AttributeError(attr)
        return getattr(self.real(), attr)

    def real(self) -> ModuleType:
        """The real module, imported (once) on the first call."""
        with self._deferred_lock:
            if self._deferred_real is None:
                if sys.modules.get(self.__name__) is self:
                    del sys.modules[self.__name__]
                self._deferred_real = importlib.import_module(self.__name__)
            return self._deferred_real


@contextmanager
def deferring(names: Sequence[str]) -> Iterator[list[Deferred]]:
    """A stand-in under each of ``names`` that is not imported yet but can be (its package is
    installed), for as long as the block runs. Stand-ins nothing read are taken out of
    ``sys.modules`` at the end, so a later ``import`` gets the real module; whatever bound one
    keeps it, and it still imports the real module when first read."""
    placed = [Deferred(name) for name in names if name not in sys.modules and _installed(name)]
    for stand_in in placed:
        sys.modules[stand_in.__name__] = stand_in
    try:
        yield placed
    finally:
        for stand_in in placed:
            if sys.modules.get(stand_in.__name__) is stand_in:
                del sys.modules[stand_in.__name__]


def _installed(name: str) -> bool:
    """Whether ``name`` can be imported: a missing package must fail where it is imported, as without us."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # its parent package is missing or broken
        return False
