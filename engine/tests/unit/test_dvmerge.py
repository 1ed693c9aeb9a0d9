"""Silver's MERGE in Arrow: the rule (newest change per key, the sequence guard, deletes), which
files it reads, the statistics it writes, and the tables it leaves to Delta's MERGE."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from lakehouse_engine.sink import dvcodec, dvmerge
from lakehouse_engine.sink.dvmerge import Unsupported, latest, may_hold, plan
from lakehouse_engine.sink.log import logstate

SEQ = pa.decimal128(38, 0)


def _changes(rows: list[tuple[int, int, str, str]]) -> pa.Table:
    """(id, _seq, _op, name) rows."""
    ids, seqs, ops, names = zip(*rows, strict=True) if rows else ((), (), (), ())
    return pa.table({"id": pa.array(ids, pa.int32()), "name": pa.array(names, pa.string()),
                     "_op": pa.array(ops, pa.string()), "_seq": pa.array([Decimal(s) for s in seqs], SEQ)})


def _target(rows: list[tuple[int, int, int, int]]) -> pa.Table:
    """(id, _tseq, _file, _pos) rows of silver."""
    ids, seqs, files, positions = zip(*rows, strict=True) if rows else ((), (), (), ())
    return pa.table({"id": pa.array(ids, pa.int32()), "_tseq": pa.array([Decimal(s) for s in seqs], SEQ),
                     "_file": pa.array(files, pa.int64()), "_pos": pa.array(positions, pa.uint64())})


def test_the_newest_change_of_each_key_wins_whatever_the_batch_order():
    changes = _changes([(1, 30, "u", "c"), (2, 5, "c", "x"), (1, 10, "c", "a"), (1, 20, "u", "b"),
                        (2, 5, "c", "x")])  # a repeat (at-least-once delivery) counts once
    newest = latest(changes, ["id"])
    assert sorted(zip(newest["id"].to_pylist(), newest["name"].to_pylist(), strict=True)) == [(1, "c"), (2, "x")]


def test_a_change_without_a_sequence_never_wins_over_one_with_a_sequence():
    changes = _changes([(1, 5, "u", "sequenced")])
    unsequenced = pa.table({"id": pa.array([1], pa.int32()), "name": ["null seq"], "_op": ["u"],
                            "_seq": pa.array([None], SEQ)})
    for batch in (pa.concat_tables([changes, unsequenced]), pa.concat_tables([unsequenced, changes])):
        assert latest(batch, ["id"])["name"].to_pylist() == ["sequenced"]


def test_the_newest_change_wins_when_the_batch_comes_in_sequence_order_or_its_chunks_do_not():
    # a catch-up's batch arrives in binlog order (the sort is skipped); batches held together are
    # each in order but one may start below where the other ends
    ordered = _changes([(1, 10, "c", "a"), (2, 11, "c", "x"), (1, 12, "u", "b"), (1, 12, "u", "b")])
    newest = latest(ordered, ["id"])
    assert sorted(zip(newest["id"].to_pylist(), newest["name"].to_pylist(), strict=True)) == [(1, "b"), (2, "x")]
    held = pa.concat_tables([_changes([(1, 20, "u", "newest"), (2, 21, "u", "y")]),
                             _changes([(1, 15, "u", "older"), (3, 16, "c", "z")])])
    newest = latest(held, ["id"])
    assert sorted(zip(newest["id"].to_pylist(), newest["name"].to_pylist(), strict=True)) == [
        (1, "newest"), (2, "y"), (3, "z")]


def test_a_newer_update_replaces_the_row_and_a_newer_delete_removes_it():
    newest = _changes([(1, 50, "u", "new"), (2, 50, "d", "")])
    decided = plan(newest, _target([(1, 40, 0, 7), (2, 40, 1, 3)]), ["id"])
    assert decided.rows["id"].to_pylist() == [1] and decided.rows["name"].to_pylist() == ["new"]
    assert {f: p.tolist() for f, p in decided.removed.items()} == {0: [7], 1: [3]}
    assert (decided.updated, decided.deleted, decided.inserted) == (1, 1, 0)


def test_a_change_not_newer_than_silver_changes_nothing():
    # a batch re-applied after a crash, or an older change arriving after a repair's snapshot row
    newest = _changes([(1, 40, "u", "same"), (2, 30, "d", ""), (3, 39, "u", "older")])
    decided = plan(newest, _target([(1, 40, 0, 0), (2, 40, 0, 1), (3, 40, 0, 2)]), ["id"])
    assert decided.rows.num_rows == 0 and decided.removed == {}
    assert (decided.updated, decided.deleted, decided.inserted) == (0, 0, 0)


def test_new_keys_are_inserted_and_deletes_of_unknown_keys_ignored():
    decided = plan(_changes([(8, 1, "c", "n"), (9, 1, "d", "")]), _target([]), ["id"])
    assert decided.rows["id"].to_pylist() == [8] and decided.removed == {}
    assert (decided.updated, decided.deleted, decided.inserted) == (0, 0, 1)


@pytest.mark.parametrize("values, kind", [
    ([dt.date(2024, 5, 1)], pa.date32()), ([b"\x00\x01"], pa.binary()), (["k"], pa.string()),
    ([Decimal("1.50")], pa.decimal128(10, 2)),
])
def test_a_batch_whose_keys_no_silver_file_can_hold_inserts_them_whatever_the_key_type(tmp_path, values, kind):
    # every file skipped by its statistics (or silver emptied): no target rows, typed as the batch's
    newest = pa.table({"k": pa.array(values, kind), "_op": ["c"], "_seq": pa.array([Decimal(3)], SEQ)})
    target = dvmerge._live_rows(tmp_path, [], ["k"], {"k": "k", "_seq": "_seq"}, newest.schema)
    decided = plan(newest, target, ["k"])
    assert decided.rows["k"].to_pylist() == values and (decided.inserted, decided.removed) == (1, {})


def test_a_composite_key_matches_on_every_column():
    newest = pa.table({"a": pa.array([1, 1], pa.int64()), "b": pa.array(["x", "y"]), "_op": ["u", "u"],
                       "_seq": pa.array([Decimal(9), Decimal(9)], SEQ)})
    target = pa.table({"a": pa.array([1, 1], pa.int64()), "b": pa.array(["y", "z"]),
                       "_tseq": pa.array([Decimal(1), Decimal(1)], SEQ), "_file": pa.array([0, 0], pa.int64()),
                       "_pos": pa.array([4, 5], pa.uint64())})
    decided = plan(newest, target, ["a", "b"])
    assert decided.removed[0].tolist() == [4] and sorted(decided.rows["b"].to_pylist()) == ["x", "y"]


def test_a_key_silver_holds_twice_is_left_to_delta():
    with pytest.raises(Unsupported, match="more than one row"):
        plan(_changes([(1, 9, "u", "x")]), _target([(1, 1, 0, 0), (1, 2, 1, 0)]), ["id"])


def test_silver_read_in_parts_gives_the_plan_of_silver_read_whole(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    files = []
    for index, ids in enumerate([[1, 2, 3], [4, 5], [6, 7, 8]]):
        name = f"part-{index}.parquet"
        pq.write_table(pa.table({"id": pa.array(ids, pa.int32()),
                                 "_seq": pa.array([Decimal(10)] * len(ids), SEQ)}), tmp_path / name)
        files.append({"path": name})
    newest = _changes([(2, 20, "u", "b"), (5, 20, "d", ""), (8, 5, "u", "old"), (9, 20, "c", "new")])
    names = {"id": "id", "_seq": "_seq"}
    whole = plan(newest, dvmerge._live_rows(tmp_path, files, ["id"], names, newest.schema), ["id"])
    monkeypatch.setattr(dvmerge, "TARGET_PART_ROWS", 2)
    parts = list(dvmerge._live_rows(tmp_path, files, ["id"], names, newest.schema))
    assert [p.num_rows for p in parts] == [3, 2, 3]  # whole files, once 2 rows are held
    split = plan(newest, iter(parts), ["id"])
    assert {f: p.tolist() for f, p in split.removed.items()} == {0: [1], 1: [1]}
    assert {f: p.tolist() for f, p in whole.removed.items()} == {0: [1], 1: [1]}
    assert split.rows["id"].to_pylist() == whole.rows["id"].to_pylist() == [2, 9]
    assert (split.updated, split.deleted, split.inserted) == (whole.updated, whole.deleted, whole.inserted) == (1, 1, 1)


def test_a_key_found_in_two_parts_of_silver_is_left_to_delta():
    with pytest.raises(Unsupported, match="more than one row"):
        plan(_changes([(1, 9, "u", "x")]), iter([_target([(1, 1, 0, 0)]), _target([(1, 2, 1, 0)])]), ["id"])


def test_older_files_of_a_widened_key_compare_in_the_batch_type():
    target = _target([(1, 1, 0, 0)]).set_column(0, "id", pa.array([1], pa.int16()))
    assert plan(_changes([(1, 9, "u", "x")]), target, ["id"]).removed[0].tolist() == [0]


def _stats(low, high) -> dict:
    return {"stats": json.dumps({"numRecords": 3, "minValues": {"id": low}, "maxValues": {"id": high}})}


def test_only_files_whose_key_range_meets_the_batch_are_read():
    physical = {"id": "id"}
    assert may_hold(_stats(10, 20), [("id", 15, 30)], physical)
    assert may_hold(_stats(10, 20), [("id", 20, 20)], physical)
    assert not may_hold(_stats(10, 20), [("id", 21, 30)], physical)
    assert not may_hold(_stats(10, 20), [("id", 1, 9)], physical)
    assert may_hold(_stats(10, 20), [("id", 1, 10)], physical)
    assert may_hold({}, [("id", 1, 9)], physical)  # no statistics: it may hold anything
    assert may_hold({"stats": json.dumps({"numRecords": 3})}, [("id", 1, 9)], physical)
    assert may_hold(_stats(10, 20), [], physical)
    # column mapping: statistics name the physical column
    assert not may_hold({"stats": json.dumps({"minValues": {"col-1": 10}, "maxValues": {"col-1": 20}})},
                        [("id", 1, 9)], {"id": "col-1"})


def test_date_and_decimal_key_ranges_compare_exactly():
    day = dt.date(2024, 5, 1)
    assert not may_hold(_stats("2024-05-02", "2024-06-01"), [("id", day, day)], {"id": "id"})
    assert may_hold(_stats("2024-04-02", "2024-05-01"), [("id", day, day)], {"id": "id"})
    # 0.1 + 0.2 as a float would be 0.30000000000000004 and skip this file
    assert may_hold({"stats": '{"minValues": {"id": 0.3}, "maxValues": {"id": 0.3}}'},
                    [("id", Decimal("0.3"), Decimal("0.3"))], {"id": "id"})


def test_written_statistics_are_exact_and_leave_out_strings():
    table = pa.table({"id": pa.array([3, None, 1], pa.int32()), "day": pa.array([dt.date(2024, 1, 2)] * 3),
                      "name": ["b", "a", None]})
    assert dvmerge.stats(table, {"id": "id", "day": "day", "name": "c-2"}) == {
        "numRecords": 3, "minValues": {"id": 1, "day": "2024-01-02"}, "maxValues": {"id": 3, "day": "2024-01-02"},
        "nullCount": {"id": 1, "day": 0, "c-2": 1}}


def _state(protocol: dict | None = None, configuration: dict | None = None, **metadata) -> logstate.TableState:
    state = logstate.TableState(root=None)  # type: ignore[arg-type]
    state.protocol = protocol or {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                                  "writerFeatures": ["deletionVectors", "invariants", "appendOnly"]}
    schema = {"type": "struct", "fields": [{"name": "id", "type": "integer", "nullable": True, "metadata": {}}]}
    state.metadata = {"schemaString": json.dumps(schema), "partitionColumns": [],
                      "configuration": {"delta.enableDeletionVectors": "true", **(configuration or {})}, **metadata}
    return state


def test_silver_as_the_engine_makes_it_is_writable():
    physical, schema = dvmerge.writable(_state())
    assert physical == {"id": "id"} and schema.field("id").type == pa.int32()


@pytest.mark.parametrize("state", [
    _state(configuration={"delta.enableChangeDataFeed": "true"}),
    _state(configuration={"delta.enableRowTracking": "true"}),
    _state(configuration={"delta.constraints.positive": "id > 0"}),
    _state(configuration={"delta.enableDeletionVectors": "false"}),
    _state(configuration={"delta.columnMapping.mode": "id"}),
    _state(partitionColumns=["id"]),
    _state(protocol={"minReaderVersion": 1, "minWriterVersion": 2}),
    _state(protocol={"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                     "writerFeatures": ["deletionVectors", "rowTracking"]}),
    _state(protocol={"minReaderVersion": 3, "minWriterVersion": 7,
                     "readerFeatures": ["deletionVectors", "v2Checkpoint"],
                     "writerFeatures": ["deletionVectors", "v2Checkpoint"]}),
], ids=["change-data-feed", "row-tracking", "constraint", "no-deletion-vectors", "column-mapping-by-id",
        "partitioned", "old-protocol", "row-tracking-feature", "v2-checkpoints"])
def test_tables_whose_writers_have_other_duties_are_left_to_delta(state):
    with pytest.raises(Unsupported):
        dvmerge.writable(state)


def test_a_generated_column_is_left_to_delta():
    state = _state()
    schema = json.loads(state.metadata["schemaString"])
    schema["fields"][0]["metadata"] = {"delta.generationExpression": "1"}
    state.metadata["schemaString"] = json.dumps(schema)
    with pytest.raises(Unsupported):
        dvmerge.writable(state)


def test_rows_leave_by_deletion_vectors_merged_with_the_ones_files_had(tmp_path):
    [old] = dvcodec.write_file(tmp_path, [dvcodec.serialize(np.array([0, 1]))])
    stats = json.dumps({"numRecords": 5, "minValues": {"id": 1}, "maxValues": {"id": 5}})
    kept = {"path": "kept.parquet", "partitionValues": {}, "size": 10, "modificationTime": 1, "dataChange": False,
            "stats": stats, "deletionVector": old.descriptor()}
    emptied = {"path": "emptied.parquet", "partitionValues": {}, "size": 10, "modificationTime": 1,
               "dataChange": False, "stats": json.dumps({"numRecords": 2}), "baseRowId": 7}
    actions = dvmerge._file_actions(tmp_path, [kept, emptied], {0: np.array([3], np.uint64),
                                                                1: np.array([0, 1], np.uint64)})
    removes = {a["remove"]["path"]: a["remove"] for a in actions if "remove" in a}
    adds = [a["add"] for a in actions if "add" in a]
    assert removes["kept.parquet"]["deletionVector"] == old.descriptor()  # names the entry it ends
    assert removes["emptied.parquet"]["baseRowId"] == 7 and "deletionVector" not in removes["emptied.parquet"]
    assert all(r["dataChange"] and json.loads(r["stats"])["numRecords"] for r in removes.values())
    [add] = adds  # the file whose every row is gone is only removed
    assert add["path"] == "kept.parquet" and add["dataChange"] is True
    assert dvcodec.read(tmp_path, add["deletionVector"]).tolist() == [0, 1, 3]
    assert json.loads(add["stats"]) == {**json.loads(stats), "tightBounds": False}


def test_a_row_position_past_the_file_is_refused(tmp_path):
    add = {"path": "f.parquet", "size": 1, "stats": json.dumps({"numRecords": 2})}
    with pytest.raises(Unsupported, match="beyond"):
        dvmerge._file_actions(tmp_path, [add], {0: np.array([2], np.uint64)})


def test_history_metrics_count_files_that_keep_their_rows_apart_from_files_removed():
    dv = {"storageType": "u", "pathOrInlineDv": "x" * 20, "offset": 1, "sizeInBytes": 9, "cardinality": 1}
    actions = [{"remove": {"path": "marked-again", "size": 5, "deletionVector": dv}},
               {"add": {"path": "marked-again", "size": 5, "deletionVector": {**dv, "offset": 30}}},
               {"remove": {"path": "marked-first", "size": 6}},
               {"add": {"path": "marked-first", "size": 6, "deletionVector": dv}},
               {"remove": {"path": "emptied", "size": 7, "deletionVector": dv}},
               {"add": {"path": "new", "size": 100}}]
    decided = dvmerge.Plan(rows=pa.table({}), removed={}, updated=3, deleted=2, inserted=1)
    metrics = dvmerge.merge_metrics(6, decided, actions, started=0.0)
    assert {k: v for k, v in metrics.items() if k != "executionTimeMs"} == {
        "numSourceRows": 6, "operationNumSourceRows": 6, "numTargetRowsInserted": 1, "numTargetRowsUpdated": 3,
        "numTargetRowsMatchedUpdated": 3, "numTargetRowsNotMatchedBySourceUpdated": 0, "numTargetRowsDeleted": 2,
        "numTargetRowsMatchedDeleted": 2, "numTargetRowsNotMatchedBySourceDeleted": 0, "numTargetRowsCopied": 0,
        "numTargetFilesAdded": 1, "numTargetFilesRemoved": 1, "numTargetBytesAdded": 100,
        "numTargetBytesRemoved": 7, "numTargetDeletionVectorsAdded": 1, "numTargetDeletionVectorsUpdated": 1,
        "numTargetDeletionVectorsRemoved": 1, "numTargetChangeFilesAdded": 0}


def _reference_merge(batch: list[tuple[int, int, str, str]], silver: list[tuple[int, int, int, int]]):
    """The MERGE's rule in plain Python: the newest change of each key against silver's row of
    that key (a change no newer than that row changes nothing)."""
    newest: dict[int, tuple[int, str, str]] = {}
    for key, seq, op, name in batch:
        if key not in newest or seq > newest[key][0]:
            newest[key] = (seq, op, name)
    rows = {key: (tseq, file, pos) for key, tseq, file, pos in silver}
    removed: dict[int, list[int]] = {}
    written, updated, deleted, inserted = set(), 0, 0, 0
    for key, (seq, op, _) in newest.items():
        if key in rows:
            tseq, file, pos = rows[key]
            if seq <= tseq:
                continue  # silver's row is as new: nothing changes
            removed.setdefault(file, []).append(pos)
            updated, deleted = updated + (op != "d"), deleted + (op == "d")
        elif op == "d":
            continue
        else:
            inserted += 1
        if op != "d":
            written.add((key, seq))
    return {f: sorted(p) for f, p in removed.items()}, written, updated, deleted, inserted


def test_the_plan_is_the_merge_rule_on_random_batches_and_silver_states():
    """A property check against the reference: 400 seeded random cases of repeated keys, changes
    older than, as old as and newer than silver's rows, deletes of known and unknown keys, rows
    spread over files."""
    import random

    generator = random.Random(20261126)
    for case in range(400):
        keys = generator.sample(range(40), generator.randint(1, 25))
        silver, positions = [], {}
        for key in generator.sample(keys, generator.randint(0, len(keys))):
            file = generator.randint(0, 3)
            positions[file] = positions.get(file, -1) + 1
            silver.append((key, generator.randint(0, 50), file, positions[file]))
        seqs = generator.sample(range(60), generator.randint(1, 40))  # a change's _seq is unique
        batch = [(generator.choice(keys), seq, generator.choice("cud"), f"n{i}") for i, seq in enumerate(seqs)]
        decided = plan(latest(_changes(batch), ["id"]), _target(silver), ["id"])
        removed, written, updated, deleted, inserted = _reference_merge(batch, silver)
        got_removed = {f: sorted(p.tolist()) for f, p in decided.removed.items()}
        got_written = {(r["id"], int(r["_seq"])) for r in decided.rows.to_pylist()}
        assert (got_removed, got_written) == (removed, written), f"case {case}"
        assert (decided.updated, decided.deleted, decided.inserted) == (updated, deleted, inserted), f"case {case}"
