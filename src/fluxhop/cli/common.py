"""Pieces shared by the CLI verbs: reading specs, printing objects, warnings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
from pydantic import ValidationError

from fluxhop.documents import read_input
from fluxhop.errors import FluxhopError, InputError, SpecError, clipped, shown
from fluxhop.render.output import dump_json, dump_yaml
from fluxhop.render.targets import Target
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.spec.placement import Placement, place, with_option_flags
from fluxhop.spec.screen import in_terms, spec_error

__all__ = ["echo_objects", "load_spec", "output_option", "shortened", "target_option"]


def shortened(err: InputError) -> InputError:
    """``err``, or one of its kind whose line is cut short when it quotes a
    huge value whole (fluxhop.errors.clipped)."""
    line = clipped(str(err))
    return err if line == str(err) else type(err)(line)


def load_spec(
    path: str,
    *,
    name: str | None = None,
    namespace: str | None = None,
    placement: Placement | None = None,
    flux_words: Sequence[str] = (),
) -> MiniCluster:
    """Read a MiniCluster file (``-`` for stdin); flags override its
    name/namespace, write the placement flags' fields in, and add flux job
    options to the job rank 0 runs (``spec.flux.optionFlags``)."""

    def adjust(document: dict[str, Any]) -> dict[str, Any]:
        if placement is not None:
            document = place(document, placement)
        if flux_words:
            document = with_option_flags(document, flux_words)
        return document

    try:
        spec = MiniCluster.from_yaml(read_input(path), adjust, source=f"-f {path}")
    except InputError as err:  # the file's fields, or the flags written into it
        raise shortened(err) from None
    if not name and spec.metadata.name is None:
        # as kubectl: a manifest names its object (a random name on every
        # render would create a new MiniCluster each time)
        raise SpecError(
            f"{path}: metadata.name is not set; name the MiniCluster there or with --name"
        )
    if name or namespace:
        try:
            spec = spec.renamed(name, namespace)
        except (FluxhopError, ValidationError) as err:
            raise SpecError(_renaming_error(err, name, namespace)) from None
    return spec


def _renaming_error(
    err: FluxhopError | ValidationError, name: str | None, namespace: str | None
) -> str:
    """Why --name/--namespace cannot rename the file's MiniCluster, naming the flag."""
    message = str(spec_error(err) if isinstance(err, ValidationError) else err)
    flags = (
        ("metadata.name", "--name"),
        ("name", "--name"),
        ("metadata.namespace", "--namespace"),
        ("namespace", "--namespace"),
    )
    named = in_terms(message, flags)
    if named == message:  # a message that names neither: the name's, most likely
        named = (
            f"--name {shown(name)}: {message}"
            if name
            else f"--namespace {shown(namespace)}: {message}"
        )
    return clipped(named)


def echo_objects(objects: list[dict[str, Any]], output: str) -> None:
    click.echo(dump_json(objects) if output == "json" else dump_yaml(objects), nl=False)


def target_option(default: Target = Target.JOB) -> Any:
    return click.option(
        "--target",
        type=click.Choice([t.value for t in Target]),
        default=default.value,
        show_default=True,
        callback=lambda ctx, param, value: Target(value),
        help="What to create: an Indexed Job (any cluster), a JobSet, or the Flux Operator's MiniCluster.",
    )


def output_option(*names: str) -> Any:
    return click.option(
        *names,
        "output",
        type=click.Choice(["yaml", "json"]),
        default="yaml",
        show_default=True,
        help="Output format.",
    )
