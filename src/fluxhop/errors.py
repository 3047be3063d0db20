"""The one exception hierarchy of fluxhop.

Every error a user can see derives from :class:`FluxhopError`, and its text is
always a single line: the CLI prints ``fluxhop: <message>`` and exits non-zero,
never a traceback. Errors that describe bad input also derive from
``ValueError`` so that library callers can treat them the way they would treat
flux-core's Python bindings (which raise ``ValueError``).
"""

from __future__ import annotations

SHOWN = 60  # characters of a user's value an error line quotes


def shown(value: object, most: int = SHOWN) -> str:
    """A value the user gave, quoted for a one-line error: its repr, or the repr
    of its first ``most`` characters and how long it was, so that a 100 KB image
    or name does not become a 100 KB error line."""
    if isinstance(value, str):
        if len(value) <= most:
            return repr(value)
        return f"{value[:most]!r}... ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= most else f"{text[:most]}... ({len(text)} characters)"


def clipped(message: str, most: int = 8 * SHOWN) -> str:
    """``message`` cut to about ``most`` characters - its head and its tail, and
    how much was cut between them: the last guard of an error line against a
    value quoted whole."""
    if len(message) <= most:
        return message
    head, tail = message[: most * 2 // 3], message[-(most // 4) :]
    return f"{head}... ({len(message) - len(head) - len(tail)} characters cut) ...{tail}"


class FluxhopError(Exception):
    """Base class of every fluxhop error. ``str(err)`` is one line."""

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        super().__init__(clipped(" ".join(str(message).split())))

    @property
    def message(self) -> str:
        return str(self)


class InputError(FluxhopError, ValueError):
    """Bad input: a value the user gave that fluxhop cannot use."""

    exit_code = 2


class HostlistError(InputError):
    """An RFC 29 hostlist that cannot be decoded or encoded."""


class IdsetError(InputError):
    """An RFC 22 idset that cannot be decoded or encoded."""


class DurationError(InputError):
    """An RFC 23 Flux Standard Duration that cannot be parsed."""


class CurveCertError(InputError):
    """A ZeroMQ CURVE certificate that flux-core would refuse to load."""


class BrokerConfigError(InputError):
    """A broker bootstrap configuration that flux-core would reject."""


class InvalidResourceSet(InputError):
    """An RFC 20 R document that is malformed or inconsistent."""


class InvalidJobspec(InputError):
    """A jobspec that fails RFC 14 (canonical) or RFC 25 (V1) validation."""


class SpecError(InputError):
    """A MiniCluster spec that fluxhop cannot render."""


class FluxhopWarning(UserWarning):
    """Something fluxhop accepted but will not act on (printed as one line)."""


class ClusterError(FluxhopError):
    """Talking to Kubernetes failed; the message says what and how to fix it."""


class KubeconfigError(ClusterError):
    """No usable Kubernetes configuration."""


class Unreachable(ClusterError):
    """The API server could not be reached."""


class Expired(ClusterError):
    """A watch from a resourceVersion the API server no longer keeps (410 Gone)."""


class Unauthorized(ClusterError):
    """401: the credentials were refused."""


class Forbidden(ClusterError):
    """403: RBAC does not allow the request."""


class NotFound(ClusterError):
    """The named object does not exist."""


class NotInstalled(ClusterError):
    """The API (a CRD such as JobSet or MiniCluster) is not installed."""


class AlreadyExists(ClusterError):
    """An object of that name exists and differs from what was asked for."""


class NotOurs(ClusterError):
    """An object with the requested name exists but fluxhop did not create it."""


class WaitTimeout(ClusterError):
    """Waiting for pods or a job took longer than allowed."""


class PodStuck(ClusterError):
    """A pod cannot run its containers until someone changes something: an
    image that cannot be pulled, a Secret or ConfigMap missing, a root
    image under runAsNonRoot (the node's words, with the rank and pod)."""


class InstanceError(FluxhopError):
    """A flux command inside a running MiniCluster failed, or cannot run."""


class LocalToolMissing(FluxhopError):
    """A local program fluxhop needs (kubectl, flux) is not installed."""


class LocalError(FluxhopError):
    """The local backend could not run the MiniCluster's brokers.

    ``context`` holds the last log lines of the brokers concerned, for the
    CLI to show above the one-line message.
    """

    def __init__(self, message: str, context: list[str] | None = None) -> None:
        super().__init__(message)
        self.context = list(context or [])


class FluxTooOld(LocalError):
    """The flux-core on PATH lacks a feature the local backend needs."""


class BrokerFailed(LocalError):
    """A broker exited before the job finished."""


class JoinTimeout(LocalError):
    """The brokers did not all join the instance in time."""


class PortConflict(LocalError):
    """A broker could not bind its port."""


class Interrupted(FluxhopError):
    """Ctrl-C (or SIGTERM) came, and what it interrupted could not be undone
    completely; the message says what may be left."""

    exit_code = 130


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be so that every cleanup path runs."""


def interrupt_status(err: BaseException) -> int:
    """The exit status for an interrupt: 143 after SIGTERM, 130 after Ctrl-C."""
    return 143 if isinstance(err, Terminated) else 130
