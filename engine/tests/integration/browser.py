"""A headless Chromium for tests that look at pages as a reader would.

Like the embedded MariaDB, the browser comes from Debian's packages: installed on demand
(``chromium``) when this user may run apt-get, as root or through passwordless sudo. Where none
can be found or installed the test fails with the command to run: it never skips silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

# Debian's package, then the names other systems use (GitHub's Ubuntu runners ship Chrome).
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Headless, as root, on a closed network: without the background-networking flags Chromium keeps
# trying to reach Google's hosts at every start.
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio",
)


def find_browser() -> str | None:
    for name in CANDIDATES:
        found = shutil.which(name) or (f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK) else None)
        if found:
            return found
    return None


def ensure_browser() -> str:
    """The path of a Chromium, installed from Debian's packages when missing and allowed."""
    found = find_browser()
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None:
        pytest.fail("Chromium is needed to check the Data Docs and apt-get is unavailable: install "
                    "Chromium (or Chrome) so that `chromium` is on PATH", pytrace=False)
    prefix: list[str] = []
    if os.geteuid() != 0:
        if not shutil.which("sudo") or subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode:
            pytest.fail("Chromium is needed to check the Data Docs: run "
                        "`sudo apt-get install -y chromium`", pytrace=False)
        prefix = ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print("Installing Debian's chromium (needed once for the Data Docs test)...", flush=True)
    for command in (["apt-get", "update", "-q"],
                    ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"]):
        done = subprocess.run(prefix + command, env=env, capture_output=True, text=True)
        if done.returncode:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
            pytest.fail(f"`{' '.join(command)}` failed ({tail[0]}): install chromium by hand", pytrace=False)
    found = find_browser()
    if found is None:
        pytest.fail("chromium was installed but no chromium binary is on PATH", pytrace=False)
    return found


def rendered_dom(browser: str, page: Path, timeout: float = 120.0) -> str:
    """The page's DOM after Chromium loaded it and ran its scripts (``--dump-dom``)."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        done = subprocess.run(
            [browser, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout,
        )
    assert done.returncode == 0, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    assert "<html" in done.stdout, f"chromium printed no DOM for {page}: {done.stderr[-2000:]}"
    return done.stdout
