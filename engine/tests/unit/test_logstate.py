"""Replaying a Delta log in Python: reconciliation by path and deletion vector, checkpoints, and
logs it must refuse rather than misread."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse_engine.sink.log import logstate
from lakehouse_engine.sink.log.logstate import StateCache, Unreadable

DV1 = {"storageType": "u", "pathOrInlineDv": "a" * 20, "offset": 1, "sizeInBytes": 10, "cardinality": 1}
DV2 = {"storageType": "u", "pathOrInlineDv": "b" * 20, "offset": 1, "sizeInBytes": 10, "cardinality": 2}


def _add(path: str, dv: dict | None = None) -> dict:
    add = {"path": path, "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}
    return {"add": {**add, "deletionVector": dv}} if dv else {"add": add}


def _remove(path: str, dv: dict | None = None) -> dict:
    remove = {"path": path, "deletionTimestamp": 0, "dataChange": True}
    return {"remove": {**remove, "deletionVector": dv}} if dv else {"remove": remove}


def _commit(root: Path, version: int, *actions: dict) -> None:
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def _dvs(state: logstate.TableState) -> dict[str, str | None]:
    return {add["path"]: (add.get("deletionVector") or {}).get("pathOrInlineDv") for add in state.live()}


def test_a_file_is_known_by_its_path_and_deletion_vector(tmp_path):
    _commit(tmp_path, 0, {"protocol": {"minReaderVersion": 3}}, {"metaData": {"id": "t"}}, _add("a"), _add("b"))
    # Delta writes a deletion vector's change as the old entry's remove and the new entry's add,
    # in either order within the commit
    _commit(tmp_path, 1, _add("a", DV1), _remove("a"))
    _commit(tmp_path, 2, _remove("a", DV1), _add("a", DV2), _remove("b"))
    state = logstate.load(tmp_path, 1)
    assert _dvs(state) == {"a": "a" * 20, "b": None}
    state.advance(2)
    assert _dvs(state) == {"a": "b" * 20} and state.version == 2 and state.protocol == {"minReaderVersion": 3}


def test_a_remove_of_another_vector_leaves_the_live_entry_and_two_live_entries_are_refused(tmp_path):
    _commit(tmp_path, 0, _add("a", DV1))
    _commit(tmp_path, 1, _remove("a", DV2))
    assert _dvs(logstate.load(tmp_path, 1)) == {"a": "a" * 20}
    _commit(tmp_path, 2, _add("a", DV2))
    with pytest.raises(Unreadable, match="two live entries"):
        logstate.load(tmp_path, 2)


def test_a_checkpoint_and_the_commits_after_it_make_the_state(tmp_path):
    _commit(tmp_path, 5, _add("c"))  # commits 0..4 are gone: only the checkpoint at 4 has them
    add_type = pa.struct([("path", pa.string()), ("partitionValues", pa.map_(pa.string(), pa.string())),
                          ("size", pa.int64()), ("dataChange", pa.bool_()), ("stats", pa.string()),
                          ("deletionVector", pa.struct([("storageType", pa.string()),
                                                        ("pathOrInlineDv", pa.string())]))])
    rows = pa.table({
        "add": pa.array([{"path": "a", "partitionValues": [], "size": 3, "dataChange": False, "stats": "{}",
                          "deletionVector": None},
                         {"path": "b", "partitionValues": [("p", "1")], "size": 4, "dataChange": False,
                          "stats": None, "deletionVector": {"storageType": "u", "pathOrInlineDv": "x"}},
                         None], type=add_type),
        "protocol": pa.array([None, None, {"minReaderVersion": 1, "minWriterVersion": 2}],
                             type=pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())])),
    })
    pq.write_table(rows, tmp_path / "_delta_log" / f"{4:020d}.checkpoint.parquet")
    state = logstate.load(tmp_path, 5)
    by_path = {add["path"]: add for add in state.live()}
    assert sorted(by_path) == ["a", "b", "c"]
    assert by_path["a"] == {"path": "a", "partitionValues": {}, "size": 3, "dataChange": False, "stats": "{}"}
    assert by_path["b"]["partitionValues"] == {"p": "1"} and by_path["b"]["deletionVector"]["pathOrInlineDv"] == "x"
    assert state.protocol == {"minReaderVersion": 1, "minWriterVersion": 2}
    assert logstate.load(tmp_path, 4).version == 4


def test_a_missing_commit_or_a_v2_checkpoint_is_unreadable(tmp_path):
    _commit(tmp_path, 0, _add("a"))
    _commit(tmp_path, 2, _add("b"))
    with pytest.raises(Unreadable, match="commit 1"):
        logstate.load(tmp_path, 2)
    pq.write_table(pa.table({"checkpointMetadata": [{"version": 2}]}),
                   tmp_path / "_delta_log" / f"{2:020d}.checkpoint.parquet")
    with pytest.raises(Unreadable, match="v2"):
        logstate.load(tmp_path, 2)
    (tmp_path / "_delta_log" / f"{2:020d}.checkpoint.parquet").unlink()
    (tmp_path / "_delta_log" / f"{2:020d}.checkpoint.abc.json").write_text("{}")
    with pytest.raises(Unreadable, match="not a classic"):
        logstate.load(tmp_path, 2)


def test_the_cache_reads_only_the_commits_since_its_state(tmp_path):
    cache = StateCache()
    _commit(tmp_path, 0, _add("a"))
    assert _dvs(cache.at(tmp_path, 0)) == {"a": None}
    # commit 0 now says otherwise, in place (same file, size and time): only a replay would see it
    first = tmp_path / "_delta_log" / f"{0:020d}.json"
    seen = first.stat()
    with first.open("r+") as file:
        file.write(first.read_text().replace('"a"', '"z"'))
    os.utime(first, ns=(seen.st_atime_ns, seen.st_mtime_ns))
    _commit(tmp_path, 1, _add("b"))
    assert sorted(_dvs(cache.at(tmp_path, 1))) == ["a", "b"]
    # asked for an older version, it rebuilds from the log rather than go backwards
    assert sorted(_dvs(cache.at(tmp_path, 0))) == ["z"]


def test_a_table_made_again_at_the_same_path_is_replayed_anew(tmp_path):
    cache = StateCache()
    _commit(tmp_path, 0, _add("old"))
    _commit(tmp_path, 1, _add("old-2"))
    assert sorted(_dvs(cache.at(tmp_path, 1))) == ["old", "old-2"]
    for commit in (tmp_path / "_delta_log").iterdir():
        commit.unlink()
    _commit(tmp_path, 0, _add("new"))
    _commit(tmp_path, 1, _add("new-2"))
    _commit(tmp_path, 2, _add("new-3"))
    assert sorted(_dvs(cache.at(tmp_path, 2))) == ["new", "new-2", "new-3"]
