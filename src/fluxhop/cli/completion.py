"""``fluxhop completion SHELL``: the shell completion script, from click's own
completion support (``eval "$(fluxhop completion bash)"``)."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

__all__ = ["completion_command"]

SHELLS = ("bash", "zsh", "fish")


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion_command(shell: str) -> int:
    """Print the shell completion script for bash, zsh or fish.

    bash: eval "$(fluxhop completion bash)" in ~/.bashrc; zsh: the same in
    ~/.zshrc; fish: fluxhop completion fish > ~/.config/fish/completions/fluxhop.fish
    """
    from fluxhop.cli.app import cli  # the group whose verbs are completed

    complete = get_completion_class(shell)
    assert complete is not None  # SHELLS are the ones click implements
    click.echo(complete(cli, {}, "fluxhop", "_FLUXHOP_COMPLETE").source())
    return 0
