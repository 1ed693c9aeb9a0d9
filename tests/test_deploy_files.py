"""The generated deployment files run the engine as a supervised service: the systemd unit and
the container entry point hand SIGTERM to `lakehouse` itself (never through make or a shell that
swallows it), the Kubernetes objects parse, and every schedule line runs a real command."""

from __future__ import annotations

import configparser
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import run_cookiecutter


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("deploy")
    done = run_cookiecutter(out, project_name="Deploy Check")
    assert done.returncode == 0, done.stderr
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    return folder


def lakehouse_accepts(arguments: list[str]) -> subprocess.CompletedProcess:
    """``lakehouse <arguments> --help`` with this checkout's engine: the parser knows them."""
    return subprocess.run([sys.executable, "-m", "lakehouse_engine", *arguments, "--help"],
                          capture_output=True, text=True, timeout=120)


def test_the_systemd_unit_runs_follow_itself_and_lets_it_commit_on_stop(project):
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # systemd keys are case-sensitive
    unit.read(project / "deploy" / "lakehouse-follow.service")
    service = unit["Service"]
    command = shlex.split(service["ExecStart"])
    assert command[0] == f"{service['WorkingDirectory']}/.venv/bin/lakehouse" and command[1] == "follow"
    assert "make" not in command
    assert service["KillSignal"] == "SIGTERM" and int(service["TimeoutStopSec"]) >= 60
    assert service["Restart"] == "on-failure" and service["RestartPreventExitStatus"] == "2"
    assert lakehouse_accepts(command[1:]).returncode == 0


def test_the_container_entry_point_execs_the_engine_so_sigterm_reaches_it(project):
    entry = project / "deploy" / "entrypoint.sh"
    assert entry.stat().st_mode & 0o111, "the entry point must be executable"
    lines = [line.strip() for line in entry.read_text().splitlines() if line.strip().startswith("exec ")]
    assert lines and all(line.startswith("exec lakehouse") for line in lines)
    dockerfile = (project / "deploy" / "Dockerfile").read_text()
    # exec form with tini as PID 1 (forwards SIGTERM, reaps children): no shell in between.
    assert 'ENTRYPOINT ["/usr/bin/tini", "--", "/app/deploy/entrypoint.sh"]' in dockerfile
    ignored = (project / ".dockerignore").read_text().split()
    assert {".venv/", "target/", ".source/"} <= set(ignored)  # host state never enters the image
    cmd = next(line for line in dockerfile.splitlines() if line.startswith("CMD "))
    assert lakehouse_accepts(yaml.safe_load(cmd[4:])).returncode == 0


def test_the_kubernetes_objects_parse_and_never_run_two_followers(project):
    deployment, cronjob = yaml.safe_load_all((project / "deploy" / "kubernetes.yaml").read_text())
    assert deployment["kind"] == "Deployment" and deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] >= 60
    assert lakehouse_accepts(pod["containers"][0]["args"]).returncode == 0
    job = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid" and lakehouse_accepts(job["args"]).returncode == 0


def test_every_cron_line_runs_a_lakehouse_command_the_engine_knows(project):
    lines = [line for line in (project / "crontab.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    commands = [line.split("&&", 1)[1].split(">>")[0].split() for line in lines]
    assert [c[1] for c in commands] == ["ingest", "dq", "maintain"]  # ingest is scheduled too
    for command in commands:
        assert command[0] == ".venv/bin/lakehouse"
        assert lakehouse_accepts(command[1:]).returncode == 0, command
