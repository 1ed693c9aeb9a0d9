"""Helpers to run the real cookiecutter CLI against this template."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TEMPLATE = Path(__file__).resolve().parents[1]


def run_cookiecutter(output_dir: Path, **answers: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "cookiecutter", "--no-input", str(TEMPLATE), "-o", str(output_dir)]
    command += [f"{key}={value}" for key, value in answers.items()]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


@pytest.fixture
def generate(tmp_path: Path):
    """Generate a project with the given answers; returns its folder."""

    def _generate(**answers: str) -> Path:
        done = run_cookiecutter(tmp_path, **answers)
        assert done.returncode == 0, done.stderr
        (project,) = [p for p in tmp_path.iterdir() if p.is_dir()]
        return project

    return _generate
