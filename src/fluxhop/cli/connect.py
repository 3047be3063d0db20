"""``fluxhop shell`` and ``fluxhop proxy``: into a running instance.

Both need the lead pod. ``shell`` is ``kubectl exec -it`` into it with
FLUX_URI set (through ``flux proxy`` in the pod). ``proxy`` runs the local
``flux proxy ssh://POD/SOCKET`` with FLUX_SSH pointing at a small wrapper that
turns flux's ssh invocation into ``kubectl exec -i POD -- env ...``
(reference/flux-formats.md §6.4).
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import tempfile
from pathlib import Path

import click

from fluxhop.cli.kubeopts import connect, kube_options, kubectl_flags, need_tool
from fluxhop.cli.params import KUBE_NAME
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import NotFound
from fluxhop.workload import Root

OPERATOR_SHELL = ". /mnt/flux/flux-view.sh && exec flux proxy $fluxsocket bash"
OPERATOR_SOCKET = "/mnt/flux/config/run/flux/local"


def _lead(ops: MiniClusters, name: str) -> tuple[Root, str]:
    root = ops.require(name)
    lead = ops.lead_pod(root)
    if lead is None or lead.get("status", {}).get("phase") != "Running":
        raise NotFound(f"MiniCluster {name} has no running rank 0 pod (see fluxhop get {name})")
    return root, lead["metadata"]["name"]


def shell_argv(kubectl: str, flags: list[str], root: Root, pod: str) -> list[str]:
    if not root.fluxhop_pods:
        inner = ["bash", "-c", OPERATOR_SHELL]
    else:
        inner = ["bash", f"{root.config_dir}/connect.sh"]
    return [kubectl, *flags, "exec", "-it", pod, "-c", root.container, "--", *inner]


# Run in the pod by the wrapper for fluxhop's own pods: the broker's env.sh
# (written by the entrypoint) says which flux runs there, the Flux view's or
# the image's; the words flux's ssh connector sends first (its PATH=..., then
# FLUX_SSH_RCMD) name this machine's flux and are dropped.
REMOTE_RELAY = (
    '. "$1"; shift; '
    'while [ "$#" -gt 0 ] && [ "${1#*=}" != "$1" ]; do shift; done; '
    'shift; exec "$flux_bin" "$@"'
)


def ssh_wrapper(kubectl: str, flags: list[str], container: str, env_file: str | None = None) -> str:
    """A FLUX_SSH program: ``[-p port] [user@]host CMD...`` -> kubectl exec.

    With ``env_file`` (fluxhop's pods) the remote flux is the one that file
    names; without it (the Flux Operator's pods) CMD runs as flux sends it."""
    command = " ".join(shlex.quote(word) for word in [kubectl, *flags])
    if env_file is None:
        remote = 'env "$@"'
    else:
        remote = f'bash -c {shlex.quote(REMOTE_RELAY)} fluxhop-proxy {shlex.quote(env_file)} "$@"'
    return (
        "#!/bin/sh\n"
        "# FLUX_SSH for fluxhop proxy: run flux's remote command in the pod with kubectl exec.\n"
        'while [ "$#" -gt 0 ]; do\n'
        '    case "$1" in\n'
        "        -[pioFlJ]) shift 2 ;;\n"
        "        -*) shift ;;\n"
        "        *) break ;;\n"
        "    esac\n"
        "done\n"
        'pod="${1#*@}"\n'
        "shift\n"
        f'exec {command} exec -i "$pod" -c {shlex.quote(container)} -- {remote}\n'
    )


@click.command("shell")
@click.argument("name", type=KUBE_NAME)
@kube_options()
def shell_command(
    name: str, kubeconfig: str | None, context: str | None, namespace: str | None
) -> int:
    """Open an interactive shell in rank 0 with FLUX_URI set (kubectl exec -it)."""
    kubectl = need_tool("kubectl", "fluxhop shell runs kubectl exec -it; install kubectl")
    ops = connect(kubeconfig, context, namespace)
    root, pod = _lead(ops, name)
    argv = shell_argv(kubectl, kubectl_flags(kubeconfig, context, ops.kube.namespace), root, pod)
    os.execv(argv[0], argv)
    return 0  # pragma: no cover - exec does not return


@click.command("proxy", context_settings={"allow_interspersed_args": False})
@click.argument("name", type=KUBE_NAME)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@kube_options()
def proxy_command(
    name: str,
    command: tuple[str, ...],
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
) -> int:
    """Run the local `flux proxy` into the MiniCluster (a shell, or COMMAND)."""
    flux = need_tool(
        "flux", "fluxhop proxy runs your local flux proxy; install flux-core (or use fluxhop shell)"
    )
    kubectl = need_tool(
        "kubectl", "fluxhop proxy reaches the pod through kubectl exec; install kubectl"
    )
    ops = connect(kubeconfig, context, namespace)
    root, pod = _lead(ops, name)
    flags = kubectl_flags(kubeconfig, context, ops.kube.namespace)
    if not root.fluxhop_pods:
        socket, remote_flux, env_file = OPERATOR_SOCKET, "/mnt/flux/view/bin/flux", None
    else:
        # the view's flux, or the image's (--flux-in-image): env.sh knows which
        base = root.flux_root
        socket, remote_flux, env_file = f"{base}/run/broker/local-0", "flux", f"{base}/run/env.sh"
    with tempfile.TemporaryDirectory(prefix="fluxhop-proxy-") as tmp:
        wrapper = Path(tmp) / "kubectl-ssh"
        wrapper.write_text(ssh_wrapper(kubectl, flags, root.container, env_file))
        wrapper.chmod(stat.S_IRWXU)
        env = {**os.environ, "FLUX_SSH": str(wrapper), "FLUX_SSH_RCMD": remote_flux}
        # flux proxy runs its command as `$SHELL -c "<words joined by spaces>"`:
        # quoted words come back out of that shell as they were given
        quoted = [" ".join(shlex.quote(word) for word in command)] if command else []
        argv = [flux, "proxy", f"ssh://{pod}{socket}", *quoted]
        return subprocess.run(argv, env=env, check=False).returncode
