"""The build step of real Flux (``python -m tests.realflux.build``): where it
builds, when it builds again, and what it says when it cannot. The build
itself is proven by every real-Flux test, which runs what it made."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from tests import debian
from tests.realflux import build, install


@pytest.fixture
def upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``flux/`` folder of two small tarballs and their SHA256SUMS."""
    folder = tmp_path / "upstream" / "flux"
    folder.mkdir(parents=True)
    lines = []
    for name in ("flux-core-0.88.0.tar.gz", "flux-sched-0.54.0.tar.gz"):
        (folder / name).write_bytes(name.encode())
        lines.append(f"{hashlib.sha256(name.encode()).hexdigest()}  {name}")
    (folder / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv(install.UPSTREAM_VARIABLE, str(folder.parent))
    monkeypatch.setenv(install.CACHE_VARIABLE, str(tmp_path / "cache"))
    install.tarballs.cache_clear()
    yield folder
    install.tarballs.cache_clear()


def test_the_prefix_is_named_by_the_versions_and_keyed_by_the_digests(upstream: Path):
    first = install.prefix_dir()
    assert first is not None and first.parent == upstream.parent.parent / "cache"
    assert first.name.startswith("flux-core-0.88.0-flux-sched-0.54.0-")
    sums = upstream / "SHA256SUMS"
    sums.write_text(sums.read_text().replace(sums.read_text()[:4], "0000", 1))
    install.tarballs.cache_clear()
    assert install.prefix_dir() != first  # another tarball: another build


def test_only_a_finished_build_is_found(upstream: Path):
    prefix = install.prefix_dir()
    assert prefix is not None
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "flux").write_text("")
    assert install.built_prefix() is None  # killed before the end: no stamp
    (prefix / install.STAMP).write_text("done\n")
    assert install.built_prefix() == prefix


def test_a_tarball_that_is_not_the_one_summed_is_refused(upstream: Path):
    sources = install.tarballs()
    assert sources is not None
    (upstream / "flux-core-0.88.0.tar.gz").write_bytes(b"something else")
    with pytest.raises(build.BuildError, match="does not match its digest in SHA256SUMS"):
        build.verified(sources[install.FLUX_CORE])


def test_missing_packages_are_named_in_one_line_without_root(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(debian, "missing", lambda packages: ["libzmq3-dev", "lua-posix"])
    monkeypatch.setattr(debian.os, "geteuid", lambda: 1000)
    with pytest.raises(build.BuildError) as caught:
        build.install_packages()
    assert str(caught.value) == (
        "building Flux needs these Debian packages; install them as root: "
        "apt-get install -y libzmq3-dev lua-posix"
    )


def test_a_failed_step_names_its_log(tmp_path: Path):
    log = tmp_path / "build.log"
    with pytest.raises(build.BuildError, match=f"make failed with status 2; see {log}"):
        build.run("make", ["sh", "-c", "echo broken; exit 2"], tmp_path, log)
    assert "broken" in log.read_text()


def test_main_says_when_there_are_no_tarballs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(install.UPSTREAM_VARIABLE, str(tmp_path))
    install.tarballs.cache_clear()
    try:
        assert build.main() == 1
    finally:
        install.tarballs.cache_clear()
    assert capsys.readouterr().err == f"build: no Flux release tarballs in {tmp_path / 'flux'}\n"


def test_only_what_is_installed_is_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """flux-sched's unit tests are in its `all`; the build asks Ninja for
    the files the install scripts copy, and only those it knows how to make."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "cmake_install.cmake").write_text(
        f'file(INSTALL DESTINATION "/p/lib" FILES "{tmp_path}/sub/libx.so" '
        f'"{tmp_path}/sub/generated.toml")\n'
    )
    targets = "sub/libx.so: CXX_SHARED_LIBRARY_LINKER\nsub/test_x: CXX_EXECUTABLE_LINKER\n"

    def ninja(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 0, stdout=targets, stderr="")

    monkeypatch.setattr(build.subprocess, "run", ninja)
    assert build.installed_outputs(tmp_path) == ["sub/libx.so"]


def test_fluxion_is_placed_where_a_usr_install_puts_it(tmp_path: Path):
    """What the prefix has and flux-core's /usr install has not (Fluxion)
    goes to its /usr place; a link into the prefix follows it there; what
    flux-core installed for /usr is left as it is."""
    prefix, tree = tmp_path / "opt" / "flux", tmp_path / "tree"
    for relative in ("lib/flux/modules/sched-fluxion-resource.so", "lib/flux/modules/kvs.so",
                     "etc/flux/rc1.d/01-sched-fluxion", "local/lib/python3.11/fluxion/x.py"):  # fmt: skip
        (prefix / relative).parent.mkdir(parents=True, exist_ok=True)
        (prefix / relative).write_text(f"prefix's {relative}")
    (prefix / "lib" / "fluxion").symlink_to(prefix / "local" / "lib" / "python3.11" / "fluxion")
    (prefix / install.STAMP).write_text("built\n")
    (tree / "usr" / "lib" / "flux" / "modules").mkdir(parents=True)
    (tree / "usr" / "lib" / "flux" / "modules" / "kvs.so").write_text("built for /usr")

    build.place_fluxion(prefix, tree)

    modules = tree / "usr" / "lib" / "flux" / "modules"
    assert (modules / "kvs.so").read_text() == "built for /usr"
    assert (modules / "sched-fluxion-resource.so").read_text().startswith("prefix's")
    assert (tree / "etc" / "flux" / "rc1.d" / "01-sched-fluxion").is_file()  # sysconfdir /etc
    assert (tree / "usr" / "local" / "lib" / "python3.11" / "fluxion" / "x.py").is_file()
    link = tree / "usr" / "lib" / "fluxion"
    assert os.readlink(link) == "/usr/local/lib/python3.11/fluxion"
    assert not (tree / "usr" / install.STAMP).exists()
