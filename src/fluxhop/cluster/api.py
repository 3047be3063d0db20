"""The Kubernetes adapter: lightkube underneath, dicts in and out, kubectl's
verbs. Server-side apply with field manager ``fluxhop``; watches resume
after a drop and restart after ``410 Gone``. How each request is tried and
how its failure is said: cluster/calls.py.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
from lightkube import ALL_NS, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod
from lightkube.types import CascadeType, PatchType

from fluxhop.cluster.answers import detail
from fluxhop.cluster.calls import DEFAULT_REQUEST_TIMEOUT, FIRST_CONTACT, Calls, Contact
from fluxhop.cluster.config import ResolvedConfig, resolve
from fluxhop.cluster.kinds import kind, kind_of
from fluxhop.cluster.watchloop import resumable_watch
from fluxhop.cluster.watchstop import WatchStop, install, reading
from fluxhop.errors import InputError, KubeconfigError, NotFound, Unreachable

__all__ = ["DEFAULT_REQUEST_TIMEOUT", "FIELD_MANAGER", "FIRST_CONTACT", "Kube"]

FIELD_MANAGER = "fluxhop"


class Kube(Calls):
    """A namespace of one cluster, as fluxhop needs it (its requests made by
    ``Calls``: retries, time bounds, one-line failures)."""

    def __init__(
        self,
        client: Client,
        namespace: str,
        *,
        server: str = "the Kubernetes API",
        context: str | None = None,
        retries: int = 5,
        backoff: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
        field_manager: str = FIELD_MANAGER,
        source: str = "",
        contact: Contact | None = None,
    ) -> None:
        self.client = client
        self.source = source  # where the configuration came from (a kubeconfig path)
        self.contact = contact or Contact()
        self.field_manager = field_manager
        self.namespace = namespace
        self.server = server
        self.context = context
        self.retries = retries
        self.backoff = backoff
        self.sleep = sleep
        self.request_timeout = request_timeout
        self.clock = clock

    @classmethod
    def connect(
        cls,
        kubeconfig: str | None = None,
        context: str | None = None,
        namespace: str | None = None,
        *,
        transport: httpx2.BaseTransport | None = None,
        resolved: ResolvedConfig | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        **options: Any,
    ) -> Kube:
        """Resolve the configuration like kubectl and open a client.

        ``request_timeout`` bounds each call, retries included (watches and
        followed logs wait for events as long as they come: lightkube lifts
        the read timeout for them)."""
        if not request_timeout > 0:
            raise InputError(
                f"--request-timeout must be more than 0 seconds, not {request_timeout}"
            )
        resolved = resolved or resolve(kubeconfig, context, namespace)
        try:
            client = Client(
                config=resolved.config,
                namespace=resolved.namespace,
                field_manager=options.get("field_manager", FIELD_MANAGER),
                transport=transport,
                timeout=httpx2.Timeout(request_timeout),
            )
            install(client)  # stoppable watches
        except Exception as err:  # lightkube/ssl on certificates it cannot load
            raise KubeconfigError(
                f"kubeconfig context {resolved.context or '(in-cluster)'} ({resolved.source}) "
                f"is unusable: {detail(err)}"
            ) from None
        return cls(
            client,
            resolved.namespace,
            server=resolved.server,
            context=resolved.context,
            request_timeout=request_timeout,
            source=resolved.source,
            **options,
        )

    def in_namespace(self, namespace: str) -> Kube:
        """The same cluster connection, aimed at another namespace."""
        if namespace == self.namespace:
            return self
        return Kube(
            self.client,
            namespace,
            server=self.server,
            context=self.context,
            retries=self.retries,
            backoff=self.backoff,
            sleep=self.sleep,
            request_timeout=self.request_timeout,
            clock=self.clock,
            field_manager=self.field_manager,
            source=self.source,
            contact=self.contact,
        )

    # --- verbs ------------------------------------------------------------

    def apply(self, obj: dict[str, Any], *, force: bool = False) -> dict[str, Any]:
        """Server-side apply (field manager ``fluxhop``); creates when absent."""
        what = kind_of(obj)
        name = obj["metadata"]["name"]
        resource = what.resource(obj)
        result = self._call(
            "patch",
            what,
            name,
            lambda: self.client.apply(
                resource, namespace=self.namespace, field_manager=self.field_manager, force=force
            ),
        )
        return result.to_dict()  # type: ignore[no-any-return]

    def get(self, kind_name: str, name: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        what = kind(kind_name)
        try:
            result = self._call(
                "get",
                what,
                name,
                lambda: self.client.get(what.resource, name, namespace=self.namespace),
            )
        except NotFound:
            return None
        return result.to_dict()  # type: ignore[no-any-return]

    def list(
        self,
        kind_name: str,
        labels: dict[str, str] | None = None,
        fields: dict[str, str] | None = None,
        *,
        all_namespaces: bool = False,
    ) -> list[dict[str, Any]]:
        """The objects of a kind in the namespace (in every one: ``all_namespaces``)."""
        what = kind(kind_name)
        namespace = ALL_NS if all_namespaces else self.namespace
        items = self._call(
            "list",
            what,
            None,
            lambda: list(
                self.client.list(what.resource, namespace=namespace, labels=labels, fields=fields)
            ),
        )
        return [item.to_dict() for item in items]

    def delete(self, kind_name: str, name: str) -> bool:
        """Delete with background cascade; False when it was already gone."""
        what = kind(kind_name)
        try:
            self._call(
                "delete",
                what,
                name,
                lambda: self.client.delete(
                    what.resource, name, namespace=self.namespace, cascade=CascadeType.BACKGROUND
                ),
            )
        except NotFound:
            return False
        return True

    def evict(self, pod: str) -> bool:
        """Evict a pod through the eviction API (as a node drain does): its
        DisruptionTarget condition is what a Job's podFailurePolicy ignores,
        so the Job makes another pod for its index. False when it was gone."""
        body = Pod.Eviction(metadata=ObjectMeta(name=pod, namespace=self.namespace))
        try:
            self._call("evict", kind("Pod"), pod,
                       lambda: self.client.create(body, name=pod, namespace=self.namespace))  # fmt: skip
        except NotFound:
            return False
        return True

    def merge_patch(self, kind_name: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        what = kind(kind_name)
        result = self._call(
            "patch",
            what,
            name,
            lambda: self.client.patch(
                what.resource, name, patch, namespace=self.namespace, patch_type=PatchType.MERGE
            ),
        )
        return result.to_dict()  # type: ignore[no-any-return]

    def patch_status(
        self, kind_name: str, name: str, status: dict[str, Any], *, version: str | None = None
    ) -> dict[str, Any]:
        """A merge patch of the status subresource; with ``version`` (a
        resourceVersion) refused with a conflict if the object changed since."""
        what = kind(kind_name)
        body: dict[str, Any] = {"status": status}
        if version is not None:
            body["metadata"] = {"resourceVersion": version}
        result = self._call(
            "patch",
            what,
            name,
            lambda: self.client.patch(
                what.resource.Status,
                name,
                body,
                namespace=self.namespace,
                patch_type=PatchType.MERGE,
            ),
        )
        return result.to_dict()  # type: ignore[no-any-return]

    def create(self, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """Create (POST): atomic, so of two writers racing one gets AlreadyExists.
        ``dry_run``: the object as admission would make it, stored nowhere."""
        what = kind_of(obj)
        result = self._call(
            "create",
            what,
            obj["metadata"].get("name"),
            lambda: self.client.create(
                what.resource(obj), namespace=self.namespace, dry_run=dry_run
            ),
        )
        return result.to_dict()  # type: ignore[no-any-return]

    def watch(
        self,
        kind_name: str,
        *,
        labels: dict[str, str] | None = None,
        resource_version: str | None = None,
        relist: bool = True,
        stop: WatchStop | None = None,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Events of ``kind_name``; resumes after drops (from the last
        resourceVersion, trying an API server that cannot be reached for the
        whole request timeout) and starts over after ``410 Gone`` - or, with
        ``relist=False``, raises ``Expired``. Setting ``stop`` (from another
        thread) ends it at once, its connection closed (cluster/watchstop.py)."""
        with reading(stop):
            yield from resumable_watch(self, kind_name, labels, resource_version, relist, stop)

    def log(
        self,
        pod: str,
        container: str,
        *,
        follow: bool = False,
        timestamps: bool = False,
        since_seconds: int | None = None,
        tail_lines: int | None = None,
    ) -> Iterator[str]:
        what = kind("Pod")
        lines = self._call(
            "get",
            what,
            pod,
            lambda: self.client.log(
                pod,
                namespace=self.namespace,
                container=container,
                follow=follow,
                timestamps=timestamps,
                since=since_seconds,
                tail_lines=tail_lines,
            ),
        )
        try:
            yield from lines
        except httpx2.TransportError as err:
            raise Unreachable(f"lost the log stream of pod {pod}: {err}") from None

    def events_for(self, name: str) -> builtins.list[dict[str, Any]]:
        return self.list("Event", fields={"involvedObject.name": name})

    def close(self) -> None:
        self.client.close()
