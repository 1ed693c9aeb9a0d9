"""What ``maintain`` decides from a local table's log and folder before starting Spark: it skips
a step only where Delta would find nothing to do."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from lakehouse_engine.sink import dvcodec
from lakehouse_engine.sink.maintenance import LayerPlan, MaintenanceOptions, local_table_absent, plan_local

OPTIONS = MaintenanceOptions()
EIGHT_DAYS = 8 * 24 * 3600


def _dv(file_id: uuid.UUID, prefix: str = "") -> dict:
    where = prefix + dvcodec.z85_encode(file_id.bytes)
    return {"storageType": "u", "pathOrInlineDv": where, "offset": 1, "sizeInBytes": 10, "cardinality": 1}


def _table(root: Path, *adds: tuple[str, dict | None]) -> Path:
    """A table whose one commit adds ``adds`` (path, deletion vector), each file written now."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    actions: list[dict] = [{"protocol": {"minReaderVersion": 3}}, {"metaData": {"id": "t"}}]
    for path, dv in adds:
        add = {"path": path, "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}
        actions.append({"add": {**add, "deletionVector": dv} if dv else add})
        (root / path.replace("%20", " ")).write_bytes(b"data")
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return root


def _age(path: Path, seconds: float = EIGHT_DAYS) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_lone_file_without_a_deletion_vector_in_a_tidy_folder_needs_nothing(tmp_path):
    _table(tmp_path, ("part-0.parquet", None))
    assert plan_local(str(tmp_path), OPTIONS) == LayerPlan(files=1, compact=False, vacuum=False)


def test_two_files_or_a_deletion_vector_need_a_compaction(tmp_path):
    assert plan_local(str(_table(tmp_path / "two", ("a.parquet", None), ("b.parquet", None))), OPTIONS).compact
    file_id = uuid.uuid4()
    dv_table = _table(tmp_path / "dv", ("a.parquet", _dv(file_id)))
    (dv_table / f"deletion_vector_{file_id}.bin").write_bytes(b"dv")
    assert plan_local(str(dv_table), OPTIONS).compact


def test_a_clustered_table_is_compacted_even_as_one_file(tmp_path):
    root = _table(tmp_path, ("a.parquet", None))
    commit = root / "_delta_log" / f"{0:020d}.json"
    commit.write_text(commit.read_text().replace('{"minReaderVersion": 3}',
                                                 '{"minReaderVersion": 3, "writerFeatures": ["clustering"]}'))
    assert plan_local(str(root), OPTIONS).compact


def test_only_an_old_file_that_no_live_file_uses_needs_a_vacuum(tmp_path):
    file_id = uuid.uuid4()
    root = _table(tmp_path, ("part%20one.parquet", _dv(file_id, prefix="ab")))
    (root / "ab").mkdir()
    for used in (root / "part one.parquet", root / "ab" / f"deletion_vector_{file_id}.bin"):
        used.write_bytes(b"x")
        _age(used)  # old, but the live table reads them
    for hidden in (root / ".part one.parquet.crc", root / "_SUCCESS"):
        hidden.write_bytes(b"x")
        _age(hidden)  # Delta's VACUUM never deletes hidden files
    assert plan_local(str(root), OPTIONS).vacuum is False

    orphan = root / "part-orphan.parquet"
    orphan.write_bytes(b"x")
    _age(orphan, seconds=OPTIONS.retain_hours * 3600 - 60)  # inside the retention: kept
    assert plan_local(str(root), OPTIONS).vacuum is False
    _age(orphan)
    assert plan_local(str(root), OPTIONS).vacuum is True
    assert plan_local(str(root), MaintenanceOptions(vacuum=False)).vacuum is False
    assert plan_local(str(root), MaintenanceOptions(retain_hours=24 * 9)).vacuum is False


def test_an_old_unused_file_in_a_change_data_folder_needs_a_vacuum(tmp_path):
    root = _table(tmp_path, ("a.parquet", None))
    (root / "_change_data").mkdir()
    (root / "_change_data" / "cdc-0.parquet").write_bytes(b"x")
    _age(root / "_change_data" / "cdc-0.parquet")
    assert plan_local(str(root), OPTIONS).vacuum is True


def test_what_is_not_known_without_spark_is_left_to_spark(tmp_path):
    assert plan_local("s3a://bucket/lake/bronze/orders", OPTIONS) is None
    assert plan_local(str(tmp_path / "missing"), OPTIONS) is None
    assert local_table_absent(str(tmp_path / "missing"))
    assert not local_table_absent("s3a://bucket/lake/bronze/orders")
    root = _table(tmp_path / "v2", ("a.parquet", None))
    with (root / "_delta_log" / f"{1:020d}.json").open("w") as log:
        log.write(json.dumps({"checkpointMetadata": {"version": 1}}) + "\n")
    assert plan_local(str(root), OPTIONS) is None
    assert not local_table_absent(str(root))


def test_an_old_unused_file_in_a_partition_folder_needs_a_vacuum_even_for_a_leading_underscore(tmp_path):
    root = tmp_path
    log = root / "_delta_log"
    log.mkdir(parents=True)
    (root / "_p=1").mkdir()
    (root / "_p=1" / "a.parquet").write_bytes(b"x")
    actions = [{"protocol": {"minReaderVersion": 1}}, {"metaData": {"id": "t", "partitionColumns": ["_p"]}},
               {"add": {"path": "_p=1/a.parquet", "partitionValues": {"_p": "1"}, "size": 1,
                        "modificationTime": 0, "dataChange": True}}]
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    assert plan_local(str(root), OPTIONS).vacuum is False
    (root / "_p=1" / "orphan.parquet").write_bytes(b"x")
    _age(root / "_p=1" / "orphan.parquet")
    assert plan_local(str(root), OPTIONS).vacuum is True


def test_maintain_starts_spark_once_and_a_failed_start_is_raised_again_without_a_second_try():
    from lakehouse_engine.errors import ConfigError
    from lakehouse_engine.run.commands.maintain import _Once

    starts = []

    def start():
        starts.append(1)
        raise ConfigError("Java 17 is needed by Spark and was not found")

    once = _Once(start)
    for _ in range(3):
        try:
            once()
        except ConfigError:
            pass
    assert len(starts) == 1 and isinstance(once.error, ConfigError)
