"""The benchmark's own arithmetic: freshness from Delta commit logs, percentiles, the process
tree measurement (real processes, no mocks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import bench  # noqa: E402


def _commit(folder: Path, version: int, info: dict) -> None:
    log = folder / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n")


def _bronze(lake: Path, version: int, batch: int, file: str, offset: int) -> None:
    checkpoint = {"batch": batch, "position": [file, offset]}
    _commit(lake / "bronze" / "t", version, {"timestamp": 0, "userMetadata": json.dumps(checkpoint)})


def _silver(lake: Path, version: int, batch: int, at: float) -> None:
    _commit(lake / "silver" / "t", version, {"timestamp": int(at * 1000),
                                              "userMetadata": json.dumps({"bronze_batch": batch})})


def test_freshness_is_the_time_to_the_first_silver_commit_covering_the_write(tmp_path):
    _bronze(tmp_path, 0, 1, "mysql-bin.000009", 500)
    _bronze(tmp_path, 1, 2, "mysql-bin.000010", 100)  # file numbers, not string order
    _silver(tmp_path, 0, 1, at=103.0)
    _silver(tmp_path, 1, 2, at=110.0)
    writes = [(100.0, ("mysql-bin.000009", 400)),  # covered by batch 1
              (101.0, ("mysql-bin.000009", 900)),  # past batch 1: batch 2
              (104.0, ("mysql-bin.000010", 50)),   # batch 2
              (105.0, ("mysql-bin.000010", 200))]  # never covered: left out

    assert bench.freshness(tmp_path, "t", writes) == [3.0, 9.0, 6.0]


def test_percentiles_of_nothing_say_so_and_of_values_pick_ranks():
    assert bench._percentiles([])["samples"] == 0
    values = [float(v) for v in range(1, 101)]
    assert bench._percentiles(values) == {"samples": 100, "p50_s": 51.0, "p95_s": 96.0, "max_s": 100.0}


def test_the_measurement_covers_an_orphaned_grandchild_and_keeps_the_exit_code(tmp_path):
    # A child starts a grandchild that burns 0.5 s of CPU, and exits before it: the orphan is
    # still measured. In a process of its own: becoming a subreaper is for good.
    burn = "import time; t = time.process_time(); [0 for _ in iter(lambda: time.process_time() - t > 0.5, True)]"
    command = [sys.executable, "-c",
               f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {burn!r}]); sys.exit(3)"]
    measure = (f"import bench_measure, json; bench_measure.become_subreaper(); "
               f"m = bench_measure.run({command!r}, log=__import__('pathlib').Path({str(tmp_path / 'out.log')!r})); "
               "print(json.dumps([m.returncode, m.cpu_s, m.wall_s, m.peak_pss_mb]))")
    done = subprocess.run([sys.executable, "-c", measure], cwd=SCRIPTS, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    returncode, cpu_s, wall_s, peak_mb = json.loads(done.stdout)

    assert returncode == 3
    assert cpu_s >= 0.5 and wall_s >= 0.5
    assert peak_mb > 0


def test_the_measurement_counts_workers_of_a_parent_that_ignores_sigchld(tmp_path):
    # Spark's Python daemon sets SIGCHLD to SIG_IGN: the kernel reaps its workers itself and
    # their CPU time never reaches anyone's RUSAGE_CHILDREN. Here a child does the same with a
    # worker that burns 1 s of CPU.
    burn = "import time; t = time.process_time(); [0 for _ in iter(lambda: time.process_time() - t > 1.0, True)]"
    child = ("import signal, subprocess, sys, time; signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
             f"subprocess.Popen([sys.executable, '-c', {burn!r}]); time.sleep(3)")
    measure = (f"import bench_measure, json; bench_measure.become_subreaper(); "
               f"m = bench_measure.run({[sys.executable, '-c', child]!r}, "
               f"log=__import__('pathlib').Path({str(tmp_path / 'out.log')!r})); print(json.dumps(m.cpu_s))")
    done = subprocess.run([sys.executable, "-c", measure], cwd=SCRIPTS, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) >= 0.7  # the samples miss at most the worker's last 0.2 s


def test_the_cpu_between_marks_leaves_out_what_the_start_up_burnt(tmp_path):
    # An idle follow's figures: 1 s of CPU at the start, then idling; from the first mark on ~0 CPU.
    burn = ("import time; t = time.process_time(); [0 for _ in iter(lambda: time.process_time() - t > 1.0, True)]; "
            "time.sleep(3.0)")
    measure = (f"import bench_measure, json; "
               f"m = bench_measure.run({[sys.executable, '-c', burn]!r}, marks_s=(0.3, 2.0, 3.0), "
               f"log=__import__('pathlib').Path({str(tmp_path / 'out.log')!r})); "
               "print(json.dumps([dict(m.cpu_at_marks)[2.0], m.cpu_share(0.3, 2.0), "
               "m.cpu_share(2.0, 3.0), m.cpu_share(2.0), m.cpu_share(9.0)]))")
    done = subprocess.run([sys.executable, "-c", measure], cwd=SCRIPTS, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    at_mark, burning, idle_between, idle_to_the_end, unreached = json.loads(done.stdout)
    assert at_mark >= 0.8
    assert burning > 0.3
    assert idle_between < 0.2 and idle_to_the_end < 0.2
    assert unreached is None


def test_the_steady_freshness_leaves_out_the_writes_of_the_warm_up():
    writes = [(100.0, ("mysql-bin.000001", 10)), (119.9, ("mysql-bin.000001", 20)),
              (120.0, ("mysql-bin.000001", 30)), (150.0, ("mysql-bin.000001", 40))]
    assert bench.steady_commits(writes, 20.0) == writes[2:]
    assert bench.steady_commits([], 20.0) == []


def test_each_step_records_the_load_average_as_it_started_and_as_it_ended(tmp_path, monkeypatch, capsys):
    import bench_measure

    readings = iter([(1.5, 0.0, 0.0), (3.25, 0.0, 0.0)])
    monkeypatch.setattr(bench_measure.os, "getloadavg", lambda: next(readings))
    measured = bench_measure.run([sys.executable, "-c", "pass"], log=tmp_path / "out.log")
    assert (measured.load_at_start, measured.load_at_end) == (1.5, 3.25)
    runner = bench.Bench.__new__(bench.Bench)
    runner.rows = []
    runner._row("step", 10, measured)
    assert runner.rows[0].load == (1.5, 3.25)
    assert "load 1.50/3.25" in capsys.readouterr().out
