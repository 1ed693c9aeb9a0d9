"""A one-shot catch-up's binlog reader, started before Spark.

An ingest whose tables all stand in the binlog phase on a local lake knows its catch-up's range
before Spark starts: the lake's commit files give each table's checkpoint (as for an ingest with
nothing to do, ``run.idle``) and the source gives its head. The reader process then starts at
once and decodes while the JVM starts and the tables are described, 3-5 s of every catch-up,
instead of after them.

The catch-up takes what it read only for exactly the range and the source it would read itself
(``BinlogSource.identity``, start and stop): any other read (a table that failed to start or
changed its key, a retry after a lost connection, a second catch-up after a DDL) stops it and
reads on its own. A head start makes a run sooner, never different.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from ..logs import FILE_ONLY
from ..state.positions import BinlogPosition
from .binlog import BinlogSource, Transaction
from .capture import range_reader

log = logging.getLogger(__name__)
TAKEN = "binlog: %s .. %s was read ahead while Spark started"  # in the log file


class HeadStart:
    """The reader of ``(start, stop]`` from ``source``, started now; ``seen_at``: the Unix time
    ``stop`` was the source's head. A feed for :class:`~.capture.CatchUp` (``transactions``)."""

    def __init__(self, source: BinlogSource, start: BinlogPosition, stop: BinlogPosition, seen_at: float):
        self.source = source
        self.start = start
        self.stop = stop
        self.seen_at = seen_at
        self._reader = range_reader(source, start, stop)
        self._reader.start()
        self._unused = True

    def transactions(self, source: BinlogSource, start: BinlogPosition, stop: BinlogPosition) -> Iterator[Transaction]:
        """The transactions of ``(start, stop]``: the ones read ahead when this is the range and
        source they were read for (once), else a reader of its own."""
        if self._unused and (source.identity, start, stop) == (self.source.identity, self.start, self.stop):
            self._unused = False
            log.info(TAKEN, start, stop, extra=FILE_ONLY)
            yield from self._reader
            return
        if self._unused:
            log.debug("binlog: the reader started ahead read %s .. %s; the catch-up reads %s .. %s itself",
                      self.start, self.stop, start, stop)
        self.close()
        yield from range_reader(source, start, stop)

    def close(self) -> None:
        """Stop the reader started ahead (what it decoded and did not hand over is dropped)."""
        self._unused = False
        self._reader.close()
