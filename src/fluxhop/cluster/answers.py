"""How the API server's answers read to fluxhop: which failures are worth
another try, and what a failure says (the pieces the adapter in api.py
retries and translates with)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx2
from lightkube import ApiError

from fluxhop.errors import (
    AlreadyExists,
    ClusterError,
    Forbidden,
    NotFound,
    NotInstalled,
    Unauthorized,
)

if TYPE_CHECKING:
    from fluxhop.cluster.kinds import Kind

__all__ = [
    "MAX_UNREACHABLE_DELAY",
    "RETRYABLE",
    "detail",
    "failure_of",
    "in_credentials",
    "retry_after",
]

RETRYABLE = {429, 500, 502, 503, 504}
# The longest wait between tries of an API server that cannot be reached.
MAX_UNREACHABLE_DELAY = 2.0


def failure_of(err: Exception) -> tuple[int, str, str, bool]:
    """(code, reason, message, names an object) of an API failure."""
    if isinstance(err, ApiError):
        status = err.status
        details = status.details
        named = bool(details and getattr(details, "name", None))
        return status.code or 0, status.reason or "", status.message or "", named
    if isinstance(err, httpx2.HTTPStatusError):
        return err.response.status_code, err.response.reason_phrase, err.response.text[:200], False
    return 0, "", str(err), False


def detail(err: BaseException) -> str:
    text = " ".join(str(err).split())[:200]
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def in_credentials(err: BaseException) -> bool:
    """Whether ``err`` came from lightkube getting credentials (running an exec
    plugin, reading a token) rather than from the API server's answer."""
    tb = err.__traceback__
    while tb is not None:
        if "lightkube/config" in tb.tb_frame.f_code.co_filename.replace("\\", "/"):
            return True
        tb = tb.tb_next
    return False


def retry_after(err: Exception) -> float | None:
    response = getattr(err, "response", None)
    header = response.headers.get("Retry-After") if response is not None else None
    try:
        return min(float(header), 10.0) if header else None
    except ValueError:
        return None


INSTALL_HINT = {
    "JobSet": "install the JobSet controller, or use --target job",
    "MiniCluster": "install fluxhop's operator (kubectl apply -k deploy/) or the Flux "
    "Operator, or use --target job",
    "TrainJob": "install Kubeflow Trainer",
    **{
        kind: "install Kueue, or create the MiniCluster without --queue"
        for kind in ("Workload", "LocalQueue", "ClusterQueue", "AdmissionCheck")
    },
    "LustreFileSystem": "install NNF's Lustre operator (lustre-fs-operator)",
}


def translate(
    err: Exception,
    verb: str,
    what: Kind,
    name: str | None,
    *,
    namespace: str,
    server: str,
    context: str | None,
) -> ClusterError:
    """One line that says what failed and what to do."""
    code, reason, message, named = failure_of(err)
    target = f"{what.kind} {name}" if name else what.title
    where = f"in namespace {namespace}"
    if code == 401:
        return Unauthorized(
            f"the Kubernetes API at {server} refused the credentials of context "
            f"{context or '(in-cluster)'} (401 Unauthorized); log in again"
        )
    if code == 403:
        return Forbidden(
            f"forbidden: you may not {verb} {what.title} {where}; ask your cluster admin for "
            f"RBAC permission to {verb} {what.title} (API said: {message})"
        )
    if code == 404 and not named and what.kind in INSTALL_HINT:
        return NotInstalled(
            f"the {what.kind} API ({what.group}) is not installed in this cluster; "
            f"{INSTALL_HINT[what.kind]}"
        )
    if code == 404:
        return NotFound(f"{target} not found {where}")
    if code == 409:
        return AlreadyExists(f"{target} {where}: conflict: {message}")
    if code == 422:
        return ClusterError(f"the API server rejected {target}: {message}")
    return ClusterError(f"{verb} {target} {where} failed: {code} {reason}: {message}".strip())
