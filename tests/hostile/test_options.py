"""Every verb's options, walked: each numeric, name or URL option given bad
values (and each file option a missing, a directory or an empty file) is
refused in one line naming the option, before any request reaches
the API server (issue #34: `autoscale --min-size 0` and `--interval inf`
went to the cluster first; `operator --liveness 'not a url'` started and
never returned)."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import click
import pytest

from fluxhop.cli.app import cli
from fluxhop.cli.params import Seconds
from tests.hostile.lines import one_line
from tests.trainer.conftest import EXAMPLES

TRAINJOB = str(EXAMPLES / "examples__flux__lammps-train-job.yaml")  # its runtime: --runtime


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:  # fmt: skip
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        elif command is not None:
            yield (*path, name), command


# counts where 0 means nothing to run; the others (GPUs per task) may be 0
COUNTS = {"--nodes", "--ntasks", "--tasks", "--size", "--min-size", "--max-size",
          "--pods-per-node", "--cores-per-task"}  # fmt: skip
SIGNED = {"--priority"}  # kopf's peering priority: any integer


def _bad(option: click.Option) -> list[str]:
    """Values this option must refuse, from its type."""
    kind, name = option.type, option.opts[-1]
    if isinstance(kind, Seconds | click.types.FloatParamType):
        return ["nan", "inf", "-inf", "-1", "x"]
    if isinstance(kind, click.types.IntParamType):
        values = ["x", "1.5"] + ([] if name in SIGNED else ["-1"])
        return values + (["0"] if name in COUNTS else [])
    if kind.name in ("name", "domain"):
        return ["Bad_Name", "..", "a/b"]
    if name in ("--filename", "--file", "--runtime"):  # a file fluxhop reads
        return ["/nonexistent/x.yaml", "/", "/dev/null"]
    if kind.name == "url":
        return ["not a url", "http://:8080/healthz", "ftp://0.0.0.0:8080/x", "http://h:x/p"]
    return []


def _cases() -> Iterator[tuple[tuple[str, ...], str, list[str], str]]:
    for path, command in _commands(cli):
        arguments = [p for p in command.params if isinstance(p, click.Argument)]
        for option in command.params:
            if not isinstance(option, click.Option) or option.is_flag:
                continue
            for value in _bad(option):
                yield path, option.opts[-1], [a.name or "" for a in arguments], value


CASES = list(_cases())


# what each argument and each verb needs besides, so that only the bad option is wrong
ARGUMENTS = {"name": ["demo"], "jobid": ["f1"], "jobids": ["f1"], "shell": ["bash"]}
BESIDES = {"create": ["--image", "ubuntu"], "run": ["--image", "ubuntu"], "hop": ["--rabbits", "r1,r2"],
           "operator": ["--namespace", "demo", "--standalone"],
           "trainer render": ["-f", TRAINJOB], "trainer run": ["-f", TRAINJOB]}  # fmt: skip


def _args(path: tuple[str, ...], option: str, value: str, arguments: list[str], kubeconfig: str) -> list[str]:  # fmt: skip
    besides = list(BESIDES.get(" ".join(path), []))
    for given, alias in (("--namespace", "--namespace"), ("--filename", "-f")):
        if option == given and alias in besides:  # the bad value alone
            del besides[besides.index(alias) : besides.index(alias) + 2]
    if "--kubeconfig" in {o for p in _command(path).params for o in p.opts}:
        besides += ["--kubeconfig", kubeconfig]
    words = [word for argument in arguments for word in ARGUMENTS.get(argument, [])]
    command = ["--", "true"] if "command" in arguments else []
    return [*path, f"{option}={value}", *besides, *words, *command]


def test_the_walk_covers_the_options_issue_34_names():
    named = {(" ".join(path), option) for path, option, _, _ in CASES}
    for case in [("autoscale", "--min-size"), ("autoscale", "--scale-down-delay"),
                 ("autoscale", "--interval"), ("operator", "--liveness"),
                 ("run", "--request-timeout"), ("trainer run", "--timeout")]:  # fmt: skip
        assert case in named


@pytest.mark.parametrize(
    ("path", "option", "arguments", "value"),
    CASES,
    ids=[f"{' '.join(p)} {o} {v}" for p, o, _, v in CASES],
)
def test_a_bad_option_is_refused_before_any_request(
    cli_cluster, kubeconfig, capsys, monkeypatch, path, option, arguments, value
):
    import kopf

    monkeypatch.setattr(kopf, "run", lambda **kwargs: pytest.fail("the operator started"))
    args = _args(path, option, value, arguments, str(kubeconfig))
    code, err = one_line(capsys, *args)
    aliases = next(p.opts for p in _command(path).params if option in p.opts)
    assert code != 0 and any(alias in err for alias in aliases), err
    assert cli_cluster.requests == []


@functools.cache
def _command(path: tuple[str, ...]) -> click.Command:
    return dict(_commands(cli))[path]
