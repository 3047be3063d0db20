"""A command in a pod through the API server: the ``pods/exec`` subresource
over a WebSocket (lightkube's ``exec``, on the connection every other call
uses: its TLS, token or credential plugin). fluxhop's operator runs Flux
commands in rank 0's pod this way - it has no kubectl. No stdin and no TTY:
the output is captured and the exit code read from the API server's status
channel. Not retried: a command may have run before its answer was lost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx2
from httpx2.websockets import HTTPXWSException, WebSocketUpgradeError
from lightkube import ApiError

from fluxhop.cluster.answers import detail, failure_of, translate
from fluxhop.cluster.api import Kube
from fluxhop.cluster.kinds import kind
from fluxhop.errors import ClusterError, Forbidden, Unreachable

__all__ = ["Completed", "pod_exec"]


@dataclass(frozen=True)
class Completed:
    """What the command did (the fields subprocess.CompletedProcess has)."""

    returncode: int
    stdout: str
    stderr: str


def _refused(kube: Kube, pod: str, err: Exception) -> ClusterError:
    code, _reason, message, _named = failure_of(err)
    if code == 403:
        return Forbidden(
            f"forbidden: you may not exec into pod {pod} in namespace {kube.namespace}; ask "
            f"your cluster admin for RBAC permission to create pods/exec (API said: {message})"
        )
    return translate(err, "exec in", kind("Pod"), pod, namespace=kube.namespace,
                     server=kube.server, context=kube.context)  # fmt: skip


def pod_exec(
    kube: Kube, pod: str, container: str, argv: Sequence[str], *, timeout: float
) -> Completed:
    """Run ``argv`` (no shell) in ``container`` of ``pod``; give up after ``timeout`` s."""
    try:
        done = kube.client.exec(
            pod,
            namespace=kube.namespace,
            container=container,
            command=list(argv),
            stdout=True,
            stderr=True,
            timeout=timeout,
        )
    except WebSocketUpgradeError as err:  # refused before it ran: 403, 404, 400 ...
        response = err.response
        response.read()
        raise _refused(
            kube, pod, httpx2.HTTPStatusError("exec", request=response.request, response=response)
        ) from None
    except ApiError as err:  # ran, but not as a command that exited (no such executable ...)
        message = err.status.message or detail(err)
        return Completed(126, "", f"{message}\n")
    except (httpx2.TimeoutException, TimeoutError):
        raise Unreachable(
            f"exec in pod {pod}: no answer from the Kubernetes API at {kube.server} within "
            f"{timeout:g}s"
        ) from None
    except (httpx2.TransportError, HTTPXWSException) as err:
        raise Unreachable(
            f"exec in pod {pod}: the connection to the Kubernetes API at {kube.server} "
            f"failed: {detail(err)}"
        ) from None
    return Completed(done.exit_code, str(done.stdout or ""), str(done.stderr or ""))
