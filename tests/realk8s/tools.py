"""What the realk8s tests use to drive and observe the cluster: the kubectl
and fluxhop commands with the cluster's kubeconfig, pod manifests, and waits
for conditions read from the API server (never for a guessed time)."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.processes import eventually as poll
from tests.realk8s.api import Api, ApiError
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.images.build import APPLICATION_IMAGES

__all__ = [
    "command_env",
    "eventually",
    "fluxhop",
    "kubectl",
    "kubectl_tty",
    "output",
    "pod_manifest",
    "scratch_namespace",
    "tty_session",
    "wait_pod_phase",
]

FLUXHOP = Path(sys.executable).with_name("fluxhop")
# the brokers' log lines, fluxhop's own progress and flux-job's notes
QUIET = re.compile(r"^(<\d>|fluxhop: |flux-job: )")


def output(text: str) -> list[str]:
    """Rank 0's command output in what ``fluxhop run`` printed: the rest."""
    return [line for line in text.splitlines() if not QUIET.match(line)]


def command_env(
    cluster: LocalCluster, kubeconfig: Path | None = None, **extra: str
) -> dict[str, str]:
    """The environment of a command run against the cluster: its kubeconfig,
    and first on PATH the kubectl built with it and the flux-core the pods
    get (``fluxhop proxy`` runs the local flux)."""
    return {
        **os.environ,
        "KUBECONFIG": str(kubeconfig or cluster.admin_kubeconfig),
        "PATH": ":".join(
            [str(cluster.bin)]
            + ([str(cluster.flux_prefix / "bin")] if cluster.flux_prefix else [])
            + [os.environ.get("PATH", "/usr/bin:/bin")]
        ),
        **extra,
    }


def kubectl(cluster: LocalCluster, *args: str, stdin: str | None = None, timeout: float = 60,
            check: bool = True) -> subprocess.CompletedProcess[str]:  # fmt: skip
    done = subprocess.run(
        [str(cluster.bin / "kubectl"), *args], input=stdin, capture_output=True, text=True,
        timeout=timeout, env=command_env(cluster),
    )  # fmt: skip
    if check and done.returncode:
        raise AssertionError(f"kubectl {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done


def tty_session(
    cluster: LocalCluster, argv: list[str], answer: bytes = b"", timeout: float = 60
) -> tuple[int, str]:
    """Run ``argv`` with a terminal for stdin and stdout, as a person runs
    ``kubectl exec -it`` or ``fluxhop shell``: ``answer`` is typed once it
    prints something; returns the exit code and everything the terminal showed."""
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        argv,
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env=command_env(cluster),
        start_new_session=True,
    )
    os.close(secondary)
    shown, typed, deadline = b"", False, time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # EIO: the program exited and closed the terminal
                break
            if not chunk:
                break
            shown += chunk
            if answer and not typed:
                os.write(primary, answer)
                typed = True
        elif process.poll() is not None:
            break
    os.close(primary)
    return process.wait(timeout=max(1.0, deadline - time.monotonic())), shown.decode(
        errors="replace"
    )


def kubectl_tty(
    cluster: LocalCluster, *args: str, answer: bytes = b"", timeout: float = 60
) -> tuple[int, str]:
    return tty_session(cluster, [str(cluster.bin / "kubectl"), *args], answer, timeout)


def fluxhop(cluster: LocalCluster, *args: str, timeout: float = 240,
            kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(
        [str(FLUXHOP), *args], capture_output=True, text=True, timeout=timeout,
        env=command_env(cluster, kubeconfig), stdin=subprocess.DEVNULL,
    )  # fmt: skip


def eventually(what: str, check: Callable[[], Any], timeout: float = 60, every: float = 0.1) -> Any:
    """Poll an observable condition until it holds; fail with ``what`` after
    ``timeout`` (an API error counts as not yet)."""
    return poll(what, check, timeout, every, tolerate=(ApiError,))


def pod_manifest(name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    """A pod of one container, ``c``, that runs ``command`` in an image with
    a shell (APPLICATION_IMAGES: Debian 12 under ubuntu:noble's name)."""
    container = {"name": "c", "image": APPLICATION_IMAGES[0], "command": command,
                 **spec.pop("container", {})}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **spec.pop("metadata", {})},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
                 "containers": [container], **spec},
    }  # fmt: skip


def pod_log(cluster: LocalCluster, namespace: str, pod: str | None) -> str:
    """What the pod's container has said so far ("" for no pod, one not
    started yet or gone)."""
    if pod is None:
        return ""
    with cluster.admin() as api:
        try:
            return str(api.text(f"/api/v1/namespaces/{namespace}/pods/{pod}/log"))
        except ApiError:
            return ""


def wait_pod_phase(
    api: Api, namespace: str, name: str, *phases: str, timeout: float = 60
) -> dict[str, Any]:
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    return eventually(
        f"pod {name} in {'/'.join(phases)}",
        lambda: (pod := api.get(path)).get("status", {}).get("phase") in phases and pod,
        timeout,
    )


@contextlib.contextmanager
def scratch_namespace(cluster: LocalCluster) -> Iterator[tuple[Api, str]]:
    """A namespace of its own for a module's tests (an admin API and its
    name), deleted after them by the real namespace controller."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    with cluster.admin() as admin:
        admin.create("/api/v1/namespaces", {"metadata": {"name": name}})
        try:
            yield admin, name
        finally:
            admin.delete(f"/api/v1/namespaces/{name}")


@dataclass
class InNamespace:
    """fluxhop against the test cluster in one namespace (scratch_namespace's)."""

    cluster: LocalCluster
    admin: Api
    namespace: str

    def fluxhop(
        self, verb: str, *args: str, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        return fluxhop(self.cluster, verb, "--namespace", self.namespace, *args, timeout=timeout)

    def checked(self, verb: str, *args: str) -> str:
        """The command's stdout; it must succeed."""
        done = self.fluxhop(verb, *args)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def online(self, name: str) -> int:
        """Brokers up in ``name``, as fluxhop status says (0 while it cannot say)."""
        done = self.fluxhop("status", name, "-o", "json")
        return int(json.loads(done.stdout)["brokers"]["up"]) if done.returncode == 0 else 0
