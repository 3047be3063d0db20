"""tests/debian.py against this machine's dpkg: what it says is missing."""

from __future__ import annotations

import shutil

import pytest

from tests import debian

pytestmark = pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not Debian")


def test_installed_and_missing_packages_are_told_apart():
    assert debian.missing(["coreutils", "no-such-package-fluxhop"]) == ["no-such-package-fluxhop"]
    assert debian.install(["coreutils"], "nothing") == []  # nothing to do, as any user
