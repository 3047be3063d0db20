"""The big hostile inputs run in a subprocess under a hard memory limit
(RLIMIT_AS): each must end with one line, exit 2, well within the limit -
proof that nothing is expanded, not a timing guess."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from tests.hostile.corpus import LAUGHS

LIMIT = 1536 * 1024 * 1024  # bytes of address space: Python with pydantic needs ~300 MiB
PROGRAM = "import sys; from fluxhop.cli import main; sys.exit(main(sys.argv[1:]))"


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        preexec_fn=limited,
    )


BIG_FILES = {
    "laughs": LAUGHS.encode(),
    "alias-bomb": b"big: &b " + b"x" * 500_000 + b"\nl: [" + b",".join([b"*b"] * 2000) + b"]\n",
    "deep": b"spec: " + b"[" * 1_000_000,
    "huge": b"# " + b"x" * (60 * 1024 * 1024),
    "many-keys": b"".join(b"k%d: %d\n" % (i, i) for i in range(60_000)),
}


@pytest.mark.parametrize("name", BIG_FILES)
def test_big_files_are_refused_within_the_memory_limit(tmp_path, name):
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(BIG_FILES[name])
    done = run("render", "-f", str(path))
    err = done.stderr.decode()
    assert done.returncode == 2 and err.count("\n") == 1, err
    assert "MemoryError" not in err and "internal error" not in err


def test_dev_zero_and_endless_stdin_are_read_only_up_to_the_limit():
    done = run("render", "-f", "/dev/zero")
    assert done.returncode == 2 and b"larger than 1 MiB" in done.stderr, done.stderr
    done = run("render", "-f", "-", stdin=b"a" * (8 * 1024 * 1024))
    assert done.returncode == 2 and b"standard input is larger than 1 MiB" in done.stderr


@pytest.mark.parametrize(
    "flags",
    [
        ["-N", "100000", "-c", "4096", "-g", "64"],
        ["-N", "100000", "-n", "100000000"],
        ["--max-size", "100000", "-N", "1"],
    ],
    ids=["largest-nodes", "hundred-million-tasks", "max-size"],
)
def test_the_largest_counts_render_within_the_memory_limit(flags):
    done = run("run", "--dry-run", "--image", "ubuntu", "--name", "big", *flags, "--", "true")
    assert done.returncode == 0, done.stderr.decode()
    assert b"core" in done.stdout and len(done.stdout) < 2 * 1024 * 1024


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["-N", "100000", "-c", "1000000000"], "-c/--cores-per-task"),
        (["-N", "1", "-n", "100000000"], "tasks per node"),
        (["--cpu", "1e999999999"], "--cpu"),
    ],
    ids=["billion-cores", "hundred-million-tasks-per-node", "cpu-exponent"],
)
def test_counts_past_any_node_are_one_line_within_the_memory_limit(flags, words):
    done = run("run", "--dry-run", "--image", "ubuntu", "--name", "big", *flags, "--", "true")
    err = done.stderr.decode()
    assert done.returncode == 2 and err.count("\n") == 1 and words in err, err
