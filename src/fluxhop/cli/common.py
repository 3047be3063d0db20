"""Pieces shared by the CLI verbs: reading specs, printing objects, warnings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from fluxhop.documents import read_input
from fluxhop.errors import SpecError
from fluxhop.render.output import dump_json, dump_yaml
from fluxhop.render.targets import Target
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.spec.placement import Placement, place, with_option_flags

__all__ = ["echo_objects", "load_spec", "output_option", "target_option"]


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

    spec = MiniCluster.from_yaml(read_input(path), adjust)
    if not name and spec.metadata.name is None:
        # as kubectl: a manifest names its object (a random name on every
        # render would create a new MiniCluster each time)
        raise SpecError(
            f"{path}: metadata.name is not set; name the MiniCluster there or with --name"
        )
    if name or namespace:
        spec = spec.renamed(name, namespace)
    return spec


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
