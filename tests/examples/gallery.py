"""The examples gallery (``examples/``) as the tests see it: each file's
header comment (what it shows, then the commands that run it, indented), the
commands that name the file, and the objects each of those commands makes -
through the file's own door (``render``, ``trainer render``, ``hop``, or the
file as ``kubectl apply -f`` sends it).

A header is the file's leading ``#`` lines. Prose is ``# text``; a command
is indented (``#   fluxhop render -f examples/x.yaml  # a comment``), one to
a line. A command renders when it is ``fluxhop render|run|create -f FILE``
(the ``render`` of the same file and ``--target``), ``fluxhop trainer
render|run -f FILE``, ``fluxhop hop ... --dry-run``, or ``kubectl apply -f
FILE`` (the file's own documents).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fluxhop.cli import main
from tests.conformance import REPO

__all__ = ["EXAMPLES", "Example", "Rendering", "jobspec_minicluster", "read", "run_cli"]

EXAMPLES = sorted(p for p in (REPO / "examples").iterdir() if p.is_file())
COMMAND = re.compile(r"^#\s{2,}(\S.*)$")
MINICLUSTER_VERBS = ("render", "run", "create")


@dataclass(frozen=True)
class Rendering:
    """The objects one header command makes: ``how`` names the door and the
    target (``render --target jobset``, ``kubectl apply``, ...)."""

    how: str
    objects: list[dict[str, Any]]
    warnings: list[str]


@dataclass(frozen=True)
class Example:
    path: Path
    prose: list[str]
    commands: list[list[str]]  # argv of each command line, comments dropped

    @property
    def relative(self) -> str:
        return self.path.relative_to(REPO).as_posix()

    @property
    def documents(self) -> list[dict[str, Any]]:
        return [doc for doc in yaml.safe_load_all(self.path.read_text()) if doc]

    @property
    def is_jobspec(self) -> bool:
        docs = self.documents
        return len(docs) == 1 and "tasks" in docs[0] and "version" in docs[0]

    def own(self) -> list[list[str]]:
        """The commands that name this file."""
        return [argv for argv in self.commands if self.relative in " ".join(argv)]

    def fluxhop(self) -> list[list[str]]:
        """Every ``fluxhop`` command of the header, as argv after ``fluxhop``
        (a line may chain several with ``|``, ``&&`` or ``;``)."""
        found = []
        for argv in self.commands:
            words: list[str] = []
            for word in [*argv, ";"]:
                if word in (";", "&&", "|", "||"):
                    if words[:1] == ["fluxhop"]:
                        found.append(words[1:])
                    words = []
                else:
                    words.append(word)
        return found

    def renderings(self) -> list[Rendering]:
        """What every rendering command of the header makes."""
        out: list[Rendering] = []
        for argv in self.fluxhop():
            rendering = self._render(argv)
            if rendering is not None and rendering.how not in [r.how for r in out]:
                out.append(rendering)
        for argv in self.commands:
            if argv[:2] == ["kubectl", "apply"] and self.relative in argv:
                out.append(Rendering("kubectl apply", self.documents, []))
        return out

    def _render(self, argv: list[str]) -> Rendering | None:
        path = str(self.path)
        words = [path if word == self.relative else word for word in argv]
        verb = words[0] if words else ""
        if verb in MINICLUSTER_VERBS and path in words:
            target = _value(words, "--target") or "job"
            keep = [w for flag in ("--name", "--namespace") if _value(words, flag)
                    for w in (flag, _value(words, flag))]  # fmt: skip
            command = ["render", "-f", path, "--target", target, *keep, "-o", "json"]
            return _rendering(f"render --target {target}", command)
        if verb == "trainer" and path in words:
            runtimes = [w for r in _values(words, "--runtime") for w in ("--runtime", r)]
            command = ["trainer", "render", "-f", path, *runtimes, "-o", "json"]
            return _rendering("trainer render", command)
        if verb == "hop" and "--dry-run" in words:
            target = _value(words, "--target") or "job"
            return _rendering(f"hop --target {target}", [*words, "--output", "json"])
        return None


def _values(words: list[str], flag: str) -> list[str]:
    found = []
    for i, word in enumerate(words):
        if word == flag and i + 1 < len(words):
            found.append(words[i + 1])
        elif word.startswith(f"{flag}="):
            found.append(word.split("=", 1)[1])
    return found


def _value(words: list[str], flag: str) -> str | None:
    values = _values(words, flag)
    return values[-1] if values else None


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``fluxhop ARGV`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _rendering(how: str, argv: list[str]) -> Rendering:
    code, out, err = run_cli(argv)
    if code != 0:
        raise AssertionError(f"fluxhop {shlex.join(argv)} exited {code}: {err.strip()}")
    document = json.loads(out)
    objects = document["items"] if document.get("kind") == "List" else [document]
    found = [line for line in err.splitlines() if "warning:" in line]
    return Rendering(how, objects, found)


def read(path: Path) -> Example:
    """The example at ``path``, its header split into prose and commands."""
    prose, commands = [], []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        command = COMMAND.match(line)
        if command:
            lexer = shlex.shlex(command.group(1), posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            commands.append(list(lexer))
        elif line.strip("# "):
            prose.append(line.lstrip("# "))
    return Example(path, prose, commands)


def jobspec_minicluster(example: Example, rabbits: list[str], name: str) -> Any:
    """The MiniCluster a site's DWS hooks make of a jobspec example on
    ``rabbits`` (fluxhop.rabbit.hooks.on_pre_run's first steps), for this user."""
    import os

    from fluxhop.flux.jobspec import load
    from fluxhop.rabbit.request import RabbitRequest

    request = RabbitRequest.from_jobspec(load(example.path.read_text()))
    return request.to_minicluster(
        request.rabbits or rabbits, name=name, uid=os.getuid(), gid=os.getgid()
    )
