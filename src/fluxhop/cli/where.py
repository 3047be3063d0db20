"""Where a verb acts: on Kubernetes, or on this machine (the local backend).

The one rule, for ``run`` and for every verb that takes ``--local``:

* ``--local``: this machine, always.
* Otherwise Kubernetes, its configuration found as kubectl finds it, unless
  there is none at all - no ``--kubeconfig`` or ``--context`` given,
  ``KUBECONFIG`` unset and no ``~/.kube/config`` (or ``KUBECONFIG`` naming no
  existing file), not inside a pod - and this machine has what the verb
  needs: the local MiniCluster of that NAME (``list``: any), or, for ``run``
  and ``create``, flux on PATH.
* Neither: one line that says both.

A kubeconfig that exists but cannot be used says what is wrong with it: it
is never passed over for this machine in silence.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

import click

from fluxhop.cli.kubeopts import connect
from fluxhop.cluster.config import SERVICE_ACCOUNT, default_kubeconfig, expanded
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import KubeconfigError
from fluxhop.local.store import LocalStore

__all__ = ["kube_configured", "reach"]

SET_UP_KUBERNETES = "set KUBECONFIG (or pass --kubeconfig)"


def kube_configured(env: Mapping[str, str] | None = None) -> bool:
    """Whether there is a Kubernetes configuration to read, in the places
    cluster/config.py looks (KUBECONFIG's files, else ~/.kube/config, else a
    pod's service account); whether it is usable is for connect() to say."""
    env = os.environ if env is None else env
    if env.get("KUBECONFIG"):
        paths = [expanded(p) for p in env["KUBECONFIG"].split(os.pathsep) if p]
        return any(path.is_file() for path in paths)
    home = default_kubeconfig(env)
    if home is not None and home.is_file():
        return True
    return bool(env.get("KUBERNETES_SERVICE_HOST")) and (SERVICE_ACCOUNT / "token").is_file()


def reach(
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    *,
    local: bool,
    name: str | None = None,
    new: bool = False,
) -> MiniClusters | None:
    """The Kubernetes connection the verb uses, or None: on this machine.

    ``name``: the verb acts on that MiniCluster, found locally when there is
    no Kubernetes configuration. ``new`` (run, create): the verb starts one,
    here when there is no Kubernetes configuration and flux is on PATH.
    Neither (list): here when any local MiniCluster exists."""
    if local:
        return None
    try:
        return connect(kubeconfig, context, namespace)
    except KubeconfigError:
        if kubeconfig or context or kube_configured():
            raise
    if new:
        if shutil.which("flux"):
            click.echo(
                "fluxhop: no Kubernetes configuration; running on this machine with the flux "
                "on PATH (--local)",
                err=True,
            )
            return None
        raise KubeconfigError(
            "no Kubernetes configuration and no flux on PATH to run on this machine: "
            f"{SET_UP_KUBERNETES}, or install flux-core 0.82+ for --local"
        )
    store = LocalStore()
    if name is None:
        if store.list():
            return None
        raise KubeconfigError(
            "no Kubernetes configuration and no local MiniClusters: "
            f"{SET_UP_KUBERNETES}, or start one here with fluxhop create --local"
        )
    if store.find(name) is not None:
        return None
    raise KubeconfigError(
        f"no Kubernetes configuration and no local MiniCluster {name}: "
        f"{SET_UP_KUBERNETES}, or start it here with fluxhop create --local --name {name}"
    )
