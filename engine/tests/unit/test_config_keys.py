"""A setting the engine does not know is an error naming the file, the line and the nearest
known setting, never a silent fall back to a default."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse_engine.config.project import load_project
from lakehouse_engine.errors import ConfigError
from lakehouse_engine.run import cli

PROFILES = """p:
  target: dev
  outputs:
    dev: {host: h, port: 1, user: u, password: x, database: d}
    prod:
      host: h
      port: 1
      user: u
      password: x
      database: d
      lake_root: /prod/lake
"""
PROJECT = """profile: p
lake_root: lake
spark:
  master: local[1]
  conf: {spark.sql.shuffle.partitions: 4, spark.anything.goes: x}
defaults:
  chunk_size: 100
binlog:
  server_id_range: [5400, 5499]
quality:
  max_lag_seconds: 60
alerts:
  on_failure: notify-oncall
metrics:
  textfile: /var/lib/node_exporter/textfile/lakehouse.prom
lineage:
  openlineage: file
"""


def project(tmp_path: Path, project_yml: str = PROJECT, profiles_yml: str = PROFILES) -> Path:
    (tmp_path / "lakehouse_project.yml").write_text(project_yml)
    (tmp_path / "profiles.yml").write_text(profiles_yml)
    return tmp_path


def test_every_known_setting_loads_and_spark_conf_takes_any_spark_setting(tmp_path):
    config = load_project(project(tmp_path), env={})
    assert config.defaults.chunk_size == 100 and config.spark.conf["spark.anything.goes"] == "x"
    assert config.telemetry.on_failure == "notify-oncall" and config.telemetry.lineage == "file"
    assert config.telemetry.metrics_textfile == "/var/lib/node_exporter/textfile/lakehouse.prom"


@pytest.mark.parametrize(("project_yml", "profiles_yml", "message"), [
    (PROJECT.replace("  chunk_size: 100", "  chunk_sise: 100"), PROFILES,
     "lakehouse_project.yml:7: unknown setting 'defaults.chunk_sise'; did you mean 'chunk_size'?"),
    (PROJECT.replace("  on_failure:", "  on_falure:"), PROFILES,
     "lakehouse_project.yml:13: unknown setting 'alerts.on_falure'; did you mean 'on_failure'?"),
    (PROJECT + "lake_roots: other\n", PROFILES,
     "lakehouse_project.yml:18: unknown setting 'lake_roots'; did you mean 'lake_root'?"),
    (PROJECT.replace("  master: local[1]", "  mastr: local[1]"), PROFILES,
     "lakehouse_project.yml:4: unknown setting 'spark.mastr'; did you mean 'master'?"),
    (PROJECT.replace("binlog:", "binlogs:"), PROFILES,
     "lakehouse_project.yml:8: unknown setting 'binlogs'; did you mean 'binlog'?"),
    (PROJECT + "zzz: 1\n", PROFILES, "lakehouse_project.yml:18: unknown setting 'zzz'; known: alerts, binlog, "),
    (PROJECT, PROFILES.replace("      lake_root: /prod/lake", "      lakeroot: /prod/lake"),
     "profiles.yml:11: unknown setting 'p.outputs.prod.lakeroot'; did you mean 'lake_root'?"),
    (PROJECT, PROFILES.replace("  target: dev", "  targets: dev"),
     "profiles.yml:2: unknown setting 'p.targets'; did you mean 'target'?"),
])
def test_an_unknown_setting_names_its_file_line_and_the_nearest_known_one(tmp_path, project_yml, profiles_yml,
                                                                          message):
    root = project(tmp_path, project_yml, profiles_yml)
    with pytest.raises(ConfigError) as refused:
        load_project(root, env={})
    assert str(refused.value).startswith(f"{root}/{message}"), str(refused.value)
    assert "\n" not in str(refused.value)


def test_validate_refuses_a_misspelt_setting_in_one_line(tmp_path, capsys):
    root = project(tmp_path, PROJECT.replace("  chunk_size: 100", "  chunk_sise: 100"))
    assert cli.main(["--project-dir", str(root), "--profiles-dir", str(root), "validate"],
                    package="acme_lakehouse") == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err == [f"ERROR [configuration]: {root}/lakehouse_project.yml:7: unknown setting 'defaults.chunk_sise'; "
                   "did you mean 'chunk_size'?"]


def test_the_printed_schemas_accept_a_generated_projects_files_and_refuse_a_misspelt_key(capsys):
    import json

    import fixture_project
    import jsonschema
    import yaml

    schemas = {}
    for name in ("project", "profiles"):
        assert cli.main(["schema", name]) == 0  # needs no project
        schemas[name] = json.loads(capsys.readouterr().out)
    root = fixture_project.PROJECT_ROOT
    settings = yaml.safe_load((root / "lakehouse_project.yml").read_text())
    profiles = yaml.safe_load((root / "profiles.yml").read_text())
    jsonschema.validate(settings, schemas["project"])
    jsonschema.validate(profiles, schemas["profiles"])
    settings["defaults"]["chunk_sise"] = 5
    with pytest.raises(jsonschema.ValidationError, match="chunk_sise"):
        jsonschema.validate(settings, schemas["project"])
    profiles[next(iter(profiles))]["outputs"]["dev"]["hots"] = "x"
    with pytest.raises(jsonschema.ValidationError, match="hots"):
        jsonschema.validate(profiles, schemas["profiles"])
