"""The broker configuration file (``broker.toml``) that boots a Flux instance.

A config-booted broker finds its rank as the index of its hostname in the
``[bootstrap] hosts`` array, binds where its entry says and connects to its
parent's ``connect`` URI. :class:`BrokerConfig` validates what flux-core's
``conf_bootstrap_parse`` validates (RFC 1035 host names, URI schemes, no port
wildcard, bind/connect present where the tree needs them) when it is built, so
a bad value fails here with one line instead of in forty pods at boot.

Only live tables are written: ``[archive]`` was removed in flux-core v0.68.
The scheduler is chosen here too: Fluxion where it is installed (its modprobe
entries outrank flux-core's), ``sched-simple`` when asked for, through
flux-core 0.88's ``[modules] alternatives`` (no rc script to edit).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import tomli_w

from fluxhop.arguments import check_fields, checked
from fluxhop.errors import BrokerConfigError, DurationError, HostlistError
from fluxhop.flux import fsd, hostlist
from fluxhop.flux.topology import parents, validate_topo

__all__ = [
    "CORES_AS_SLOTS",
    "QUEUE_POLICIES",
    "BrokerConfig",
    "HostEntry",
    "format_uri",
    "validate_hostname",
    "validate_uri",
]

QUEUE_POLICIES = ("fcfs", "easy", "hybrid", "conservative")
SCHEDULER_SERVICES = ("sched", "feasibility")
VERIFY_KEYS = ("default", "hostname", "core", "gpu")
VERIFY_MODES = ("strict", "allow-extra", "allow-missing", "ignore")
# [resource.verify] for an R whose cores are process slots, not CPUs fluxhop
# counted: flux-core's implicit defaults (a table replaces all of them, and an
# empty one is strict) with core "ignore", so that a node with fewer CPUs than
# R claims, or more (allow-missing alone drains it for "extra resources"),
# runs the job instead of being drained with the job waiting forever.
CORES_AS_SLOTS = {"default": "allow-extra", "hostname": "strict", "core": "ignore", "gpu": "ignore"}
_LABEL_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
MAX_URI_BYTES = 2048
MAX_IPC_PATH = 108


def validate_hostname(host: str) -> str:
    """RFC 1035 host name check, as flux-core v0.81+ applies to ``hosts``."""
    if not isinstance(host, str) or not 1 <= len(host) <= 253:
        raise BrokerConfigError(f"[bootstrap] host {host!r}: must be 1-253 characters")
    for label in host.split("."):
        if not _LABEL_RE.fullmatch(label):
            raise BrokerConfigError(
                f"[bootstrap] host {host!r} is not a valid RFC 1035 name: labels are 1-63 "
                "letters, digits or '-', not starting or ending with '-' (no '_')"
            )
    return host


@checked
def format_uri(template: str, host: str | None, port: int | None) -> str:
    """Expand ``%h`` (host), ``%p`` (port) and ``%%`` like flux-core ``format_uri``."""
    out: list[str] = []
    i = 0
    while i < len(template):
        char = template[i]
        if char == "%" and i + 1 < len(template):
            code = template[i + 1]
            if code == "h" and host is not None:
                out.append(host)
                i += 2
                continue
            if code == "p" and port is not None and port >= 0:
                out.append(str(port))
                i += 2
                continue
            if code == "%":
                out.append("%")
                i += 2
                continue
        out.append(char)
        i += 1
    return "".join(out)


@checked
def validate_uri(uri: str, *, what: str = "URI") -> str:
    """flux-core ``overlay_uri_check``: tcp:// or ipc://, no ``:*`` wildcard."""
    if len(uri.encode()) > MAX_URI_BYTES:
        raise BrokerConfigError(f"[bootstrap] {what} is longer than {MAX_URI_BYTES} bytes")
    if "://" not in uri:
        raise BrokerConfigError(f"[bootstrap] {what} {uri!r} must look like tcp://HOST:PORT")
    if ":*" in uri:
        raise BrokerConfigError(
            f"[bootstrap] {what} {uri!r} uses a port wildcard; give a fixed port"
        )
    scheme, _, rest = uri.partition("://")
    if scheme == "tcp" and rest:
        return uri
    if scheme == "ipc" and 1 <= len(rest.encode()) <= MAX_IPC_PATH:
        return uri
    raise BrokerConfigError(
        f"[bootstrap] {what} {uri!r}: only tcp://HOST:PORT and ipc://PATH "
        f"(1-{MAX_IPC_PATH} bytes) are accepted"
    )


@dataclass(frozen=True)
class HostEntry:
    """One rank's ``hosts`` entry, with optional per-host overrides."""

    host: str
    bind: str | None = None
    connect: str | None = None
    parent: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)

    def to_dict(self) -> dict[str, str]:
        entry = {"host": self.host}
        for key in ("bind", "connect", "parent"):
            value = getattr(self, key)
            if value is not None:
                entry[key] = value
        return entry


