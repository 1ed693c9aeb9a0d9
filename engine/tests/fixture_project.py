"""The project the engine's tests run in: the template baked once per test session with its
default answers (the embedded demo's four tables), its package importable as ``acme_lakehouse``.

The engine's tests need what a team's repository has (table modules, lakehouse_project.yml,
profiles.yml, demo SQL); baking the template gives exactly that, with no copy to drift."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[2]
PACKAGE = "acme_lakehouse"


def _bake() -> Path:
    out = Path(tempfile.mkdtemp(prefix="engine-tests-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    done = subprocess.run([sys.executable, "-m", "cookiecutter", "--no-input", str(TEMPLATE), "-o", str(out),
                           "project_name=Acme Lakehouse"], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"baking the template for the engine's tests failed:\n{done.stdout}\n{done.stderr}")
    return out / "acme-lakehouse"


PROJECT_ROOT = _bake()
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))
