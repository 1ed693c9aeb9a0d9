"""``make bench``: the engine side by side with the alternatives, in one run, on this machine.

It generates a project (``build/bench/bench-lakehouse``, its own MariaDB on port 3317), loads
TPC-DS ``customer`` rows (``--rows``, default 2M), and measures, each as a separate process
tree (wall, CPU seconds, peak PSS; see ``bench_measure``):

1. a plain single-connection pymysql scan of the table, and MariaDB's C client streaming it to
   /dev/null (the floors for a Python and for any reader);
2. our snapshot into bronze and silver (``ingest``, Spark start included);
3. the peers, in a virtualenv of their own: dlt's ``sql_table`` into Delta with each of its
   readers (pyarrow, connectorx), and connectorx straight into delta-rs (2 partitions);
4. an ingest with nothing to do (the fixed cost of a run);
5. ``--changes`` mixed changes (60% updates, 20% inserts, 20% deletes): the raw
   python-mysql-replication decode of that binlog range, then our binlog catch-up of it, then
   Debezium's embedded engine with its MariaDB connector reading the same range
   (``bench-debezium/``, built with Maven; skipped with a note without java and mvn);
6. ``dq`` of the table after those changes: row count, keys and the value reconciliation;
7. follow mode: idle cycles, then freshness (source commit to silver commit) at a steady write
   rate, computed from the Delta commit logs (each silver commit records the bronze batch it
   applied, each bronze commit the binlog position it covers).

It prints a table and writes ``build/bench/results.json``. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import bench_measure
import bench_source
from bench_measure import Measurement

TEMPLATE = Path(__file__).resolve().parents[1]
PORT = 3317
PASSWORD = "bench-only-password"
# The idle follow run: Spark's start and a first cycle (10-40 s), then idle with Spark up from
# IDLE_UP_S to IDLE_RESTING_S; Spark's context rests after the default --rest-spark-after
# (120 s) without work, so from IDLE_RESTED_S to IDLE_RESTED_END_S it idles as a long-idle
# follow does. Both windows end before the run's own end (its stop and exit are not idling).
IDLE_FOLLOW_S = 270.0
IDLE_UP_S, IDLE_RESTING_S = 60.0, 120.0
IDLE_RESTED_S, IDLE_RESTED_END_S = 200.0, 260.0
PACKAGE = "bench_lakehouse"
CX_DELTA = "connectorx -> delta-rs (2 partitions)"
C_CLIENT = "mariadb --quick (C client) -> /dev/null"
DEBEZIUM = "Debezium 3.5 embedded (MariaDB connector)"
SERVER_ID = 6999  # the raw decoder's; the project's readers use 5400-5499
# About seven hours of a follow committing a table every second (four log files a commit).
LISTING_EXTRA_FILES = 100_000


@dataclass(frozen=True)
class Row:
    """One line of the report."""

    name: str
    rows: int
    wall_s: float
    cpu_s: float
    peak_pss_mb: float
    note: str = ""
    load: tuple[float, float] = (0.0, 0.0)  # 1-minute load average at the step's start and end

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.wall_s if self.wall_s else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run")
    run.add_argument("--rows", type=int, default=int(os.environ.get("BENCH_ROWS", 2_000_000)))
    run.add_argument("--changes", type=int, default=int(os.environ.get("BENCH_CHANGES", 500_000)))
    # Long enough for a steady state: the follow JVM compiles the MERGE's code over its first
    # minute or two, and the steady figure leaves out the first third of the window.
    run.add_argument("--follow-seconds", type=float, default=float(os.environ.get("BENCH_FOLLOW_SECONDS", 240)))
    run.add_argument("--follow-rate", type=int, default=int(os.environ.get("BENCH_FOLLOW_RATE", 2000)))
    run.add_argument("--skip-dlt", action="store_true", default=bool(os.environ.get("BENCH_SKIP_DLT")))
    run.add_argument("--skip-follow", action="store_true", default=bool(os.environ.get("BENCH_SKIP_FOLLOW")))
    run.add_argument("--build", type=Path, default=TEMPLATE / "build" / "bench")
    scan = sub.add_parser("scan")
    scan.add_argument("table")
    decode = sub.add_parser("decode")
    decode.add_argument("start_file")
    decode.add_argument("start_pos", type=int)
    decode.add_argument("stop_file")
    decode.add_argument("stop_pos", type=int)
    args = parser.parse_args(sys.argv[1:] or ["run"])
    source = bench_source.Connection("127.0.0.1", PORT, "ingest", PASSWORD, "bench")
    if args.command == "scan":  # child processes, measured by the parent
        print(json.dumps({"rows": bench_source.scan(source, args.table)}))
        return 0
    if args.command == "decode":
        rows = bench_source.decode(source, (args.start_file, args.start_pos), (args.stop_file, args.stop_pos),
                                   SERVER_ID)
        print(json.dumps({"rows": rows}))
        return 0
    return Bench(args, source).run()


class Bench:
    def __init__(self, args: argparse.Namespace, source: bench_source.Connection):
        self.args = args
        self.source = source
        self.build: Path = args.build.resolve()
        self.project = self.build / "bench-lakehouse"
        self.python = sys.executable
        self.env = {**os.environ, "MYSQL_PASSWORD": PASSWORD, "PYTHONUNBUFFERED": "1"}
        self.rows: list[Row] = []
        self.extra: dict[str, object] = {}

    # -- the run ------------------------------------------------------------------------

    def run(self) -> int:
        self._prepare()
        rows = self.args.rows
        scan = self._measure("scan", [self.python, __file__, "scan", bench_source.TABLE])
        self._row("pymysql scan (1 connection)", _json(scan)["rows"], scan)
        ours = self._measure("snapshot", self._cli("ingest"))
        self._row("ours: snapshot -> bronze+silver", rows, ours, _ingest_note(ours))
        self._c_client()
        if self.args.skip_dlt:
            self.extra["dlt"] = "skipped (--skip-dlt)"
        else:
            self._peers()
        idle = self._measure("no-change", self._cli("ingest"))
        self._row("ours: ingest with no changes", 0, idle)
        self._changes()
        # dq after the changes: the row count, key uniqueness and the value reconciliation (one
        # fingerprint per row on both sides) of the whole table; it must pass.
        checked = self._measure("dq", self._cli("dq"))
        self._row("ours: dq (count, keys, values)", self.args.rows, checked, "rows ~ table size")
        if self.args.skip_follow:
            self.extra["follow"] = "skipped (--skip-follow)"
        else:
            self._follow()
        self._log_listing()
        self._report()
        return 0

    def _prepare(self) -> None:
        print(f"==> preparing {self.project} with {self.args.rows:,} customer rows", flush=True)
        if self.project.exists():
            subprocess.run(self._cli("source", "down"), cwd=self.project, env=self.env, capture_output=True)
            shutil.rmtree(self.project)
        self.build.mkdir(parents=True, exist_ok=True)
        _check(subprocess.run(
            [self.python, "-m", "cookiecutter", "--no-input", str(TEMPLATE), "-o", str(self.build),
             "project_name=Bench Lakehouse", "tables=customer", f"source_port={PORT}", "source_database=bench"],
            capture_output=True, text=True), "cookiecutter")
        _check(subprocess.run(self._cli("source", "up"), cwd=self.project, env=self.env,
                              capture_output=True, text=True), "source up")
        started = time.monotonic()
        with self._root() as conn:
            bench_source.load_customer(conn, self.args.rows)
        self.extra["load_s"] = round(time.monotonic() - started, 1)
        # Resolve the Delta jars now, so that no measured run pays for it.
        _check(subprocess.run(self._cli("spark-check"), cwd=self.project, env=self.env,
                              capture_output=True, text=True), "spark-check")
        # Only now: the MariaDB daemon started above must not become one of our measured orphans.
        bench_measure.become_subreaper()

    def _peers(self) -> None:
        """The other ways to copy the table, each into a Delta table of its own: dlt with each of
        its two readers, and the plainest fast copy (connectorx into delta-rs, no change capture)."""
        python = self._peer_python()
        for backend in ("pyarrow", "connectorx"):
            dest = self.build / f"dlt-lake-{backend}"
            shutil.rmtree(dest, ignore_errors=True)
            measured = self._measure(f"dlt-{backend}", [
                str(python), str(TEMPLATE / "scripts" / "bench_dlt.py"), *self._source_args(), "--dest", str(dest),
                "--backend", backend])
            result = _json(measured)
            self._row(f"dlt sql_table ({backend}) -> Delta", int(result["rows"]), measured,
                      f"dlt {result.get('dlt_version', '?')}")
        dest = self.build / "cx-lake"
        measured = self._measure("connectorx-delta", [
            str(python), str(TEMPLATE / "scripts" / "bench_cx_delta.py"), *self._source_args(), "--dest", str(dest),
            "--key", bench_source.KEY, "--partitions", "2"])
        result = _json(measured)
        self._row(CX_DELTA, int(result["rows"]), measured, f"connectorx {result.get('connectorx_version', '?')}")

    def _peer_python(self) -> Path:
        venv = self.build / "dlt-venv"
        python = venv / "bin" / "python"
        requirements = TEMPLATE / "scripts" / "bench-dlt-requirements.txt"
        stamp = venv / ".installed"
        if not stamp.exists() or stamp.read_text() != requirements.read_text():
            print("==> installing dlt and connectorx into their own virtualenv", flush=True)
            _check(subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], capture_output=True,
                                  text=True), "venv")
            _check(subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(requirements)],
                                  capture_output=True, text=True), "pip install dlt")
            stamp.write_text(requirements.read_text())
        return python

    def _source_args(self) -> list[str]:
        return ["--host", self.source.host, "--port", str(PORT), "--user", self.source.user,
                "--database", self.source.database, "--table", bench_source.TABLE]

    def _c_client(self) -> None:
        """MariaDB's own C client streaming the table to /dev/null: the floor for any reader."""
        client = shutil.which("mariadb") or shutil.which("mysql")
        if client is None:
            self.extra["c_client"] = "not measured: no mariadb client on PATH"
            return
        line = (f"{shlex.quote(client)} --quick --batch --skip-column-names -h {self.source.host} -P {PORT} "
                f"-u {shlex.quote(self.source.user)} {shlex.quote(self.source.database)} "
                f"-e 'SELECT * FROM {bench_source.TABLE}' > /dev/null")
        print("==> c-client", flush=True)
        measured = bench_measure.run(["sh", "-c", line], cwd=self.project, env={**self.env, "MYSQL_PWD": PASSWORD},
                                     log=self.build / "c-client.log")
        if measured.returncode != 0:
            raise SystemExit(f"ERROR: bench step c-client failed (exit {measured.returncode}):\n{measured.tail()}")
        self._row(C_CLIENT, self.args.rows, measured, "rows: the table's")

    def _changes(self) -> None:
        mix = bench_source.ChangeMix.of(self.args.changes)
        print(f"==> applying {mix.total:,} changes ({mix.updates:,} updates, {mix.inserts:,} inserts, "
              f"{mix.deletes:,} deletes)", flush=True)
        with self._root() as conn:
            start = bench_source.binlog_position(conn)
            bench_source.apply_changes(conn, self.args.rows, mix)
            stop = bench_source.binlog_position(conn)
        decode = self._measure("decode", [self.python, __file__, "decode", *map(str, start), *map(str, stop)])
        decoded = _json(decode)["rows"]
        self._row("raw binlog decode (python-mysql-replication)", decoded, decode)
        ours = self._measure("catch-up", self._cli("ingest"))
        self._row("ours: binlog catch-up -> bronze+silver", mix.total, ours, _ingest_note(ours))
        self.extra["changes"] = asdict(mix) | {"decoded_rows": decoded}
        self._debezium(start, decoded)

    def _debezium(self, start: tuple[str, int], changes: int) -> None:
        """Debezium's embedded engine with its MariaDB connector reading the same range and
        counting its change records (``bench-debezium/``, built with Maven from Maven Central)."""
        java, mvn = shutil.which("java"), shutil.which("mvn")
        if java is None or mvn is None:
            self.extra["debezium"] = "not measured: java and mvn are needed on PATH"
            return
        build = self.build / "debezium"
        print("==> building the Debezium peer (mvn package)", flush=True)
        built = subprocess.run([mvn, "-B", "-q", "-f", str(TEMPLATE / "scripts" / "bench-debezium" / "pom.xml"),
                                "package", "-DskipTests", f"-Dbench.build={build}"], capture_output=True, text=True)
        if built.returncode != 0:
            self.extra["debezium"] = f"not measured: mvn package failed: {(built.stdout + built.stderr)[-400:]}"
            return
        with self._root() as conn, conn.cursor() as cur:
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", start)
            gtids = str(cur.fetchone()[0])
        print("==> debezium", flush=True)
        measured = bench_measure.run(
            [java, "-cp", f"{build / 'classes'}:{build / 'lib'}/*", "BenchDebezium", self.source.host, str(PORT),
             self.source.user, self.source.database, bench_source.TABLE, start[0], str(start[1]), gtids, str(changes)],
            cwd=self.build, env={**self.env, "MYSQL_PWD": PASSWORD}, log=self.build / "debezium.log")
        if measured.returncode != 0:
            self.extra["debezium"] = f"not measured: it exited {measured.returncode}: {measured.tail()[-400:]}"
            return
        result = _json(measured)
        self._row(DEBEZIUM, int(result["rows"]), measured, f"debezium {result.get('debezium_version', '?')}")

    def _follow(self) -> None:
        help_text = subprocess.run(self._cli("--help"), cwd=self.project, env=self.env, capture_output=True,
                                   text=True).stdout
        if " follow" not in help_text and "follow," not in help_text:
            self.extra["follow"] = "not measured: the project has no follow command"
            return
        seconds = self.args.follow_seconds
        print(f"==> follow mode: {IDLE_FOLLOW_S:.0f} s idle, then {seconds:.0f} s at {self.args.follow_rate:,} "
              "changes/s", flush=True)
        # An idle follow as a team runs it (the default options): once Spark is up and its first
        # cycle is done, it waits on the binlog stream with Spark up; after two minutes without
        # work Spark's context rests. Its CPU in each stretch is what idling costs.
        idle = self._measure("follow-idle", self._cli("follow", "--max-seconds", str(IDLE_FOLLOW_S)),
                             marks_s=(IDLE_UP_S, IDLE_RESTING_S, IDLE_RESTED_S, IDLE_RESTED_END_S))
        counts = _follow_counts(self.project)
        up, rested = idle.cpu_share(IDLE_UP_S, IDLE_RESTING_S), idle.cpu_share(IDLE_RESTED_S, IDLE_RESTED_END_S)
        rests = "Spark's context stopped until the next change" in idle.output
        self.extra["follow_idle"] = {"seconds": IDLE_FOLLOW_S, **counts, "cpu_s": idle.cpu_s,
                                     "percent_of_a_core_spark_up": _percent(up),
                                     "percent_of_a_core_spark_resting": _percent(rested) if rests else None}
        print(f"    idle follow: {counts.get('cycles')} cycle(s) in {idle.wall_s:.0f} s; "
              f"{IDLE_UP_S:.0f}-{IDLE_RESTING_S:.0f} s (Spark up) {_shown_percent(up)} of a core; "
              f"{IDLE_RESTED_S:.0f}-{IDLE_RESTED_END_S:.0f} s (Spark resting) "
              f"{_shown_percent(rested) if rests else 'n/a (Spark did not rest)'} (target < 1%)", flush=True)
        log = self.build / "follow.log"
        with open(log, "w") as out:
            follower = subprocess.Popen(self._cli("follow"), cwd=self.project, env=self.env, stdout=out,
                                        stderr=subprocess.STDOUT)
            _wait_for(log, "follow: ", 120)  # Spark is up and the loop runs
            time.sleep(10)  # its first cycle (a full ingest) is done
            with bench_source.SteadyWriter(self._root, self.args.rows, self.args.follow_rate) as writer:
                time.sleep(seconds)
            time.sleep(10)  # the last writes reach silver
            follower.send_signal(signal.SIGTERM)
            try:
                follower.wait(120)
            except subprocess.TimeoutExpired:
                follower.kill()
        lake = Path(self.project / "lake")
        lags = freshness(lake, bench_source.TABLE, writer.commits)
        # A follow process runs for hours: its JVM compiles the MERGE's hot code within its first
        # cycles, which the first third of the window includes and the steady figure leaves out.
        steady = steady_commits(writer.commits, seconds / 3)
        self.extra["follow_freshness"] = _percentiles(lags) | {
            "writes": len(writer.commits), "rate_per_s": self.args.follow_rate, "exit": follower.returncode}
        self.extra["follow_freshness_steady"] = _percentiles(freshness(lake, bench_source.TABLE, steady)) | {
            "after_s": round(seconds / 3, 1)}

    def _log_listing(self) -> None:
        """One listing of silver's Delta log grown by 100,000 files (hours of a busy follow's
        commits), through the engine's log store and through Delta's own."""
        print(f"==> a Delta log listing with {LISTING_EXTRA_FILES:,} more files", flush=True)
        done = subprocess.run([self.python, str(TEMPLATE / "scripts" / "bench_log_listing.py"), str(self.project),
                               bench_source.TABLE, str(LISTING_EXTRA_FILES)], cwd=self.project, env=self.env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            self.extra["delta_log_listing"] = f"not measured: {(done.stdout + done.stderr)[-400:]}"
            return
        listing = json.loads(done.stdout.splitlines()[-1])
        self.extra["delta_log_listing"] = listing | {
            "delta_over_engine": round(listing["delta_ms"] / max(listing["engine_ms"], 0.1), 1)}
        print(f"    {listing['files_in_log']:,} files: the engine's store {listing['engine_ms']} ms, "
              f"Delta's {listing['delta_ms']} ms", flush=True)

    # -- helpers ------------------------------------------------------------------------

    def _cli(self, *args: str) -> list[str]:
        return [self.python, "-m", PACKAGE, *args]

    def _root(self):
        import pymysql

        return pymysql.connect(unix_socket=str(self.project / ".source" / "mariadb.sock"), user="root",
                               password="", database="bench", autocommit=True)

    def _measure(self, name: str, command: list[str], marks_s: Sequence[float] = ()) -> Measurement:
        print(f"==> {name}", flush=True)
        measured = bench_measure.run(command, cwd=self.project, env=self.env, log=self.build / f"{name}.log",
                                     marks_s=marks_s)
        if measured.returncode != 0:
            raise SystemExit(f"ERROR: bench step {name} failed (exit {measured.returncode}):\n{measured.tail()}")
        return measured

    def _row(self, name: str, rows: int, measured: Measurement, note: str = "") -> None:
        row = Row(name, rows, measured.wall_s, measured.cpu_s, measured.peak_pss_mb, note,
                  (measured.load_at_start, measured.load_at_end))
        self.rows.append(row)
        print(f"    {row.rows:>10,} rows  {row.wall_s:8.1f} s  {row.rows_per_s:>9,.0f} rows/s  "
              f"cpu {row.cpu_s:7.1f} s  peak {row.peak_pss_mb:7.0f} MB  load {_load(row)}  {note}", flush=True)

    def _report(self) -> None:
        print(f"\nBenchmark: {self.args.rows:,} TPC-DS customer rows, {os.cpu_count()} cores, "
              f"{dt.datetime.now().isoformat(timespec='seconds')}")
        print(f"{'step':<46} {'rows':>10} {'wall s':>8} {'rows/s':>9} {'CPU s':>8} {'peak MB':>8} "
              f"{'load start/end':>14}")
        for row in self.rows:
            print(f"{row.name:<46} {row.rows:>10,} {row.wall_s:>8.1f} {row.rows_per_s:>9,.0f} "
                  f"{row.cpu_s:>8.1f} {row.peak_pss_mb:>8.0f} {_load(row):>14}  {row.note}")
        print(f"(load: the 1-minute load average as each step started and ended; above {os.cpu_count()} "
              "the machine was busy and the step's figures are not comparable)")
        by_name = {r.name: r for r in self.rows}
        ratios = {}
        ours = by_name.get("ours: snapshot -> bronze+silver")
        # Issue 29's targets: at least the dlt connectorx backend at 2M rows and the plain
        # connectorx -> delta-rs copy at 6M rows (ratios are our rows/s over the peer's).
        for other, target in (("dlt sql_table (connectorx) -> Delta", " (target >= 1 at 2M rows)"),
                              (CX_DELTA, " (target >= 1 at 6M rows)"), ("dlt sql_table (pyarrow) -> Delta", ""),
                              (C_CLIENT, ""), ("pymysql scan (1 connection)", "")):
            if ours and other in by_name and by_name[other].rows_per_s:
                ratios[f"snapshot vs {other}{target}"] = round(ours.rows_per_s / by_name[other].rows_per_s, 2)
                ratios[f"snapshot CPU s / {other}'s (target <= 2 vs connectorx)"
                       if "connectorx" in other else f"snapshot CPU s / {other}'s"] = round(
                    ours.cpu_s / max(by_name[other].cpu_s, 0.01), 2)
        catch_up = by_name.get("ours: binlog catch-up -> bronze+silver")
        decoded = by_name.get("raw binlog decode (python-mysql-replication)")
        if catch_up and decoded and decoded.rows_per_s:
            ratios["binlog catch-up vs raw decode"] = round(catch_up.rows_per_s / decoded.rows_per_s, 2)
        debezium = by_name.get(DEBEZIUM)
        if catch_up and debezium and debezium.rows_per_s:
            ratios["binlog catch-up vs Debezium embedded (target >= 0.8, aim 1)"] = round(
                catch_up.rows_per_s / debezium.rows_per_s, 2)
            ratios["binlog catch-up CPU s / Debezium's"] = round(catch_up.cpu_s / max(debezium.cpu_s, 0.01), 2)
        checked = by_name.get("ours: dq (count, keys, values)")
        if checked and ours and ours.wall_s:
            # Issue 29's target: dq at most half the snapshot's wall time on the same table.
            ratios["dq wall time / snapshot wall time (target <= 0.5)"] = round(checked.wall_s / ours.wall_s, 2)
        for name, value in ratios.items():
            print(f"{name:<80} {value:>6.2f}x")
        for name, value in self.extra.items():
            print(f"{name}: {value}")
        results = {"rows": self.args.rows, "cores": os.cpu_count(), "at": dt.datetime.now().isoformat(),
                   "steps": [asdict(r) | {"rows_per_s": round(r.rows_per_s)} for r in self.rows],
                   "ratios": ratios, **self.extra}
        path = self.build / "results.json"
        path.write_text(json.dumps(results, indent=2) + "\n")
        print(f"results: {path}")


def _load(row: Row) -> str:
    return f"{row.load[0]:.2f}/{row.load[1]:.2f}"


def steady_commits(commits: list[tuple[float, tuple[str, int]]],
                   warm_up_s: float) -> list[tuple[float, tuple[str, int]]]:
    """The writes made ``warm_up_s`` or more after the first one."""
    if not commits:
        return []
    start = commits[0][0]
    return [c for c in commits if c[0] - start >= warm_up_s]


def freshness(lake: Path, table: str, commits: list[tuple[float, tuple[str, int]]]) -> list[float]:
    """Seconds from each source commit to the first silver commit that covers its position.

    Silver commits record the bronze batch they applied; bronze commits carry the checkpoint
    with the binlog position every change up to which is in bronze. A commit not yet covered
    when the follow run ended is left out (and counted in ``writes`` minus the samples)."""
    covered = {}  # bronze batch -> position key
    for info in _commit_infos(lake / "bronze" / table):
        meta = info.get("userMetadata")
        if meta:
            checkpoint = json.loads(meta)
            if checkpoint.get("position"):
                file, offset = checkpoint["position"]
                covered[checkpoint["batch"]] = (_file_number(file), int(offset))
    applied = []  # (commit time, position key)
    for info in _commit_infos(lake / "silver" / table):
        meta = info.get("userMetadata")
        if meta and json.loads(meta).get("bronze_batch") in covered:
            applied.append((info["timestamp"] / 1000, covered[json.loads(meta)["bronze_batch"]]))
    applied.sort()
    lags = []
    for written_at, (file, offset) in commits:
        key = (_file_number(file), offset)
        reached = next((at for at, position in applied if position >= key and at >= written_at), None)
        if reached is not None:
            lags.append(reached - written_at)
    return lags


def _commit_infos(table: Path) -> list[dict]:
    infos = []
    for path in sorted((table / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            if line.startswith('{"commitInfo"'):
                infos.append(json.loads(line)["commitInfo"])
    return infos


def _file_number(name: str) -> int:
    return int(name.rsplit(".", 1)[1])


def _percentiles(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"samples": 0, "p50_s": None, "p95_s": None, "max_s": None}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {"samples": len(ordered), "p50_s": at(0.5), "p95_s": at(0.95), "max_s": round(ordered[-1], 2)}


def _percent(share: float | None) -> float | None:
    return None if share is None else round(100 * share, 2)


def _shown_percent(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.2f}%"


def _follow_counts(project: Path) -> dict[str, int]:
    """Cycle counts the follow run recorded in run_results.json."""
    try:
        results = json.loads((project / "target" / "run_results.json").read_text())
    except (OSError, ValueError):
        return {}
    return {k: int(results[k]) for k in ("cycles", "idle_cycles") if isinstance(results.get(k), int)}


def _wait_for(log: Path, text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise SystemExit(f"ERROR: follow mode did not start in {timeout_s:.0f} s; see {log}")


def _ingest_note(measured: Measurement) -> str:
    lines = [line for line in measured.output.splitlines() if " ok " in line]
    return lines[-1].split("batch")[0].split(" ok ", 1)[1].strip() if lines else ""


def _json(measured: Measurement) -> dict:
    for line in reversed(measured.output.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise SystemExit(f"ERROR: no result line in the output:\n{measured.tail()}")


def _check(done: subprocess.CompletedProcess, what: str) -> None:
    if done.returncode != 0:
        tail = "\n".join(((done.stdout or "") + (done.stderr or "")).strip().splitlines()[-10:])
        raise SystemExit(f"ERROR: bench step {what} failed (exit {done.returncode}):\n{tail}")


if __name__ == "__main__":
    sys.exit(main())
