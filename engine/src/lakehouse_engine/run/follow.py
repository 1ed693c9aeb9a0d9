"""Follow mode: ingest cycles back to back on one Spark session and one pipeline, until stopped.

Each cycle is one bounded ``Pipeline.ingest`` (catch up to the binlog position current when it
starts, then MERGE silver) on a source connection kept open across cycles. It starts with one
``SHOW MASTER STATUS``: while the source's position has not moved past every table's resume
position nothing can have changed (every change, DDL included, moves it), and the cycle ends
there, without a Spark job or a commit: an idle cycle costs milliseconds.

Idle tables: when only other tables changed, a table's catch-up finds none of its rows. Its
checkpoint then stays put and the pipeline remembers, in memory, how far it read, instead of
committing an empty bronze and silver batch every cycle; the position is committed once every
``idle_commit_s`` and whenever the binlog moves to a new file (so purging old files never
strands it). A restart re-reads that stretch, which holds none of the table's rows.

Failures: a table that fails is recorded and dropped from the loop (retrying it every second
would only repeat its error); the others go on. A cycle that fails as a whole because the source
does not answer is retried with the pipeline's backoff; after the last attempt its error ends
the run, as it would end an ``ingest``.

Requests: before each cycle the loop calls ``serve`` with every table this run holds, which
does what other runs asked of them (``run.repairs``: a repair of a held table); the cycle
after it picks up where the table then stands.

Tables added meanwhile: every ``discover_s`` the loop asks ``discover`` for tables added to the
project since (``add-table``) that the run's selection picks, their locks already taken. Each
joins the next cycle, which snapshots it while the other tables keep their positions; the one
binlog reader then carries them all. A table module that fails to load is reported once and the
loop follows the tables it has.

Waiting: after an idle cycle the loop blocks on the source's binlog stream until the source
writes (``run.idlewait``), so a change starts the next cycle at once and an idle follow neither
queries nor spins (a wait that saw the source write nothing spares the next cycle its question
for the head); after a cycle that read rows the next starts at most every ``interval_s``.

Resting: once no cycle needed Spark for ``spark_rest_s``, the pipeline stops Spark's context and
the binlog reader process (``Pipeline.rest``); the next change, repair or added table starts them
again. Idle, the context's threads were most of the process's CPU.

Stopping: :func:`stop_requests` turns SIGTERM and the first Ctrl-C into a request the loop reads
between cycles, so a cycle always runs to its end; a second Ctrl-C goes to the handler installed
before (Spark's: interrupt at once, progress up to the last commit is kept).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pymysql

from ..config.defaults import DEFAULTS
from ..config.project import SourceProfile
from ..errors import IngestError, SourceUnavailableError
from ..source.connection import binlog_sizes, connect, connection_error, current_position
from ..state import followstate
from ..state.positions import BinlogPosition, bytes_behind
from ..tables import TableSpec
from .idlewait import IdleWait
from .pipeline import Pipeline, TablesFailed
from .results import RunStatus, TableResult

if TYPE_CHECKING:
    from .livemetrics import LiveMetrics

log = logging.getLogger(__name__)

T = TypeVar("T")
# Driver errors of the connection itself: the source went away under a cycle.
SOURCE_ERRORS = (pymysql.err.OperationalError, pymysql.err.InterfaceError)


@dataclass(frozen=True)
class FollowOptions:
    interval_s: float = DEFAULTS.follow_interval_s
    max_cycles: int | None = None  # stop after this many cycles (tests, benchmarks)
    max_seconds: float | None = None  # stop after this long (tests, benchmarks)
    heartbeat_s: float = DEFAULTS.follow_heartbeat_s
    idle_commit_s: float = DEFAULTS.follow_idle_commit_s
    discover_s: float = DEFAULTS.follow_discover_s
    # Spark's context stops after this long without work (None: never; see ``sink.resting``).
    spark_rest_s: float | None = DEFAULTS.follow_spark_rest_s


@dataclass
class FollowOutcome:
    results: list[TableResult]  # each table's result of the last cycle that ingested it
    cycles: int = 0
    idle_cycles: int = 0
    rows: int = 0  # snapshot and binlog rows over all cycles

    @property
    def failed(self) -> list[TableResult]:
        return [r for r in self.results if r.status != RunStatus.SUCCESS]


class SourceLink:
    """One source connection for every cycle; opened again after a failure. Driver errors
    become the engine's one-line source errors."""

    def __init__(self, profile: SourceProfile):
        self._profile = profile
        self._conn: pymysql.connections.Connection | None = None

    def call(self, work: Callable[[pymysql.connections.Connection], T]) -> T:
        if self._conn is None:
            self._conn = connect(self._profile)
        try:
            return work(self._conn)
        except SOURCE_ERRORS as exc:
            self.close()
            raise connection_error(exc, self._profile) from None

    def position(self) -> BinlogPosition:
        return self.call(current_position)

    def bytes_behind(self, position: BinlogPosition) -> int:
        head = self.position()
        sizes = {} if head.file == position.file else self.call(binlog_sizes)
        return bytes_behind(position, head, sizes)

    def check(self) -> None:
        """Raise the source error when a new connection to the source fails."""
        self.close()
        self.call(lambda conn: conn.ping(reconnect=False))

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except pymysql.err.Error:  # already closed by the driver after an error
                pass
            self._conn = None


