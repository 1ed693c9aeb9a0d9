"""The cyclic garbage collector's pace in the engine's own processes.

A catch-up allocates millions of short-lived containers (a dict per row image, a tuple per
bronze row), which reference counting frees as they go. At Python's default pace the cyclic
collector also runs a young collection every 700 allocations and, as survivors pile up, full
collections that walk every live container, among them the rows a flush holds (50,000 by
default, each a tuple of some 26 values): work that finds nothing to free. At a young
collection every 50,000 allocations (full ones 2,000 times rarer still), set for the whole
command and in the binlog reader process, a 500k-change catch-up of make bench's table took
9.7-10.9 s against 11.4-12.1 s, its binlog phase 6.8-7.4 s against 8.5-8.8 s, with about 2.3
CPU-s less (alternating, three runs each). Reference cycles are still collected, later.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# Allocations between young collections, young collections between middle ones, middle ones
# between full ones (Python's defaults: 700, 10, 10).
BULK = (50_000, 20, 100)


def set_bulk() -> None:
    """For a process that is the engine's alone (the binlog reader): the bulk pace from here on."""
    gc.set_threshold(*BULK)


@contextmanager
def bulk() -> Iterator[None]:
    """The bulk pace while a command runs, then the pace before (a program that runs the
    command in its own process, or imports the engine, keeps its pace otherwise)."""
    before = gc.get_threshold()
    gc.set_threshold(*BULK)
    try:
        yield
    finally:
        gc.set_threshold(*before)
