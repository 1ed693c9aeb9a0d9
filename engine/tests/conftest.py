"""The engine's suite tests this checkout's ``engine/src``, never an engine installed over it.

A generated project's ``make setup`` (``make demo`` runs one) installs the project's pinned
engine into the same virtual environment, over the editable install of ``engine/``: the suite
would then pass or fail on code that is not the checkout's, silently. It stops instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src" / "lakehouse_engine"


def pytest_configure(config: pytest.Config) -> None:
    import lakehouse_engine

    found = Path(lakehouse_engine.__file__).resolve().parent
    if found != SOURCE:
        raise pytest.UsageError(
            f"the engine's tests would import lakehouse_engine from {found}, not from this checkout's "
            f"{SOURCE}; run `make test`, or `python -m pip install --no-deps -e engine` first")
