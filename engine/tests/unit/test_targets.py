"""Each profile output (target) keeps its own lake, hence its own checkpoints, and its own
target/ folder; two outputs on one lake are refused. Commands that never connect to the
source load the profile without its secrets."""

from pathlib import Path

import pytest

from lakehouse_engine.config.project import load_project
from lakehouse_engine.errors import ConfigError

PROJECT = "profile: p\nlake_root: lake\ntarget_dir: target\n"

SECRET = "\"{{ env_var('LAKEHOUSE_TEST_PASSWORD') }}\""

DEV = "    dev: {host: h, port: 1, user: u, password: x, database: d}\n"


def project(tmp_path: Path, outputs: str, default: str = "dev") -> Path:
    (tmp_path / "lakehouse_project.yml").write_text(PROJECT)
    (tmp_path / "profiles.yml").write_text(f"p:\n  target: {default}\n  outputs:\n{outputs}")
    return tmp_path


def test_prod_keeps_its_own_lake_and_target_folder(tmp_path):
    root = project(tmp_path, DEV + "    prod: {host: p, port: 2, user: u, password: y, database: d, "
                                   "lake_root: /data/prod-lake}\n")
    dev = load_project(root, env={})
    prod = load_project(root, target="prod", env={})
    assert (dev.target, prod.target) == ("dev", "prod")
    assert dev.lake_root == str(tmp_path.resolve() / "lake") and dev.target_dir == root / "target"
    assert prod.lake_root == "/data/prod-lake" and prod.target_dir == root / "target" / "prod"
    # Quality results and Data Docs follow the lake too: prod's never land in dev's gx/.
    assert dev.gx_dir == root and prod.gx_dir == root / "target" / "prod"
    assert dev.table_path("bronze", "orders") != prod.table_path("bronze", "orders")
    assert prod.source.host == "p"


def test_the_default_target_may_be_prod_and_still_keeps_its_own_lake(tmp_path):
    outputs = DEV + "    prod: {host: p, port: 2, user: u, password: y, database: d, lake_root: prod-lake}\n"
    root = project(tmp_path, outputs, default="prod")
    assert load_project(root, env={}).lake_root == str(tmp_path.resolve() / "prod-lake")
    assert load_project(root, env={"LAKEHOUSE_TARGET": "dev"}).lake_root == str(tmp_path.resolve() / "lake")


@pytest.mark.parametrize("prod_lake", ["", ", lake_root: lake", ", lake_root: ROOT/lake"])
def test_two_targets_on_one_lake_are_refused(tmp_path, prod_lake):
    prod_lake = prod_lake.replace("ROOT", str(tmp_path.resolve()))
    root = project(tmp_path, DEV + "    prod: {host: p, port: 2, user: u, password: y, database: d" + prod_lake + "}\n")
    for target in ("prod", "dev"):
        with pytest.raises(ConfigError, match="would share the lake .* set lake_root in one of the two outputs"):
            load_project(root, target=target, env={})


def test_a_single_output_needs_no_lake_of_its_own(tmp_path):
    assert load_project(project(tmp_path, DEV), env={}).lake_root == str(tmp_path.resolve() / "lake")


def test_without_require_env_an_unset_secret_is_listed_not_raised(tmp_path):
    root = project(tmp_path, DEV.replace("password: x", f"password: {SECRET}"))
    with pytest.raises(ConfigError, match="LAKEHOUSE_TEST_PASSWORD is not set"):
        load_project(root, env={})
    config = load_project(root, env={}, require_env=False)
    assert config.source.unset == ("LAKEHOUSE_TEST_PASSWORD",) and config.source.password == ""
    config = load_project(root, env={"LAKEHOUSE_TEST_PASSWORD": "s"}, require_env=False)
    assert config.source.unset == () and config.source.password == "s"
