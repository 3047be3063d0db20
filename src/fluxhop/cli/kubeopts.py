"""Kubernetes targeting options (kubectl's names) and the connection they make."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

import click

from fluxhop.cli.params import KUBE_NAME, Seconds
from fluxhop.cluster.api import DEFAULT_REQUEST_TIMEOUT, Kube
from fluxhop.cluster.inside import kubectl_flags
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import LocalToolMissing

__all__ = ["connect", "kube_options", "kubectl_flags", "local_option", "need_tool"]


TIMEOUT_KEY = "fluxhop.request_timeout"


def _remember_timeout(ctx: click.Context, param: click.Parameter, value: float) -> float:
    # Kept on the context for connect(): every verb that talks to the API gets
    # it without a parameter of its own.
    ctx.meta[TIMEOUT_KEY] = value
    return value


def kube_options(short_namespace: bool = True) -> Callable[[Any], Any]:
    """--kubeconfig, --context, --namespace (-n only on cluster verbs, where
    -n does not mean Flux's task count) and --request-timeout."""
    names = ("-n", "--namespace") if short_namespace else ("--namespace",)

    def decorate(func: Any) -> Any:
        func = click.option(
            "--request-timeout",
            type=Seconds(0),
            default=DEFAULT_REQUEST_TIMEOUT,
            show_default=True,
            expose_value=False,
            callback=_remember_timeout,
            help="Seconds one request to the API server may take, retries included.",
        )(func)
        func = click.option(
            "--kubeconfig", help="Path to the kubeconfig file (else KUBECONFIG, ~/.kube/config)."
        )(func)
        func = click.option("--context", help="The kubeconfig context to use.")(func)
        return click.option(
            *names,
            "namespace",
            type=KUBE_NAME,
            help="Kubernetes namespace (default: the context's).",
        )(func)

    return decorate


def connect(kubeconfig: str | None, context: str | None, namespace: str | None) -> MiniClusters:
    ctx = click.get_current_context(silent=True)
    timeout = ctx.meta.get(TIMEOUT_KEY, DEFAULT_REQUEST_TIMEOUT) if ctx else DEFAULT_REQUEST_TIMEOUT
    kube = Kube.connect(kubeconfig, context, namespace, request_timeout=timeout)
    if ctx is not None:
        ctx.call_on_close(kube.close)  # its connections, when the command ends, however it ends
    return MiniClusters(kube)


def local_option(
    help: str = "A MiniCluster on this machine (fluxhop create --local), not on Kubernetes; "
    "implied when there is no kubeconfig and one of that name is here.",
) -> Callable[[Any], Any]:
    """--local; the rule for when it is implied is cli/where.py's reach()."""
    return click.option("--local", is_flag=True, help=help)


def need_tool(name: str, why: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise LocalToolMissing(f"{name} is not on PATH; {why}")
    return path
