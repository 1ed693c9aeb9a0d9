"""An embedded MariaDB for the demo and the tests: a real server, its own instance.

It runs from Debian's ``mariadb-server`` package (installed on demand when this user may run
apt-get), with its own data directory, port and socket, bound to 127.0.0.1, and binlog settings
made for change capture. It never touches the system's default instance.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pymysql

from ..errors import ConfigError, SourceUnavailableError

SEARCH_PATH = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin")
MY_CNF = """[client]
socket = {socket}
user = root

[mysqld]
datadir = {datadir}
socket = {socket}
port = {port}
bind-address = 127.0.0.1
pid-file = {pidfile}
log-error = {errlog}
{user_line}
server-id = 1
log-bin = mysql-bin
binlog-format = ROW
binlog-row-image = FULL
binlog-row-metadata = FULL
skip-name-resolve
innodb-buffer-pool-size = 128M
innodb-log-file-size = 48M
innodb-flush-log-at-trx-commit = 2
max-connections = 200
character-set-server = utf8mb4
collation-server = utf8mb4_general_ci
"""


@dataclass(frozen=True)
class EmbeddedServer:
    home: Path
    port: int

    @property
    def datadir(self) -> Path:
        return self.home / "data"

    @property
    def socket(self) -> Path:
        return self.home / "mariadb.sock"

    @property
    def cnf(self) -> Path:
        return self.home / "my.cnf"

    @property
    def pidfile(self) -> Path:
        return self.home / "mariadb.pid"

    @property
    def errlog(self) -> Path:
        return self.home / "mariadb.err"


def find_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in SEARCH_PATH:
        candidate = Path(folder) / name
        if candidate.exists():
            return str(candidate)
    return None


def ensure_installed() -> None:
    """Install Debian's mariadb-server when it is missing and this user may use apt-get."""
    if find_binary("mariadbd") and find_binary("mariadb-install-db"):
        return
    apt = shutil.which("apt-get")
    if apt is None:
        raise ConfigError(
            "MariaDB server binaries not found and apt-get is unavailable: install MariaDB "
            "10.6+ yourself, or point profiles.yml at an existing MySQL/MariaDB"
        )
    prefix: list[str] = []
    if os.geteuid() != 0:
        if not shutil.which("sudo") or subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode:
            raise ConfigError("mariadb-server is missing: run `sudo apt-get install -y mariadb-server`")
        prefix = ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print("Installing Debian's mariadb-server (needed once for the embedded source)...", flush=True)
    for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "mariadb-server"]):
        done = subprocess.run(prefix + command, env=env, capture_output=True, text=True)
        if done.returncode:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
            raise ConfigError(f"`{' '.join(command)}` failed ({tail[0]}): install mariadb-server by hand")
    if not find_binary("mariadbd"):
        raise ConfigError("mariadb-server installed but mariadbd was not found in /usr/sbin")


def is_running(server: EmbeddedServer) -> bool:
    pid = _pid(server)
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start(server: EmbeddedServer, timeout: float = 60.0) -> None:
    """Initialise the data directory if needed and start the server; idempotent."""
    if is_running(server):
        return
    ensure_installed()
    _check_port_free(server.port)
    server.home.mkdir(parents=True, exist_ok=True)
    user_line = "user = root" if os.geteuid() == 0 else f"user = {getpass.getuser()}"
    server.cnf.write_text(MY_CNF.format(
        datadir=server.datadir, socket=server.socket, port=server.port, pidfile=server.pidfile,
        errlog=server.errlog, user_line=user_line,
    ))
    if not (server.datadir / "mysql").exists():
        done = subprocess.run(
            [find_binary("mariadb-install-db") or "mariadb-install-db",
             f"--defaults-file={server.cnf}", "--auth-root-authentication-method=normal",
             "--skip-test-db"],
            capture_output=True, text=True,
        )
        if done.returncode:
            raise SourceUnavailableError(
                f"mariadb-install-db failed for {server.datadir}: {_last_line(done.stderr or done.stdout)}"
            )
    process = subprocess.Popen(
        [find_binary("mariadbd") or "mariadbd", f"--defaults-file={server.cnf}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SourceUnavailableError(
                f"the embedded MariaDB exited at start: {_last_line(_read(server.errlog))} "
                f"(full log: {server.errlog})"
            )
        try:
            root_connection(server).close()
            return
        except pymysql.err.OperationalError:
            time.sleep(0.3)
    raise SourceUnavailableError(f"the embedded MariaDB did not answer in {timeout:.0f} s: see {server.errlog}")


def stop(server: EmbeddedServer, timeout: float = 30.0) -> None:
    pid = _pid(server)
    if pid is None or not is_running(server):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and is_running(server):
        time.sleep(0.2)
    if is_running(server):
        os.kill(pid, signal.SIGKILL)


def root_connection(server: EmbeddedServer, database: str | None = None) -> pymysql.connections.Connection:
    return pymysql.connect(unix_socket=str(server.socket), user="root", password="",
                           database=database, autocommit=True, charset="utf8mb4",
                           connect_timeout=5)


def create_ingest_user(server: EmbeddedServer, user: str, password: str, database: str) -> None:
    """The least privileges change capture needs, for TCP logins from 127.0.0.1."""
    with root_connection(server) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")
        cur.execute("CREATE USER IF NOT EXISTS %s@'127.0.0.1' IDENTIFIED BY %s", (user, password))
        cur.execute("ALTER USER %s@'127.0.0.1' IDENTIFIED BY %s", (user, password))
        cur.execute(f"GRANT SELECT ON `{database}`.* TO %s@'127.0.0.1'", (user,))
        cur.execute("GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO %s@'127.0.0.1'", (user,))


def run_sql(server: EmbeddedServer, statements: Iterable[str], database: str | None = None) -> None:
    with root_connection(server, database) as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def split_sql(text: str) -> list[str]:
    """Split a script on ``;`` at line ends; our demo scripts keep one statement per ``;``."""
    lines = [line for line in text.splitlines() if not line.strip().startswith("--")]
    parts = (s.strip().rstrip(";").strip() for s in "\n".join(lines).split(";\n"))
    return [p for p in parts if p]


def _pid(server: EmbeddedServer) -> int | None:
    try:
        return int(server.pidfile.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def free_port() -> int:
    """A loopback port nothing listens on now (for a test's own server)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _check_port_free(port: int) -> None:
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            raise ConfigError(
                f"port {port} on 127.0.0.1 is taken by another process: stop it or set another "
                "port for the embedded source in profiles.yml"
            )


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