@dataclass(frozen=True)
class BrokerConfig:
    """A validated ``broker.toml``.

    ``hosts`` are in rank order: a list of names or :class:`HostEntry`, or one
    RFC 29 hostlist string. A hostlist string is validated run by run, never
    expanded, so a 10,000-rank config costs what a 1-rank config does. With
    ``compact=True`` (the default) a list of hosts without per-host keys is
    written as a single hostlist entry too.
    """

    hosts: Sequence[str | HostEntry] | str
    curve_cert: str | None = None
    default_port: int | None = None
    default_bind: str | None = None
    default_connect: str | None = None
    compact: bool = True
    enable_ipv6: bool = False
    topo: str | None = None
    connect_timeout: str | None = None
    resource_path: str | None = None
    resource_noverify: bool = False
    resource_verify: Mapping[str, str] | None = None
    access: dict[str, bool] = field(default_factory=dict)
    queue_policy: str | None = None
    simple_scheduler: bool = False
    check_feasibility: bool = False
    # kvs.checkpoint-period in seconds: how often the KVS root is synced to
    # the content store (what an instance restarted after a crash gets back)
    checkpoint_seconds: int | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        if isinstance(self.hosts, str):
            size = self._validate_hostlist(self.hosts)
        else:
            entries = tuple(
                entry if isinstance(entry, HostEntry) else HostEntry(entry) for entry in self.hosts
            )
            object.__setattr__(self, "hosts", entries)
            self._validate_entries(entries)
            size = len(entries)
        object.__setattr__(self, "_size", size)
        self._validate_settings(size)

    @property
    def hostnames(self) -> list[str]:
        """Every host in rank order (expands a hostlist)."""
        if isinstance(self.hosts, str):
            return hostlist.decode(self.hosts)
        return [entry.host for entry in self.hosts]  # type: ignore[union-attr]

    @property
    def size(self) -> int:
        return self._size  # type: ignore[attr-defined,no-any-return]

    def _validate_settings(self, size: int) -> None:
        if self.default_port is not None and not 0 <= self.default_port <= 65535:
            raise BrokerConfigError(
                f"[bootstrap] default_port {self.default_port} is not in 0-65535"
            )
        if size > 1 and not self.curve_cert:
            raise BrokerConfigError("[bootstrap] curve_cert must be defined for size > 1")
        if self.queue_policy is not None and self.queue_policy not in QUEUE_POLICIES:
            raise BrokerConfigError(
                f"[sched-fluxion-qmanager] queue-policy {self.queue_policy!r} is not one of "
                f"{', '.join(QUEUE_POLICIES)}"
            )
        if self.queue_policy is not None and self.simple_scheduler:
            raise BrokerConfigError(
                "[sched-fluxion-qmanager] queue-policy is Fluxion's; sched-simple has none"
            )
        if self.connect_timeout is not None:
            try:
                fsd.parse(self.connect_timeout)
            except DurationError as err:
                raise BrokerConfigError(f"[tbon] connect_timeout: {err}") from None
        validate_topo(self.topo or "custom")
        for key, mode in (self.resource_verify or {}).items():
            if key not in VERIFY_KEYS:
                raise BrokerConfigError(
                    f"[resource.verify] {key!r} is not one of {', '.join(VERIFY_KEYS)}"
                )
            if mode not in VERIFY_MODES:
                raise BrokerConfigError(
                    f"[resource.verify] {key} = {mode!r} is not one of {', '.join(VERIFY_MODES)}"
                )

    def _check_uris(self, host: str, bind: str | None, connect: str | None) -> None:
        if bind is not None:
            validate_uri(format_uri(bind, host, self.default_port), what=f"bind of {host}")
        if connect is not None:
            validate_uri(format_uri(connect, host, self.default_port), what=f"connect of {host}")

    def _validate_hostlist(self, text: str) -> int:
        try:
            host_runs = hostlist.runs(text)
        except HostlistError as err:
            raise BrokerConfigError(f"[bootstrap] hosts: {err}") from None
        size = sum(run.count for run in host_runs)
        if size == 0:
            raise BrokerConfigError("[bootstrap] hosts is empty; list at least one host")
        for run in host_runs:
            # Names of a run differ only in their trailing digits: if the first
            # and the last are valid RFC 1035 names, every name between is.
            validate_hostname(run.first)
            validate_hostname(run.last)
        _check_no_duplicates(text, host_runs)
        longest = max((run.last for run in host_runs), key=len)
        self._check_uris(longest, self.default_bind, self.default_connect)
        if size > 1 and (self.default_bind is None or self.default_connect is None):
            missing = "bind" if self.default_bind is None else "connect"
            raise BrokerConfigError(
                f"[bootstrap] {missing} URI is undefined for rank 0 ({host_runs[0].first}); "
                f"set default_{missing}"
            )
        return size

    def _validate_entries(self, entries: tuple[HostEntry, ...]) -> None:
        if not entries:
            raise BrokerConfigError("[bootstrap] hosts is empty; list at least one host")
        seen: set[str] = set()
        for entry in entries:
            validate_hostname(entry.host)
            if entry.host in seen:
                raise BrokerConfigError(
                    f"[bootstrap] host {entry.host} is listed twice; each rank needs its own host"
                )
            seen.add(entry.host)
        hosts = [entry.host for entry in entries]
        parent_of = {e.host: e.parent for e in entries if e.parent is not None}
        tree = parents(self.topo or "custom", hosts, parent_of)
        has_children = {parent for parent in tree if parent is not None}
        for rank, entry in enumerate(entries):
            bind = entry.bind if entry.bind is not None else self.default_bind
            connect = entry.connect if entry.connect is not None else self.default_connect
            self._check_uris(entry.host, bind, connect)
            if rank in has_children:
                if bind is None:
                    raise BrokerConfigError(
                        f"[bootstrap] bind URI is undefined for rank {rank} ({entry.host}); "
                        "set default_bind"
                    )
                if connect is None:
                    raise BrokerConfigError(
                        f"[bootstrap] connect URI is undefined for rank {rank} "
                        f"({entry.host}); set default_connect"
                    )

    def hosts_table(self) -> list[dict[str, str]]:
        if isinstance(self.hosts, str):
            return [{"host": self.hosts}]
        entries: tuple[HostEntry, ...] = self.hosts  # type: ignore[assignment]
        plain = all(e.bind is None and e.connect is None and e.parent is None for e in entries)
        if self.compact and plain:
            return [{"host": hostlist.encode(e.host for e in entries)}]
        return [entry.to_dict() for entry in entries]

    def to_dict(self) -> dict[str, dict[str, object]]:
        bootstrap: dict[str, object] = {}
        if self.enable_ipv6:
            bootstrap["enable_ipv6"] = True
        for key in ("curve_cert", "default_port", "default_bind", "default_connect"):
            value = getattr(self, key)
            if value is not None:
                bootstrap[key] = value
        bootstrap["hosts"] = self.hosts_table()
        doc: dict[str, dict[str, object]] = {"bootstrap": bootstrap}
        tbon: dict[str, object] = {}
        if self.topo:
            tbon["topo"] = self.topo
        if self.connect_timeout is not None:
            tbon["connect_timeout"] = self.connect_timeout
        if tbon:
            doc["tbon"] = tbon
        resource: dict[str, object] = {}
        if self.resource_path:
            resource["path"] = self.resource_path
        if self.resource_noverify:
            resource["noverify"] = True
        elif self.resource_verify is not None:
            resource["verify"] = dict(self.resource_verify)
        if resource:
            doc["resource"] = resource
        if self.access:
            doc["access"] = dict(self.access)
        if self.queue_policy:
            doc["sched-fluxion-qmanager"] = {"queue-policy": self.queue_policy}
        if self.simple_scheduler:
            # sched-simple provides both services; Fluxion's modules, which
            # would otherwise be chosen for them, are then not loaded at all.
            doc["modules"] = {"alternatives": dict.fromkeys(SCHEDULER_SERVICES, "sched-simple")}
        if self.checkpoint_seconds:
            doc["kvs"] = {"checkpoint-period": f"{self.checkpoint_seconds}s"}
        if self.check_feasibility:
            # A job no size of this instance could run is refused at submit
            # (Fluxion's satisfiability ignores which nodes are up).
            doc["ingest"] = {"validator": {"plugins": ["jobspec", "feasibility"]}}
        return doc

    def to_toml(self) -> str:
        """The ``broker.toml`` text (parses with ``tomllib``)."""
        return tomli_w.dumps(self.to_dict())


def _check_no_duplicates(text: str, host_runs: list[hostlist.HostRun]) -> None:
    """Every host at most once: rank order is ambiguous otherwise."""
    numeric = [run for run in host_runs if not run.single]
    prefixes = [run.prefix for run in numeric]
    if len(host_runs) == len(numeric) and len(set(prefixes)) == len(prefixes):
        return  # distinct prefixes and numeric runs: no name can repeat
    seen: set[str] = set()
    for host in hostlist.decode(text):
        if host in seen:
            raise BrokerConfigError(
                f"[bootstrap] host {host} is listed twice; each rank needs its own host"
            )
        seen.add(host)
