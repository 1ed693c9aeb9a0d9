"""Check that the source is set up for change capture before reading anything.

The checks are a pure function of the server's variables and grants (unit-tested without a
server); ``run_preflight`` only gathers them. Each problem names the setting and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pymysql

from ..errors import PreflightError
from .connection import query

REQUIRED = {
    "log_bin": "ON",
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
}
WHY = {
    "log_bin": "binary logging must be on",
    "binlog_format": "change capture needs row events",
    "binlog_row_image": "full before/after images are needed to replay changes",
    "binlog_row_metadata": "column names travel in the binlog only with full metadata",
}


CHECKED = (*REQUIRED, "binlog_transaction_compression", "binlog_row_value_options")


@dataclass(frozen=True)
class Problem:
    """One thing to fix on the source: the server setting or grant at fault, and the fix."""

    setting: str  # a server variable (``binlog_format``) or a privilege (``REPLICATION SLAVE``)
    message: str

    def __str__(self) -> str:
        return self.message


def settings_problems(variables: Mapping[str, str]) -> list[Problem]:
    problems = []
    for name, wanted in REQUIRED.items():
        actual = str(variables.get(name, "missing")).upper()
        if actual != wanted:
            problems.append(Problem(name, (
                f"{name} is {actual} on the source, must be {wanted} ({WHY[name]}): set "
                f"{name}={wanted} in the server configuration and restart it"
            )))
    if str(variables.get("binlog_transaction_compression", "OFF")).upper() == "ON":
        problems.append(Problem("binlog_transaction_compression", (
            "binlog_transaction_compression is ON: compressed transactions cannot be decoded; "
            "set binlog_transaction_compression=OFF"
        )))
    if "PARTIAL_JSON" in str(variables.get("binlog_row_value_options", "")).upper():
        problems.append(Problem("binlog_row_value_options",
                                "binlog_row_value_options=PARTIAL_JSON hides JSON values: set it to ''"))
    return problems


def grant_problems(grants: Sequence[str]) -> list[Problem]:
    text = " ".join(g.upper() for g in grants)
    if "ALL PRIVILEGES ON *.*" in text:
        return []
    problems = []
    if "REPLICATION SLAVE" not in text and "REPLICATION REPLICA" not in text:
        problems.append(Problem("REPLICATION SLAVE",
                                "the source user lacks REPLICATION SLAVE: GRANT REPLICATION SLAVE ON *.* TO it"))
    if not any(p in text for p in ("REPLICATION CLIENT", "BINLOG MONITOR", "SUPER")):
        problems.append(Problem("REPLICATION CLIENT", (
            "the source user lacks REPLICATION CLIENT (BINLOG MONITOR on MariaDB): grant it ON *.*"
        )))
    if "SELECT" not in text:
        problems.append(Problem("SELECT", "the source user lacks SELECT: GRANT SELECT ON <database>.* TO it"))
    return problems


def server_variables(conn: pymysql.connections.Connection) -> dict[str, str]:
    """The global variables the checks read."""
    placeholders = ", ".join(["%s"] * len(CHECKED))
    rows = query(conn, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({placeholders})", CHECKED)
    return {str(k): str(v) for k, v in rows}


def user_grants(conn: pymysql.connections.Connection) -> list[str]:
    return [str(r[0]) for r in query(conn, "SHOW GRANTS FOR CURRENT_USER()")]


def run_preflight(conn: pymysql.connections.Connection) -> None:
    """Raise ``PreflightError`` naming every problem (its ``setting`` is the first one's)."""
    problems = settings_problems(server_variables(conn)) + grant_problems(user_grants(conn))
    if problems:
        raise PreflightError(preflight_message(problems), setting=problems[0].setting)


def preflight_message(problems: Sequence[Problem]) -> str:
    """One line: the first problem with its fix, the others by name (fixing one at a time and
    running again would meet them one by one), and the command that shows every check."""
    message = problems[0].message
    if len(problems) > 1:
        others = ", ".join(p.setting for p in problems[1:])
        message += f"; {len(problems) - 1} more to fix: {others}"
    return message + "; `make debug` (lakehouse debug) checks each setting and grant with its fix"
