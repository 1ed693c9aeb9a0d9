"""A local table's log read as files: an app id's last committed version from the newest commit
files back, and local lake paths."""

import json
from pathlib import Path

from lakehouse_engine.sink.log.localfiles import last_txn_version, local_path


def write_commit(log: Path, version: int, *actions: dict) -> None:
    log.mkdir(exist_ok=True)
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def info(metadata: str = "") -> dict:
    return {"commitInfo": {"operation": "WRITE", "userMetadata": metadata or None}}


def txn(app: str, version: int) -> dict:
    return {"txn": {"appId": app, "version": version, "lastUpdated": 1}}


def test_the_newest_commit_of_the_app_id_wins_over_older_ones(tmp_path):
    log = tmp_path / "_delta_log"
    write_commit(log, 0, info())
    write_commit(log, 1, info(), txn("bronze:t", 1))
    write_commit(log, 2, info(), txn("bronze:t", 2), {"add": {"path": "x"}})
    write_commit(log, 3, info('{"txn": "bronze:t"}'), txn("silver:t", 9))  # another app id
    assert last_txn_version(log, 3, "bronze:t") == 2
    assert last_txn_version(log, 3, "silver:t") == 9
    assert last_txn_version(log, 1, "bronze:t") == 1  # only commits up to the snapshot read


def test_an_app_id_that_never_committed_is_minus_one(tmp_path):
    log = tmp_path / "_delta_log"
    write_commit(log, 0, info())
    write_commit(log, 1, info(), txn("other", 4))
    assert last_txn_version(log, 1, "bronze:t") == -1


def test_a_cleaned_up_commit_file_defers_to_delta(tmp_path):
    log = tmp_path / "_delta_log"
    write_commit(log, 5, info())
    write_commit(log, 6, info())
    assert last_txn_version(log, 6, "bronze:t") is None


def test_local_lake_paths_are_normalised_as_hadoop_normalises_them():
    assert local_path("file:///lake/bronze/t") == "/lake/bronze/t"
    assert local_path("file:/lake/bronze/t") == "/lake/bronze/t"
    assert local_path("/work/../lake//bronze/t/") == "/lake/bronze/t"
    assert local_path("//lake/bronze") == "/lake/bronze"
