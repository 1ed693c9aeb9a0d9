"""Which class-data archive a local driver JVM maps, and how a saved one is put in place."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from lakehouse_engine.sink import classdata

DELTA_JARS = "file:///ivy/jars/io.delta_delta-spark.jar,file:///ivy/jars/io.delta_delta-storage.jar"


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def key(jars: str = DELTA_JARS, project: dict[str, str] | None = None, home: Path | None = Path("/jdk")) -> str:
    return classdata.archive_key(jars, project or {}, home)


def saved(name_key: str, content: bytes = b"archive") -> Path:
    folder = classdata.archive_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name_key}-{len(content)}{classdata.SUFFIX}"
    path.write_bytes(content)
    return path


def test_the_key_ignores_the_order_spelling_and_repetition_of_the_session_jars():
    reordered = ("/ivy/jars/io.delta_delta-storage.jar,file:/ivy/jars/io.delta_delta-spark.jar,"
                 "file:///ivy/jars/io.delta_delta-storage.jar")
    assert key(reordered) == key(DELTA_JARS)


def test_the_key_changes_with_a_jar_the_jdk_or_the_projects_jvm_settings(tmp_path: Path):
    jar = tmp_path / "extra.jar"
    jar.write_bytes(b"one")
    with_jar = key(f"{DELTA_JARS},{jar}")
    assert with_jar != key(DELTA_JARS)
    jar.write_bytes(b"other size")
    assert key(f"{DELTA_JARS},{jar}") != with_jar
    assert key(home=Path("/other-jdk")) != key()
    assert key(project={"spark.driver.memory": "8g"}) != key()
    assert key(project={"spark.driver.extraJavaOptions": "-Dx=1"}) != key()
    assert key(project={"spark.sql.shuffle.partitions": "8"}) == key()  # not a JVM setting


def test_a_session_maps_the_saved_archive_of_its_jars(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(classdata, "java_home", lambda: Path("/jdk"))
    archive = saved(key())
    planned = classdata.plan({"spark.jars": DELTA_JARS}, {}, save=False)
    assert planned == classdata.ClassData(f"-XX:SharedArchiveFile={archive}", used=archive)
    assert classdata.plan({"spark.jars": DELTA_JARS}, {}, save=True).used == archive  # none saved twice


def test_the_jars_on_the_drivers_class_path_belong_to_its_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(classdata, "java_home", lambda: Path("/jdk"))
    jar = tmp_path / "lakehouse-hadoop-local.jar"
    jar.write_bytes(b"classes")
    conf = {"spark.jars": DELTA_JARS, "spark.driver.defaultExtraClassPath": str(jar)}
    archive = saved(key(classdata.with_class_path(DELTA_JARS, conf)))
    assert classdata.plan(conf, {}, save=False).used == archive
    jar.write_bytes(b"rebuilt classes")  # the JVM would refuse the archive: it is not looked for
    assert classdata.plan(conf, {}, save=False).used is None


def test_an_archive_shorter_than_its_name_says_is_never_mapped(monkeypatch: pytest.MonkeyPatch):
    """A JVM dies of SIGBUS on a truncated archive: the size in its name is checked first."""
    monkeypatch.setattr(classdata, "java_home", lambda: Path("/jdk"))
    archive = saved(key())
    archive.rename(archive.with_name(f"{key()}-999{classdata.SUFFIX}"))
    assert classdata.find_archive(key()) is None
    assert classdata.plan({"spark.jars": DELTA_JARS}, {}, save=False) == classdata.NONE


def test_without_an_archive_only_a_saving_session_writes_one_under_a_name_of_its_own():
    assert classdata.plan({"spark.jars": DELTA_JARS}, {}, save=False) == classdata.NONE
    planned = classdata.plan({"spark.jars": DELTA_JARS}, {}, save=True)
    assert planned.saving == classdata.archive_dir() / f"saving-{os.getpid()}{classdata.SUFFIX}"
    assert f"-XX:ArchiveClassesAtExit={planned.saving}" in planned.option
    assert planned.used is None


def test_jars_still_to_be_resolved_by_ivy_are_unknown_so_no_archive_is_looked_for(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(classdata, "java_home", lambda: Path("/jdk"))
    saved(key(""))
    conf = {"spark.jars.packages": "io.delta:delta-spark_4.1_2.13:4.4.0"}
    assert classdata.plan(conf, {}, save=False) == classdata.NONE
    assert classdata.plan(conf, {}, save=True).saving is not None


@pytest.mark.parametrize("theirs", ["-XX:SharedArchiveFile=/opt/app.jsa", "-Xshare:off",
                                    "-XX:ArchiveClassesAtExit=/tmp/x.jsa"])
def test_a_project_that_manages_class_sharing_itself_gets_none_of_ours(theirs: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(classdata, "java_home", lambda: Path("/jdk"))
    project = {"spark.driver.extraJavaOptions": theirs}
    saved(key(project=project))
    assert classdata.plan({"spark.jars": DELTA_JARS}, project, save=True) == classdata.NONE


def test_a_retry_without_the_archive_does_not_map_it_again(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(classdata, "java_home", lambda: Path("/jdk"))
    saved(key())
    assert classdata.plan({"spark.jars": DELTA_JARS}, {}, save=False, use=False) == classdata.NONE


def jvm_writing(saving: Path, code: int) -> subprocess.Popen[bytes]:
    """A stand-in for the driver's JVM: it waits for its stdin to close, then writes the
    archive and exits with ``code``, as the JVM does when its Python parent lets go."""
    script = f"cat > /dev/null; printf 'whole archive' > '{saving}'; exit {code}"
    return subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE)


def test_a_saved_archive_is_put_in_place_under_its_key_and_size_once_its_jvm_exited(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(classdata, "java_home", lambda: Path("/jdk"))
    planned = classdata.plan({"spark.jars": DELTA_JARS}, {}, save=True)
    assert planned.saving is not None
    final = classdata.finish(jvm_writing(planned.saving, 0), DELTA_JARS, {}, planned.saving)
    assert final == classdata.archive_dir() / f"{key()}-{len('whole archive')}{classdata.SUFFIX}"
    assert final.read_bytes() == b"whole archive"
    assert not planned.saving.exists()
    assert classdata.plan({"spark.jars": DELTA_JARS}, {}, save=False).used == final


def test_what_a_jvm_that_failed_wrote_is_thrown_away(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(classdata, "java_home", lambda: Path("/jdk"))
    planned = classdata.plan({"spark.jars": DELTA_JARS}, {}, save=True)
    assert planned.saving is not None
    assert classdata.finish(jvm_writing(planned.saving, 134), DELTA_JARS, {}, planned.saving) is None
    assert list(classdata.archive_dir().iterdir()) == []


def test_a_jvm_that_exits_cleanly_without_writing_one_leaves_no_archive_and_no_error(monkeypatch: pytest.MonkeyPatch):
    """A JDK without a base archive writes none (-XX:ArchiveClassesAtExit needs one)."""
    monkeypatch.setattr(classdata, "java_home", lambda: Path("/jdk"))
    planned = classdata.plan({"spark.jars": DELTA_JARS}, {}, save=True)
    assert planned.saving is not None
    silent = subprocess.Popen(["sh", "-c", "cat > /dev/null"], stdin=subprocess.PIPE)
    assert classdata.finish(silent, DELTA_JARS, {}, planned.saving) is None
    assert list(classdata.archive_dir().iterdir()) == []


def test_saving_keeps_the_newest_archives_and_removes_what_killed_runs_left(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(classdata, "java_home", lambda: Path("/jdk"))
    old = [saved(f"old{i}") for i in range(3)]
    for age, path in enumerate(old):
        os.utime(path, (time.time() - 1000 + age, time.time() - 1000 + age))
    left = classdata.archive_dir() / f"saving-999999999{classdata.SUFFIX}"  # no such process
    left.write_bytes(b"half")
    writing = classdata.archive_dir() / f"saving-{os.getppid()}{classdata.SUFFIX}"  # a live process's
    writing.write_bytes(b"half")
    planned = classdata.plan({"spark.jars": DELTA_JARS}, {}, save=True)
    assert planned.saving is not None
    final = classdata.finish(jvm_writing(planned.saving, 0), DELTA_JARS, {}, planned.saving)
    remaining = set(classdata.archive_dir().iterdir())
    assert remaining == {final, old[2], old[1], writing}
