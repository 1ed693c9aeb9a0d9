from pathlib import Path

import fixture_project
import pytest

from lakehouse_engine.config.defaults import DEFAULTS
from lakehouse_engine.config.profiles import render_env_vars
from lakehouse_engine.config.project import Defaults, load_project, peek_target_dir
from lakehouse_engine.errors import ConfigError

PROJECT_ROOT = fixture_project.PROJECT_ROOT
# The rest holds env_var templates: cookiecutter must leave them alone.


def test_the_generated_project_file_loads_with_the_password_from_the_environment():
    config = load_project(PROJECT_ROOT, env={"MYSQL_PASSWORD": "s3cret"})
    assert config.source.password == "s3cret"
    assert config.defaults.delivery == "exactly_once"
    assert config.server_ids[1] - config.server_ids[0] == 99
    assert "s3cret" not in repr(config)


def test_the_generated_project_file_writes_out_the_builtin_defaults_it_does_not_ask_for():
    import yaml

    written = yaml.safe_load((PROJECT_ROOT / "lakehouse_project.yml").read_text())
    defaults = written["defaults"]
    assert (defaults["commit_rows"], defaults["delivery"], defaults["flush_rows"]) == (
        DEFAULTS.commit_rows, DEFAULTS.delivery, DEFAULTS.flush_rows)
    assert tuple(defaults["even_distribution"]) == DEFAULTS.even_distribution
    assert defaults["snapshot_mode"] == DEFAULTS.snapshot_mode
    assert tuple(defaults["table_features"]) == DEFAULTS.table_features
    assert written["target_dir"] == DEFAULTS.target_dir and written["quality"]["gx_root"] == DEFAULTS.gx_root
    assert written["quality"]["max_lag_seconds"] == DEFAULTS.max_lag_seconds
    assert written["quality"]["source_readers"] == DEFAULTS.dq_source_readers


def test_a_project_file_without_defaults_takes_the_builtin_ones(tmp_path):
    (tmp_path / "lakehouse_project.yml").write_text("profile: p\nlake_root: lake\n")
    (tmp_path / "profiles.yml").write_text(
        "p:\n  target: dev\n  outputs:\n    dev: {host: h, port: 1, user: u, password: x, database: d}\n")
    config = load_project(tmp_path, env={})
    assert config.defaults == Defaults(chunk_size=DEFAULTS.chunk_size, delivery=DEFAULTS.delivery,
                                       flush_rows=DEFAULTS.flush_rows, even_distribution=DEFAULTS.even_distribution,
                                       commit_rows=DEFAULTS.commit_rows)
    assert config.server_ids == DEFAULTS.server_id_range and config.spark.master == DEFAULTS.spark_master
    assert config.target == DEFAULTS.target and config.source.connect_timeout == DEFAULTS.connect_timeout_s
    assert config.dq_source_readers == DEFAULTS.dq_source_readers


def test_spark_conf_values_render_env_var_so_object_store_keys_stay_out_of_the_file(tmp_path):
    (tmp_path / "lakehouse_project.yml").write_text(
        "profile: p\nlake_root: s3a://b/lake\n"
        "spark: {conf: {spark.hadoop.fs.s3a.access.key: \"{{ env_var('LAKE_KEY') }}\"}}\n")
    (tmp_path / "profiles.yml").write_text(
        "p:\n  target: dev\n  outputs:\n    dev: {host: h, port: 1, user: u, password: x, database: d}\n")
    config = load_project(tmp_path, env={"LAKE_KEY": "AKIA123"})
    assert config.spark.conf["spark.hadoop.fs.s3a.access.key"] == "AKIA123"
    with pytest.raises(ConfigError, match="LAKE_KEY is not set") as refused:
        load_project(tmp_path, env={})
    assert refused.value.setting == "LAKE_KEY"


def test_a_missing_password_names_the_environment_variable():
    with pytest.raises(ConfigError, match="MYSQL_PASSWORD is not set"):
        load_project(PROJECT_ROOT, env={})


def test_env_var_defaults_and_overrides():
    tree = {"a": "{{ env_var('X', 'dflt') }}", "b": ["{{ env_var('Y') }}"], "c": 3}
    assert render_env_vars(tree, {"Y": "y"}, "here") == {"a": "dflt", "b": ["y"], "c": 3}
    assert render_env_vars(tree, {"X": "x", "Y": "y"}, "here")["a"] == "x"


