"""The peers' build step (``python -m tests.peers.build``): a real Go build
of a small peer made here, from a copy of its folder with upstream's
replacement in place, into the cache its digest names; nothing rebuilt when
current; a changed folder is a new build. The Flux Operator's own build is
proven by the tests that run it (tests/realk8s/test_flux_operator.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests import conformance
from tests.peers import CACHE_VARIABLE, Peer, _digest
from tests.peers import build as peers_build

pytestmark = pytest.mark.skipif(shutil.which("go") is None, reason="no Go toolchain on PATH")

MAIN = """package main

import "fmt"

func main() { fmt.Println(greeting()) }
"""


@pytest.fixture
def peer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Peer:
    folder = tmp_path / "upstream" / "hello"
    (folder / "greet").mkdir(parents=True)
    (folder / "go.mod").write_text("module example.com/hello\n\ngo 1.22\n")
    (folder / "main.go").write_text(MAIN)
    (folder / "greeting.go").write_text(
        'package main\n\nfunc greeting() string { return "stub" }\n'
    )
    (folder / "greeting.go.template").write_text(
        'package main\n\nfunc greeting() string { return "as shipped" }\n'
    )
    monkeypatch.setenv(conformance.UPSTREAM_VARIABLE, str(folder.parent))
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    _digest.cache_clear()
    return Peer("hello", "hello", ".", replacements={"greeting.go": "greeting.go.template"})


def test_it_builds_a_copy_as_upstream_ships_it(peer: Peer):
    assert peer.binary() is None and "not built" in (peer.missing() or "")
    assert peers_build.build_one(peer) == 0
    binary = peer.binary()
    assert binary is not None and peer.missing() is None
    ran = subprocess.run([str(binary)], capture_output=True, text=True, check=True)
    assert ran.stdout == "as shipped\n"  # the replacement, not the stub
    assert (peer.source() / "greeting.go").read_text().count("stub") == 1  # upstream untouched


def test_a_current_build_is_kept_and_a_changed_folder_builds_anew(
    peer: Peer, capsys: pytest.CaptureFixture[str]
):
    assert peers_build.build_one(peer) == 0
    first = peer.binary()
    assert peers_build.build_one(peer) == 0
    assert "up to date" in capsys.readouterr().out
    (peer.source() / "main.go").write_text(MAIN + "\n// changed\n")
    _digest.cache_clear()
    assert peer.binary() is None  # another folder: another build
    assert peers_build.build_one(peer) == 0
    assert peer.binary() != first and first is not None and not first.exists()  # the old one went


def test_an_unknown_peer_is_one_line(capsys: pytest.CaptureFixture[str]):
    assert peers_build.main(["nope"]) == 2
    assert capsys.readouterr().err == "build: no peer 'nope'; peers: flux-operator, dws\n"
