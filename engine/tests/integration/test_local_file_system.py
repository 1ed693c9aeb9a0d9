"""Hadoop's ``file:`` file system of a local driver (``sink.localfs``): the same answers as
Hadoop's own, without a ``chmod`` or ``readlink`` process per file."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError

from lakehouse_engine.sink import localfs
from lakehouse_engine.sink.spark import jvm_view

from .conftest import PROJECT_ROOT
from .test_cli import cli_command

pytestmark = pytest.mark.integration

COMMIT_TWICE = """
import sys
from pathlib import Path
from lakehouse_engine.config.project import load_project
from lakehouse_engine.sink.spark import get_spark
config = load_project(Path(sys.argv[1]), profiles_dir=Path(sys.argv[2]))
spark = get_spark(config)
table = sys.argv[3]
spark.range(10).write.format("delta").save(table)
spark.range(5).write.format("delta").mode("append").save(table)
assert spark.read.format("delta").load(table).count() == 15
"""


def _shims(folder: Path, log: Path) -> dict[str, str]:
    """``chmod`` and ``readlink`` first on PATH, each noting its arguments before running the real one."""
    folder.mkdir()
    for name in ("chmod", "readlink"):
        real = shutil.which(name)
        assert real is not None
        shim = folder / name
        shim.write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\nexec "{real}" "$@"\n')
        shim.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_delta_commits_of_a_local_driver_start_no_chmod_or_readlink_process(config, tmp_path):
    command, env = cli_command(config, "spark-check")
    project, profiles = command[command.index("--project-dir") + 1], command[command.index("--profiles-dir") + 1]
    noted = tmp_path / "processes.log"
    noted.touch()
    table = tmp_path / "lake" / "t"

    done = subprocess.run([sys.executable, "-c", COMMIT_TWICE, project, profiles, str(table)], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**env, **_shims(tmp_path / "shims", noted)})

    assert done.returncode == 0, done.stderr
    assert (table / "_delta_log" / "00000000000000000001.json").exists()
    # Hadoop's own file system runs chmod for each file and folder it creates and readlink for
    # both paths of each rename (the commit files are written aside and renamed).
    about_the_table = [line for line in noted.read_text().splitlines() if str(table) in line]
    assert about_the_table == []


def test_the_sessions_local_file_system_sets_permissions_renames_without_overwriting_and_sees_links(
        spark, tmp_path):
    jvm = jvm_view(spark)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    uri = jvm.java.net.URI("file:///")
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(uri, conf)
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(uri, conf)
    assert fs.getClass().getName() == localfs.FILE_SYSTEM["spark.hadoop.fs.file.impl"]
    assert fs.getRaw().getClass().getName() == "lakehouse.hadoop.NoForkRawLocalFileSystem"

    def path(p: Path):
        return jvm.org.apache.hadoop.fs.Path(p.as_uri())

    plain = tmp_path / "plain"
    plain.write_text("x")
    fs.setPermission(path(plain), jvm.org.apache.hadoop.fs.permission.FsPermission(0o640))
    assert stat.S_IMODE(plain.stat().st_mode) == 0o640
    created = tmp_path / "made" / "inside"
    assert fs.mkdirs(path(created), jvm.org.apache.hadoop.fs.permission.FsPermission(0o750))
    assert stat.S_IMODE(created.stat().st_mode) == 0o750 & ~_umask()

    # A Delta commit is a rename that must fail when the version's file exists.
    first, second, target = tmp_path / "a", tmp_path / "b", tmp_path / "committed"
    first.write_text("a")
    second.write_text("b")
    none = jvm.org.apache.hadoop.fs.Options.Rename.NONE
    renames = jvm.org.apache.hadoop.fs.Options.Rename
    options = spark.sparkContext._gateway.new_array(renames, 1)
    options[0] = none
    context.rename(path(first), path(target), options)
    with pytest.raises(Py4JJavaError) as refused:
        context.rename(path(second), path(target), options)
    assert refused.value.java_exception.getClass().getName() == "org.apache.hadoop.fs.FileAlreadyExistsException"
    assert target.read_text() == "a" and second.read_text() == "b"

    # Links: the same answers as Hadoop's own local file system.
    hadoops = jvm.org.apache.hadoop.fs.RawLocalFileSystem()
    hadoops.initialize(uri, conf)
    link = tmp_path / "link"
    link.symlink_to(target)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    for p in (link, dangling, target, tmp_path, tmp_path / "nothing"):
        assert _link_status(fs.getRaw(), path(p)) == _link_status(hadoops, path(p)), p
    assert _link_status(fs.getRaw(), path(tmp_path / "nothing")) == "java.io.FileNotFoundException"


def _link_status(fs, path) -> str:
    """The status as text, or the Java exception's class."""
    try:
        return str(fs.getFileLinkStatus(path).toString())
    except Py4JJavaError as exc:
        return str(exc.java_exception.getClass().getName())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
