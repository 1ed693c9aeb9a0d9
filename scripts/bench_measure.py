"""Measure a command's whole process tree: wall time, CPU seconds and peak memory.

Spark runs as a JVM the Python driver starts, and the JVM forks Python workers; dlt forks its own
workers. So a figure for "the run" must cover every process the command starts, including those
that outlive their parent for a moment:

- CPU: this process becomes a *child subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``), so orphaned
  descendants are re-parented to it rather than to init; it reaps them, and the kernel then adds
  their CPU time to ``RUSAGE_CHILDREN``. That counter misses a process whose parent never waits
  for it before being killed itself: Spark's Python workers (a 6M-row snapshot counted 14.8 s of
  the 32.6 s its processes used). So each tracked process's own CPU time is also read at every
  sample, and the figure is the larger of the two sums; both are lower bounds (the samples miss
  a process's last ``SAMPLE_S`` and processes shorter than that).
- Memory: the sum of PSS (proportional set size: shared pages split among the processes that map
  them, so forked workers are not counted twice) over the tree, sampled every ``SAMPLE_S``; the
  peak of those sums is reported. A spike shorter than the interval can be missed.

Start long-lived servers (the source database) *before* :func:`become_subreaper`, or their
orphaned daemon would be counted as part of the next command.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
SAMPLE_S = 0.2
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Measurement:
    wall_s: float
    cpu_s: float
    peak_pss_mb: float
    returncode: int
    output: str  # stdout and stderr, interleaved
    # (seconds into the run, the tree's CPU seconds then) for each mark the run reached
    cpu_at_marks: tuple[tuple[float, float], ...] = ()
    # The machine's 1-minute load average as the command started and as it ended: a figure taken
    # on a loaded machine (load above the cores) is not comparable with a quiet one.
    load_at_start: float = 0.0
    load_at_end: float = 0.0

    def cpu_share(self, from_s: float, to_s: float | None = None) -> float | None:
        """The tree's CPU seconds per second between two marks, or from a mark to the end (of one
        core; 1.0 = a whole core); None when the run did not reach them."""
        marks = dict(self.cpu_at_marks)
        end = (self.wall_s, self.cpu_s) if to_s is None else (to_s, marks.get(to_s))
        if from_s not in marks or end[1] is None or end[0] <= from_s:
            return None
        return (end[1] - marks[from_s]) / (end[0] - from_s)

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.output.strip().splitlines()[-lines:])


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def _parents() -> dict[int, int]:
    """pid -> parent pid of every live process."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
        parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return parents


def _pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _own_cpu_s(pid: int) -> float | None:
    """A live process's own user and system CPU time, in seconds."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
        timeout_s: float = 7200.0, log: Path | None = None, marks_s: Sequence[float] = ()) -> Measurement:
    """Run ``command`` to its end and measure its process tree (see the module docstring).

    The output goes to ``log`` (or a temporary file), never to a pipe: a pipe nobody drains while
    we sample would block the command. ``marks_s``: also note the tree's CPU that far into the
    run (a steady state's cost, e.g. an idle follow's, without its start-up)."""
    log = log or Path(f"/tmp/bench-{os.getpid()}-{time.monotonic_ns()}.log")
    cpu_before = _cpu_of_children()
    load_at_start = os.getloadavg()[0]
    started = time.monotonic()
    with open(log, "w") as out:
        process = subprocess.Popen(list(command), cwd=cwd, env=dict(env) if env else None,
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        me = os.getpid()
        # Orphans re-parented to us are the command's (we run one command at a time), unless
        # they were our children before it started.
        before = {pid for pid, parent in _parents().items() if parent == me and pid != process.pid}
        tracked = {process.pid}
        own_cpu: dict[int, float] = {}  # pid -> its own CPU seconds when last sampled
        peak_kb = 0
        cpu_at_marks: dict[float, float] = {}
        returncode: int | None = None
        deadline = started + timeout_s
        while True:
            parents = _parents()
            # A process stays tracked once seen under the command, even after re-parenting to us.
            tracked |= {pid for pid, parent in parents.items() if parent == me and pid not in before}
            grown = True
            while grown:
                size = len(tracked)
                tracked |= {pid for pid, parent in parents.items() if parent in tracked}
                grown = len(tracked) != size
            live = [pid for pid in tracked if pid in parents]
            peak_kb = max(peak_kb, sum(_pss_kb(pid) for pid in live))
            for pid in live:
                if (used := _own_cpu_s(pid)) is not None:
                    own_cpu[pid] = used
            for mark in marks_s:
                if mark not in cpu_at_marks and time.monotonic() - started >= mark:
                    cpu_at_marks[mark] = sum(own_cpu.values())
            returncode = _reap(process.pid, returncode)
            if returncode is not None and not live:
                break
            if returncode is not None and time.monotonic() > deadline + 30:
                break  # leftover daemons: stop waiting for them
            if time.monotonic() > deadline and returncode is None:
                process.kill()
            time.sleep(SAMPLE_S)
    wall = time.monotonic() - started
    process.returncode = returncode
    cpu = max(_cpu_of_children() - cpu_before, sum(own_cpu.values()))
    return Measurement(round(wall, 2), round(cpu, 2), round(peak_kb / 1024, 1),
                       returncode if returncode is not None else -1, log.read_text(errors="replace"),
                       tuple((mark, round(cpu, 2)) for mark, cpu in cpu_at_marks.items()),
                       round(load_at_start, 2), round(os.getloadavg()[0], 2))


def _reap(main_pid: int, returncode: int | None) -> int | None:
    """Reap every finished child (the command, and orphans re-parented to us); return the
    command's exit code once it has ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return returncode
        if pid == 0:
            return returncode
        if pid == main_pid:
            returncode = os.waitstatus_to_exitcode(status)
