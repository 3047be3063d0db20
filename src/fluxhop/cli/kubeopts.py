"""Kubernetes targeting options (kubectl's names) and the connection they make."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

import click

from fluxhop.cluster.api import Kube
from fluxhop.cluster.minicluster import MiniClusters
from fluxhop.errors import LocalToolMissing

__all__ = ["connect", "kube_options", "kubectl_flags", "need_tool"]


def kube_options(short_namespace: bool = True) -> Callable[[Any], Any]:
    """--kubeconfig, --context, and --namespace (-n only on cluster verbs,
    where -n does not mean Flux's task count)."""
    names = ("-n", "--namespace") if short_namespace else ("--namespace",)

    def decorate(func: Any) -> Any:
        func = click.option(
            "--kubeconfig", help="Path to the kubeconfig file (else KUBECONFIG, ~/.kube/config)."
        )(func)
        func = click.option("--context", help="The kubeconfig context to use.")(func)
        return click.option(
            *names, "namespace", help="Kubernetes namespace (default: the context's)."
        )(func)

    return decorate


def connect(kubeconfig: str | None, context: str | None, namespace: str | None) -> MiniClusters:
    return MiniClusters(Kube.connect(kubeconfig, context, namespace))


def kubectl_flags(kubeconfig: str | None, context: str | None, namespace: str) -> list[str]:
    flags = []
    if kubeconfig:
        flags += ["--kubeconfig", kubeconfig]
    if context:
        flags += ["--context", context]
    return [*flags, "--namespace", namespace]


def need_tool(name: str, why: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise LocalToolMissing(f"{name} is not on PATH; {why}")
    return path