class Follower:
    """Runs the cycles; :meth:`run` returns when stopped, at a limit, or with no table left."""

    def __init__(self, pipeline: Pipeline, specs: Sequence[TableSpec], source: SourceLink,
                 stop: threading.Event, options: FollowOptions | None = None,
                 serve: Callable[[Mapping[str, TableSpec]], None] | None = None,
                 discover: Callable[[Collection[str]], Sequence[TableSpec]] | None = None,
                 publish_to: Path | None = None, metrics: LiveMetrics | None = None,
                 idle_wait: IdleWait | None = None):
        """``serve(known)``: other runs' requests for the tables this run holds (see
        ``run.repairs``). ``discover(known names)``: tables added since, locked for this run.
        ``publish_to``: the target folder where how far the tables are read is published
        (``followstate``). ``metrics``: the live samples of the project's metrics textfile.
        ``idle_wait``: how an idle loop waits for a change (none: it polls every interval)."""
        self._pipeline = pipeline
        self._serve = serve
        self._discover = discover
        self._known = {s.name: s for s in specs}
        self._active = list(specs)
        self._source = source
        self._stop = stop
        self._options = options or FollowOptions()
        self._results = {s.name: TableResult(s.name) for s in specs}
        self._outcome = FollowOutcome([])
        self._source_failures = 0
        self._last_line = time.monotonic()
        self._cycles_at_last_line = 0
        # Each table's committed resume position and when this loop saw it change.
        self._committed: dict[str, tuple[BinlogPosition | None, float]] = {
            s.name: (None, self._last_line) for s in specs}
        self._discovered_at = self._last_line
        self._target_dir = publish_to
        self._published_at = float("-inf")
        self._cycle_began_at = time.time()  # wall clock: what followstate publishes
        self._metrics = metrics
        self._idle_wait = idle_wait or IdleWait(None)
        self._idle_at: BinlogPosition | None = None  # the head the last cycle found every table at
        self._quiet_at: BinlogPosition | None = None  # the head, as the idle wait saw it unmoved

    def run(self) -> FollowOutcome:
        started = time.monotonic()
        log.info("follow: %d table(s), a cycle at most every %.1f s; Ctrl-C or SIGTERM stops after "
                 "the current cycle", len(self._active), self._options.interval_s)
        try:
            while self._running(started):
                began = time.monotonic()
                self._cycle_began_at = time.time()
                self._add_new_tables()
                self._serve_requests()
                self._cycle_or_retry()
                self._publish_read_to()
                self._publish_metrics()
                budget = float("inf") if self._options.max_seconds is None else \
                    self._options.max_seconds - (time.monotonic() - started)
                if self._idle_at is not None and self._running(started):
                    self._rest_spark_when_unused()
                    if self._idle_wait.wait(self._idle_at, self._stop, self._options.interval_s, budget):
                        self._quiet_at = self._idle_at
                    continue
                self._idle_wait.release()  # busy: a held dump would go unread
                pause = min(self._options.interval_s - (time.monotonic() - began), budget)
                if pause > 0 and self._running(started):
                    self._stop.wait(pause)
            if self._stop.is_set() and self._active:
                self._save_held_positions()
        finally:
            self._idle_wait.release()
            self._source.close()
        if not self._active and any(r.status != RunStatus.SUCCESS for r in self._results.values()):
            log.error("follow: every table failed (or is snapshot-only and copied); nothing left to follow")
        elif not self._active:
            log.info("follow: every table is snapshot-only and copied; nothing left to follow")
        self._outcome.results = list(self._results.values())
        return self._outcome

    def _running(self, started: float) -> bool:
        options = self._options
        return not (
            self._stop.is_set()
            or not self._active
            or (options.max_cycles is not None and self._outcome.cycles >= options.max_cycles)
            or (options.max_seconds is not None and time.monotonic() - started >= options.max_seconds)
        )

    def _add_new_tables(self) -> None:
        now = time.monotonic()
        if self._discover is None or now - self._discovered_at < self._options.discover_s:
            return
        self._discovered_at = now
        try:
            added = self._discover(set(self._known))
        except Exception:  # looking for new tables must never stop the capture of the others
            log.exception("follow: looking for tables added to the project failed; following the same tables")
            return
        for spec in added:
            self._known[spec.name] = spec
            self._active.append(spec)
            self._results[spec.name] = TableResult(spec.name)
            self._committed[spec.name] = (None, now)
            log.info("follow: table %s was added to the project: the next cycle snapshots it while the "
                     "other tables keep their positions", spec.name)

    def _serve_requests(self) -> None:
        if self._serve is None:
            return
        try:
            self._serve(dict(self._known))
        except Exception:  # serving another run's request must never stop the capture
            log.exception("follow: serving a request of another run failed; following goes on")

    def _cycle_or_retry(self) -> None:
        retry = self._pipeline.retry
        try:
            self._cycle()
        except SourceUnavailableError as exc:
            self._source.close()
            self._source_failures += 1
            if self._source_failures >= retry.attempts:
                raise
            pause = retry.backoff(self._source_failures)
            log.warning("follow: %s; retry %d/%d in %.1f s", exc, self._source_failures,
                        retry.attempts - 1, pause)
            self._stop.wait(pause)
        else:
            self._source_failures = 0

    def _cycle(self) -> None:
        self._outcome.cycles += 1
        self._idle_at = None
        head, self._quiet_at = self._quiet_at or self._source.position(), None
        if self._caught_up(head):
            self._outcome.idle_cycles += 1
            self._note_cycle(head, [])
            self._heartbeat(head)  # may find the source gone: then no wait on its stream
            self._idle_at = head
            return
        began = time.monotonic()
        errors: dict[str, IngestError] = {}
        try:
            hold = self._holding_idle()
            results = self._source.call(lambda conn: self._pipeline.ingest(self._active, conn=conn,
                                                                           hold_idle=hold))
        except TablesFailed as failed:
            # Through a source that went away every table fails: that is the cycle's failure,
            # retried with backoff, and no table is dropped for it.
            self._source.check()
            results, errors = failed.results, failed.errors
        self._note_commits()
        self._note_cycle(head, results)
        for result in results:
            self._results[result.table] = result
        rows = sum(r.snapshot_rows + r.binlog_rows for r in results)
        self._outcome.rows += rows
        transient = [e for e in errors.values() if isinstance(e, SourceUnavailableError)]
        dropped = {name for name, e in errors.items() if not isinstance(e, SourceUnavailableError)}
        if dropped:
            self._active = [s for s in self._active if s.name not in dropped]
            log.error("follow: stopped following %s (failed, see above); %d table(s) left",
                      ", ".join(sorted(dropped)), len(self._active))
        copied = {r.table for r in results if r.copied}
        if copied:
            self._active = [s for s in self._active if s.name not in copied]
            log.info("follow: %s copied (snapshot only): not followed further", ", ".join(sorted(copied)))
        if rows:
            self._report(results, rows, time.monotonic() - began)
        else:
            self._heartbeat(head)
        if transient:
            raise transient[0]

    def _rest_spark_when_unused(self) -> None:
        """Stop Spark's context once no cycle needed it for ``spark_rest_s``: an idle follow's
        CPU is mostly the context's threads. The next change, repair or added table starts a new
        one in the warm JVM. Idle tables' held positions are committed first, so a stop while
        Spark rests needs none."""
        after = self._options.spark_rest_s
        if after is None or not self._pipeline.unused_for(after):
            return
        self._save_held_positions("before Spark rests")
        self._note_commits()
        if self._pipeline.rest():
            log.info("follow: no work for %.0f s: Spark's context stopped until the next change (the JVM "
                     "stays; a change starts it again in about a second)", after)

    def _save_held_positions(self, when: str = "at the stop") -> None:
        """At a requested stop, commit how far idle tables have read: their advance is held in
        memory to spare a commit per cycle, and without this a clean stop would leave them
        looking behind (``status``, ``dq``'s lag) and have the next run read that range again.
        Only those tables take this last short cycle; a table that fails in it is reported."""
        held = [s for s in self._active
                if (read := self._pipeline.read_to(s.name)) is not None
                and read != self._pipeline.resume_position(s.name)]
        if not held:
            return
        try:
            results = self._source.call(lambda conn: self._pipeline.ingest(held, conn=conn,
                                                                           hold_idle=frozenset()))
        except TablesFailed as failed:
            results = failed.results
        except IngestError as exc:  # the source went away: the next run reads the range again
            log.warning("follow: the positions of %s were not saved %s: %s",
                        ", ".join(s.name for s in held), when, exc)
            return
        for result in results:
            self._results[result.table] = result
        self._outcome.rows += sum(r.snapshot_rows + r.binlog_rows for r in results)
        log.info("follow: saved the positions of %s %s", ", ".join(s.name for s in held), when)

    def _publish_read_to(self) -> None:
        """Tell ``status`` and ``dq`` how far the tables are read (``followstate``), at most every
        few seconds: an idle table's commit is held, not its data. The time given is the cycle's
        start, when the head was at most where the tables are now read to."""
        now = time.monotonic()
        if self._target_dir is None or now - self._published_at < followstate.EVERY_S:
            return
        positions = {s.name: p for s in self._active if (p := self._pipeline.read_to(s.name)) is not None}
        try:
            followstate.write(self._target_dir, os.getpid(), positions, self._cycle_began_at)
        except OSError as exc:  # only a hint for status and dq
            log.debug("follow: %s not written: %s", followstate.FILE_NAME, exc)
        self._published_at = now

    def _note_cycle(self, head: BinlogPosition, results: Sequence[TableResult]) -> None:
        if self._metrics is not None:
            caught_up = [s.name for s in self._active if (p := self._pipeline.read_to(s.name)) is not None
                         and p >= head]
            self._metrics.cycle(self._cycle_began_at, results, caught_up)

    def _publish_metrics(self) -> None:
        if self._metrics is not None:
            active = {s.name for s in self._active}
            # A snapshot-only table, copied, is done, not down.
            self._metrics.publish({name: (name in active or result.copied) and result.status == RunStatus.SUCCESS
                                   for name, result in self._results.items()})

    def _holding_idle(self) -> frozenset[str]:
        """Tables whose position may stay uncommitted this cycle if they have no new rows."""
        now = time.monotonic()
        return frozenset(name for name, (_, since) in self._committed.items()
                         if now - since < self._options.idle_commit_s)

    def _note_commits(self) -> None:
        now = time.monotonic()
        for name, (known, _) in list(self._committed.items()):
            position = self._pipeline.resume_position(name)
            if position is not None and position != known:
                self._committed[name] = (position, now)

    def _caught_up(self, head: BinlogPosition) -> bool:
        positions = [self._pipeline.read_to(s.name) for s in self._active]
        return all(p is not None and p >= head for p in positions)

    def _lag(self) -> str:
        """How far the least read table trails the head: read, not committed (an idle table's
        advance is held in memory; ``status`` and ``dq`` measure from the same positions)."""
        positions = [self._pipeline.read_to(s.name) for s in self._active]
        known = [p for p in positions if p is not None]
        return f"{self._source.bytes_behind(min(known))} bytes" if known else "unknown"

    def _report(self, results: Sequence[TableResult], rows: int, seconds: float) -> None:
        tables = ", ".join(f"{r.table} {r.snapshot_rows + r.binlog_rows}" for r in results
                           if r.snapshot_rows + r.binlog_rows)
        log.info("follow: cycle %d: %d row(s) (%s) in %.1f s, lag %s", self._outcome.cycles, rows, tables,
                 seconds, self._lag())
        self._line_written()

    def _heartbeat(self, head: BinlogPosition) -> None:
        if time.monotonic() - self._last_line < self._options.heartbeat_s:
            return
        log.info("follow: %d cycle(s) since the last line, no new rows; %d table(s) at %s (lag %s)",
                 self._outcome.cycles - self._cycles_at_last_line, len(self._active), head, self._lag())
        self._line_written()

    def _line_written(self) -> None:
        self._last_line = time.monotonic()
        self._cycles_at_last_line = self._outcome.cycles
