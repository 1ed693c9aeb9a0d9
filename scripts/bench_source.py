"""The benchmark's source side: TPC-DS ``customer`` rows, a mixed change load, a steady writer,
and the two baselines that only read (a plain pymysql scan, a raw binlog decode).

Rows come from MariaDB's SEQUENCE engine (``seq_1_to_N``), so loading millions of rows is one
server-side ``INSERT ... SELECT`` per 100k rows: no data file to ship, the same rows every time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pymysql

TABLE = "customer"
KEY = "c_customer_sk"  # its integer primary key
LOAD_PIECE = 100_000  # rows per INSERT ... SELECT (one transaction each)
CHANGE_PIECE = 5_000  # rows per change transaction

# TPC-DS customer, as dsdgen defines it (18 columns, integer surrogate key).
CUSTOMER_DDL = """
CREATE TABLE customer (
  c_customer_sk          INT NOT NULL PRIMARY KEY,
  c_customer_id          CHAR(16) NOT NULL,
  c_current_cdemo_sk     INT,
  c_current_hdemo_sk     INT,
  c_current_addr_sk      INT,
  c_first_shipto_date_sk INT,
  c_first_sales_date_sk  INT,
  c_salutation           CHAR(10),
  c_first_name           CHAR(20),
  c_last_name            CHAR(30),
  c_preferred_cust_flag  CHAR(1),
  c_birth_day            INT,
  c_birth_month          INT,
  c_birth_year           INT,
  c_birth_country        VARCHAR(20),
  c_login                CHAR(13),
  c_email_address        CHAR(50),
  c_last_review_date_sk  INT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""

_ROW_SELECT = """
SELECT seq,
       CONCAT('AAAAAAAA', LPAD(UPPER(CONV(seq, 10, 16)), 8, '0')),
       IF(seq % 37 = 0, NULL, 1 + seq * 7 % 1920800),
       1 + seq * 3 % 7200,
       1 + seq * 11 % 1000000,
       2449000 + seq % 3000,
       IF(seq % 29 = 0, NULL, 2449030 + seq % 3000),
       ELT(1 + seq % 6, 'Mr.', 'Mrs.', 'Ms.', 'Dr.', 'Sir', 'Miss'),
       ELT(1 + seq % 8, 'James', 'Mary', 'Robert', 'Linda', 'Michael', 'Barbara', 'Javier', 'Zoë'),
       ELT(1 + seq % 7, 'Smith', 'Johnson', 'Williams', 'Brown', 'Jones', 'García', 'Miller'),
       IF(seq % 2 = 0, 'Y', 'N'),
       1 + seq % 28, 1 + seq % 12, 1924 + seq % 69,
       ELT(1 + seq % 5, 'GERMANY', 'FRANCE', 'UNITED STATES', 'BRAZIL', 'JAPAN'),
       NULL,
       CONCAT('customer', seq, '@', ELT(1 + seq % 3, 'example.com', 'mail.test', 'bench.invalid')),
       IF(seq % 13 = 0, NULL, 2452000 + seq % 600)
FROM seq_{low}_to_{high}
"""


@dataclass(frozen=True)
class Connection:
    host: str
    port: int
    user: str
    password: str
    database: str

    def open(self, **extra: object) -> pymysql.connections.Connection:
        return pymysql.connect(host=self.host, port=self.port, user=self.user, password=self.password,
                               database=self.database, autocommit=True, **extra)


def load_customer(conn: pymysql.connections.Connection, rows: int) -> None:
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
        cur.execute(CUSTOMER_DDL)
        for low in range(1, rows + 1, LOAD_PIECE):
            high = min(low + LOAD_PIECE - 1, rows)
            cur.execute(f"INSERT INTO {TABLE} " + _ROW_SELECT.format(low=low, high=high))


def binlog_position(conn: pymysql.connections.Connection) -> tuple[str, int]:
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, position = cur.fetchone()[:2]
    return str(file), int(position)


@dataclass(frozen=True)
class ChangeMix:
    updates: int
    inserts: int
    deletes: int

    @property
    def total(self) -> int:
        return self.updates + self.inserts + self.deletes

    @classmethod
    def of(cls, total: int) -> ChangeMix:
        """60% updates, 20% inserts, 20% deletes."""
        return cls(updates=total * 3 // 5, inserts=total // 5, deletes=total - total * 3 // 5 - total // 5)


def apply_changes(conn: pymysql.connections.Connection, rows: int, mix: ChangeMix) -> None:
    """Updates and deletes spread over the whole key range (every ``stride``-th key, so every
    silver file is touched, as scattered production traffic would), inserts above the top key;
    ``CHANGE_PIECE`` rows per transaction."""
    stride = max(3, rows // max(mix.updates, mix.deletes, 1))
    with conn.cursor() as cur:
        _spread(cur, "UPDATE {t} SET c_email_address = CONCAT('changed', c_customer_sk, '@example.com'), "
                "c_birth_year = c_birth_year + 1, c_login = 'updated' WHERE {where}", mix.updates, stride, 1)
        _spread(cur, "DELETE FROM {t} WHERE {where}", mix.deletes, stride, 2)
        for low in range(rows + 1, rows + mix.inserts + 1, CHANGE_PIECE):
            high = min(low + CHANGE_PIECE - 1, rows + mix.inserts)
            cur.execute(f"INSERT INTO {TABLE} " + _ROW_SELECT.format(low=low, high=high))


def _spread(cur, statement: str, count: int, stride: int, offset: int) -> None:
    """Run ``statement`` on ``count`` keys ``k`` with ``k % stride == offset`` (keys start at 1,
    so ``0 < offset < stride`` makes every one of them exist), ``CHANGE_PIECE`` keys a statement."""
    for first in range(0, count, CHANGE_PIECE):
        take = min(CHANGE_PIECE, count - first)
        low, high = first * stride, (first + take) * stride - 1
        cur.execute(statement.format(
            t=TABLE, where=f"c_customer_sk BETWEEN {low} AND {high} AND c_customer_sk % {stride} = {offset}"))


class SteadyWriter:
    """Updates ``rate`` rows a second, in ten transactions a second, on its own thread; records
    each commit's wall-clock time and the binlog position just after it."""

    def __init__(self, connect: Callable[[], pymysql.connections.Connection], rows: int, rate: int):
        self._connect, self._rows, self._rate = connect, rows, rate
        self.commits: list[tuple[float, tuple[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SteadyWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        per_tick = max(1, self._rate // 10)
        key = 1
        with self._connect() as conn, conn.cursor() as cur:
            tick = time.monotonic()
            while not self._stop.is_set():
                low, key = key, key + per_tick
                if key > self._rows:
                    low, key = 1, 1 + per_tick
                cur.execute(f"UPDATE {TABLE} SET c_login = %s WHERE c_customer_sk BETWEEN %s AND %s",
                            (f"t{int(time.time() * 1000) % 10**12}", low, key - 1))
                self.commits.append((time.time(), binlog_position(conn)))
                tick += 0.1
                time.sleep(max(0.0, tick - time.monotonic()))


def scan(source: Connection, table: str) -> int:
    """Every row of ``table`` over one connection, streamed (unbuffered cursor): the floor any
    snapshot reader is compared with."""
    rows = 0
    with source.open(cursorclass=pymysql.cursors.SSCursor) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM `{table}`")
        while batch := cur.fetchmany(10_000):
            rows += len(batch)
    return rows


def decode(source: Connection, start: tuple[str, int], stop: tuple[str, int], server_id: int) -> int:
    """Row changes between two binlog positions, decoded by python-mysql-replication with no
    further work: the ceiling of any binlog reader built on it."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    stream = BinLogStreamReader(
        connection_settings={"host": source.host, "port": source.port, "user": source.user,
                             "password": source.password},
        server_id=server_id, resume_stream=True, blocking=False, log_file=start[0], log_pos=start[1],
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], is_mariadb=False,
        enable_logging=False,
    )
    rows = 0
    end = (int(stop[0].rsplit(".", 1)[1]), stop[1])
    try:
        for event in stream:
            rows += len(event.rows)  # decodes every value of every row
            if (int(stream.log_file.rsplit(".", 1)[1]), stream.log_pos) >= end:
                break
    finally:
        stream.close()
    return rows
