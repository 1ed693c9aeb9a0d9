"""The Data Docs browser test never skips: without a Chromium it cannot install, it fails with
the command to run."""

from __future__ import annotations

import pytest
from integration import browser


def no_binaries(monkeypatch, *, apt: bool, root: bool, sudo: bool = False) -> None:
    present = {"apt-get": apt, "sudo": sudo}
    monkeypatch.setattr(browser.shutil, "which", lambda name: f"/usr/bin/{name}" if present.get(name) else None)
    monkeypatch.setattr(browser.os, "access", lambda path, mode: False)
    monkeypatch.setattr(browser.os, "geteuid", lambda: 0 if root else 1000)


def test_no_browser_and_no_apt_fails_naming_what_to_install(monkeypatch):
    no_binaries(monkeypatch, apt=False, root=True)
    with pytest.raises(pytest.fail.Exception, match="install Chromium"):
        browser.ensure_browser()


def test_no_browser_and_no_sudo_fails_with_the_apt_command(monkeypatch):
    no_binaries(monkeypatch, apt=True, root=False, sudo=False)
    with pytest.raises(pytest.fail.Exception, match=r"sudo apt-get install -y chromium"):
        browser.ensure_browser()


def test_an_installed_browser_is_used_as_it_is(monkeypatch):
    monkeypatch.setattr(browser.shutil, "which", lambda name: "/opt/chromium" if name == "chromium" else None)
    assert browser.ensure_browser() == "/opt/chromium"
