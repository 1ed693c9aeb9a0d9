"""Every positive setting refuses zero, negatives, fractions, booleans and text, naming itself;
the chunk locator puts a key equal to a chunk's start in that chunk, never the one before."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse_engine.config.project import load_project
from lakehouse_engine.errors import ConfigError
from lakehouse_engine.snapshot.chunking import chunks_from_boundaries
from lakehouse_engine.source.introspect import ColumnInfo
from lakehouse_engine.source.keyorder import ChunkLocator, SortKeys, within

PROFILES = "p:\n  target: dev\n  outputs:\n    dev: {host: h, port: 1, user: u, password: x, database: d%s}\n"
SETTINGS = {  # setting -> (file, YAML that sets it to {value})
    "defaults.chunk_size": ("project", "defaults: {{chunk_size: {value}}}\n"),
    "defaults.flush_rows": ("project", "defaults: {{flush_rows: {value}}}\n"),
    "defaults.commit_rows": ("project", "defaults: {{commit_rows: {value}}}\n"),
    "quality.max_lag_seconds": ("project", "quality: {{max_lag_seconds: {value}}}\n"),
    "connect_timeout": ("profiles", ", connect_timeout: {value}"),
}


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "true", "'many'"])
@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_each_positive_setting_refuses_a_value_that_is_not_a_positive_number(tmp_path: Path, setting, value):
    file, text = SETTINGS[setting]
    if setting == "quality.max_lag_seconds" and value == "1.5":
        return  # seconds may be fractional: a valid value, checked below
    project = "profile: p\nlake_root: lake\n" + (text.format(value=value) if file == "project" else "")
    (tmp_path / "lakehouse_project.yml").write_text(project)
    (tmp_path / "profiles.yml").write_text(PROFILES % (text.format(value=value) if file == "profiles" else ""))
    with pytest.raises(ConfigError) as refused:
        load_project(tmp_path, env={})
    assert refused.value.setting == setting and setting in str(refused.value)


def test_fractional_seconds_are_a_valid_lag(tmp_path: Path):
    (tmp_path / "lakehouse_project.yml").write_text("profile: p\nlake_root: lake\nquality: {max_lag_seconds: 1.5}\n")
    (tmp_path / "profiles.yml").write_text(PROFILES % "")
    assert load_project(tmp_path, env={}).max_lag_seconds == 1.5


INT_KEY = SortKeys(None, [ColumnInfo("id", "int", "int(11)", False)])  # numbers need no server
CHUNKS = chunks_from_boundaries([(10,), (20,)])  # (-inf, 10), [10, 20), [20, inf)


def test_a_key_equal_to_a_chunk_start_is_located_in_that_chunk():
    locator = ChunkLocator(CHUNKS, INT_KEY)
    assert [c.index for c in locator.locate([(9,), (10,), (19,), (20,), (21,)])] == [0, 1, 1, 2, 2]


def test_within_includes_the_start_and_excludes_the_end():
    assert within(CHUNKS[1], INT_KEY, [(9,), (10,), (19,), (20,)]) == [False, True, True, False]
    assert within(CHUNKS[0], INT_KEY, [(-(10**9),), (9,), (10,)]) == [True, True, False]
    assert within(CHUNKS[2], INT_KEY, [(19,), (20,), (10**12,)]) == [False, True, True]
