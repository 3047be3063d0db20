"""How one request to the Kubernetes API is made: transient failures (429,
5xx, dropped connections) tried again with exponential backoff (honouring
``Retry-After``) within the request timeout, a server never reached yet
said at once, and every failure turned into one line that says what to do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import httpx2
from lightkube import ApiError, ConfigError

from fluxhop.cluster.answers import (
    MAX_UNREACHABLE_DELAY,
    RETRYABLE,
    detail,
    failure_of,
    in_credentials,
    retry_after,
    translate,
)
from fluxhop.cluster.kinds import Kind
from fluxhop.errors import ClusterError, FluxhopError, KubeconfigError, Unreachable

__all__ = ["DEFAULT_REQUEST_TIMEOUT", "FIRST_CONTACT", "Calls", "Contact"]

# kubectl's --request-timeout: how long one call may take, retries included.
# (An unresponsive server took six 10 s tries, 67 s, before this bound.)
DEFAULT_REQUEST_TIMEOUT = 30.0
# How long an API server never reached yet is tried: kubectl says a refused
# first contact at once; a moment more covers one restarting as the command
# starts. Once it has answered, a lost server is tried for the whole request
# timeout (a restart mid-run, mid-watch or mid-`logs -f`).
FIRST_CONTACT = 2.0
T = TypeVar("T")


@dataclass
class Contact:
    """Whether the API server has answered this connection yet (shared by
    the namespaces of one connection)."""

    reached: bool = False


def _answer_of(request: Callable[[], T]) -> T:
    """``request()``, with an error answer that has no Content-Type (some
    proxies send none) raised as the status error it is: lightkube reads
    that header without a default and raises KeyError instead."""
    try:
        return request()
    except KeyError as err:
        if isinstance(err.__context__, httpx2.HTTPStatusError):
            raise err.__context__ from None
        raise


class Calls:
    """The request machinery of ``Kube``: the settings are Kube's."""

    namespace: str
    server: str
    context: str | None
    source: str
    contact: Contact
    retries: int
    backoff: float
    sleep: Callable[[float], None]
    request_timeout: float
    clock: Callable[[], float]

    def _translate(self, err: Exception, verb: str, what: Kind, name: str | None) -> ClusterError:
        return translate(err, verb, what, name, namespace=self.namespace, server=self.server,
                         context=self.context)  # fmt: skip

    def _retry(
        self, attempt: int, spent: float, delay: float, *, unreachable: bool = False
    ) -> bool:
        """Sleep before another try, if one is left within the request timeout
        (``spent``: the time this call has taken, its sleeps included).

        An API server that cannot be reached (refused or dropped connections)
        is tried again for the whole request timeout once it has answered
        (a restarting one takes seconds to come back), and for FIRST_CONTACT
        before (a wrong kubeconfig is said at once); one that answers with an
        error, ``retries`` times."""
        if unreachable:
            delay = min(delay, MAX_UNREACHABLE_DELAY)
        elif attempt >= self.retries:
            return False
        if spent + delay > (self._unreachable_budget() if unreachable else self.request_timeout):
            return False
        self.sleep(delay)
        return True

    def _unreachable_budget(self) -> float:
        """How long a server that cannot be reached is tried (see FIRST_CONTACT)."""
        if self.contact.reached:
            return self.request_timeout
        return min(self.request_timeout, FIRST_CONTACT)

    def _cannot_reach(self, err: Exception) -> Unreachable:
        """A server never reached is most often a wrong kubeconfig or context: name them."""
        where = ""
        if not self.contact.reached and self.source:
            context = f"context {self.context} of " if self.context else ""
            where = f" ({context}{self.source})"
        return Unreachable(f"cannot reach the Kubernetes API at {self.server}{where}: {err}")

    def _call(self, verb: str, what: Kind, name: str | None, request: Callable[[], T]) -> T:
        attempt = 0
        started = self.clock()
        slept = 0.0

        def spent() -> float:
            return max(self.clock() - started, slept)

        while True:
            try:
                result = _answer_of(request)
                self.contact.reached = True
                return result
            except (ApiError, httpx2.HTTPStatusError) as err:
                self.contact.reached = True  # it answered, if with an error
                code = failure_of(err)[0]
                delay = retry_after(err) or self.backoff * 2 ** min(attempt, 16)
                if code in RETRYABLE and self._retry(attempt, spent(), delay):
                    attempt += 1
                    slept += delay
                    continue
                raise self._translate(err, verb, what, name) from None
            except httpx2.TimeoutException:
                # no answer within the whole budget: another try cannot fit in it
                raise Unreachable(
                    f"no answer from the Kubernetes API at {self.server} within "
                    f"{self.request_timeout:g}s (raise it with --request-timeout)"
                ) from None
            except httpx2.TransportError as err:
                delay = min(self.backoff * 2 ** min(attempt, 16), MAX_UNREACHABLE_DELAY)
                if self._retry(attempt, spent(), delay, unreachable=True):
                    attempt += 1
                    slept += delay
                    continue
                raise self._cannot_reach(err) from None
            except ConfigError as err:  # e.g. an exec credential plugin that failed
                raise KubeconfigError(
                    f"kubeconfig context {self.context or '(in-cluster)'}: {detail(err)}"
                ) from None
            except FluxhopError:
                raise
            except Exception as err:  # credentials, or an answer lightkube could not read
                if in_credentials(err):
                    raise KubeconfigError(
                        f"kubeconfig context {self.context or '(in-cluster)'}: its credentials "
                        f"could not be had (exec plugin or token): {detail(err)}"
                    ) from None
                raise ClusterError(
                    f"{verb} {what.title} in namespace {self.namespace}: the Kubernetes API at "
                    f"{self.server} sent an answer that is not JSON ({detail(err)})"
                ) from None