def _write(tmp_path: Path, project: str, profiles: str) -> Path:
    (tmp_path / "lakehouse_project.yml").write_text(project)
    (tmp_path / "profiles.yml").write_text(profiles)
    return tmp_path


PROFILES = """p:
  target: dev
  outputs:
    dev: {host: h, port: 1, user: u, password: x, database: d}
"""


def test_a_bad_delivery_mode_is_a_configuration_error(tmp_path):
    root = _write(tmp_path, "profile: p\nlake_root: lake\ndefaults: {delivery: maybe}\n", PROFILES)
    with pytest.raises(ConfigError, match="defaults.delivery"):
        load_project(root, env={})


def test_an_unknown_target_lists_the_known_ones(tmp_path):
    root = _write(tmp_path, "profile: p\nlake_root: lake\n", PROFILES)
    with pytest.raises(ConfigError, match="no output 'prod'.*dev"):
        load_project(root, target="prod", env={})


def test_a_missing_project_file_says_where_to_run(tmp_path):
    with pytest.raises(ConfigError, match="run from the project folder"):
        load_project(tmp_path, env={})


def test_relative_lake_roots_are_anchored_at_the_project_and_urls_are_kept(tmp_path):
    root = _write(tmp_path, "profile: p\nlake_root: lake\n", PROFILES)
    assert load_project(root, env={}).lake_root == str(tmp_path.resolve() / "lake")
    root = _write(tmp_path, "profile: p\nlake_root: s3a://bucket/lake\n", PROFILES)
    assert load_project(root, env={}).table_path("silver", "t") == "s3a://bucket/lake/silver/t"


def test_bad_yaml_is_one_line_naming_the_file_line_and_column(tmp_path):
    root = _write(tmp_path, "profile: p\nlake_root: [lake\ndefaults: {}\n", PROFILES)
    with pytest.raises(ConfigError) as raised:
        load_project(root, env={})
    assert str(raised.value) == (
        f"{root / 'lakehouse_project.yml'} is not valid YAML: while parsing a flow sequence "
        "expected ',' or ']', but got ':' (line 3, column 9)"
    )


def test_the_target_folder_is_found_even_when_the_configuration_is_broken(tmp_path):
    assert peek_target_dir(tmp_path) is None  # no project here: nothing may be written
    _write(tmp_path, "profile: p\ntarget_dir: build/out\nlake_root: lake\n", "not: [yaml\n")
    assert peek_target_dir(tmp_path) == tmp_path / "build" / "out"  # only profiles.yml is broken
    _write(tmp_path, "profile: p\ntarget_dir: build/out\nlake_root: [\n", PROFILES)
    assert peek_target_dir(tmp_path) == tmp_path / "target"  # the project file itself is broken



def test_snapshot_commits_are_sized_by_rows_not_by_chunk_count():
    defaults = Defaults(chunk_size=50_000, delivery="exactly_once", flush_rows=1,
                        even_distribution=(0.05, 1000.0), commit_rows=1_000_000)
    assert defaults.chunks_per_commit(50_000) == 20
    assert defaults.chunks_per_commit(300_000) == 4  # rounded up: never fewer rows than asked
    assert defaults.chunks_per_commit(2_000_000) == 1
    assert defaults.chunks_per_commit(500) == 2000


def test_table_features_may_be_switched_off_and_an_unknown_one_is_a_configuration_error(tmp_path):
    profiles = "p:\n  target: dev\n  outputs:\n    dev: {host: h, port: 1, user: u, password: x, database: d}\n"
    (tmp_path / "profiles.yml").write_text(profiles)
    (tmp_path / "lakehouse_project.yml").write_text("profile: p\nlake_root: lake\ndefaults: {table_features: []}\n")
    assert load_project(tmp_path, env={}).defaults.table_features == frozenset()
    (tmp_path / "lakehouse_project.yml").write_text(
        "profile: p\nlake_root: lake\ndefaults: {table_features: [column_mapping, deletion_vectors]}\n")
    with pytest.raises(ConfigError, match="table_features is .*use a list of column_mapping, type_widening") as bad:
        load_project(tmp_path, env={})
    assert bad.value.setting == "defaults.table_features"
