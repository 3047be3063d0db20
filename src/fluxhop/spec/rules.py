"""Kubernetes' own validation rules, as annotated types for the spec models.

Each rule is the one the API server (k8s.io/apimachinery validation) applies,
checked when a MiniCluster is loaded - before anything is rendered or sent -
so that a bad value is one line naming the field, not a 422 half-way through
a create. Written by hand: the Kubernetes client packages hold these rules,
and the pure spec layer must not import them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, Field

from fluxhop.errors import shown
from fluxhop.spec.names import dns_label_problem

__all__ = [
    "MAX_ID",
    "MAX_NODES",
    "AbsolutePath",
    "DnsLabel",
    "DnsSubdomain",
    "EnvName",
    "Id",
    "ImageRef",
    "Interface",
    "LabelValue",
    "Labels",
    "ManagedBy",
    "Port",
    "QualifiedName",
    "ResourceName",
    "absolute_path_problem",
    "dns_subdomain_problem",
    "env_name_problem",
    "image_problem",
    "interface_problem",
    "qualified_name_problem",
    "resource_name_problem",
]

MAX_NODES = 100_000  # an Indexed Job's completions and parallelism (batch/v1 validation)
MAX_ID = 2**31 - 1  # runAsUser, runAsGroup, fsGroup: 0 .. 2147483647

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
# Kubernetes 1.34+ (RelaxedEnvironmentVariableValidation, on by default): any
# printable ASCII character but '=' - spaces and a leading digit included
_ENV_NAME = re.compile(r"[ -<>-~]+")
# distribution/reference: [host[:port]/]path[:tag][@digest], path lower-case
_IMAGE = re.compile(
    r"(?:(?P<host>[A-Za-z0-9.-]+(?::[0-9]+)?)/)?"
    r"(?P<path>[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<algorithm>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*):(?P<hex>[0-9a-fA-F]+))?"
)
# opencontainers/go-digest, which the container runtimes parse digests with:
# only these algorithms, each with exactly its hash's length in lower-case hex
_DIGEST_LENGTH = {"sha256": 64, "sha384": 96, "sha512": 128}
_NAME_MAX = 255  # distribution/reference: [host/]path, tag and digest not counted
# the resources a container may name without a domain (core/v1 helper
# IsStandardContainerResourceName); hugepages-<size> besides
_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}


def dns_subdomain_problem(value: str) -> str | None:
    if len(value) > 253:
        return f"is {len(value)} characters; a DNS-1123 subdomain has at most 253"
    if not _DNS_SUBDOMAIN.fullmatch(value):
        return (
            "must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', "
            "starting and ending alphanumeric"
        )
    return None


def qualified_name_problem(value: str) -> str | None:
    """Label and annotation keys, extended-resource names: ``[prefix/]name``."""
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or dns_subdomain_problem(prefix)):
        return f"has a prefix {shown(prefix)} that is not a DNS-1123 subdomain"
    if not name or len(name) > 63 or not _NAME_PART.fullmatch(name):
        return (
            "must be a qualified name: at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending alphanumeric, with an optional DNS subdomain prefix and '/'"
        )
    return None


def label_value_problem(value: str) -> str | None:
    if value and (len(value) > 63 or not _NAME_PART.fullmatch(value)):
        return (
            "must be a label value: empty, or at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending alphanumeric"
        )
    return None


def env_name_problem(value: str) -> str | None:
    if not _ENV_NAME.fullmatch(value):
        return "must be an environment variable name: printable ASCII characters other than '='"
    return None


def image_problem(value: str) -> str | None:
    if not value or value != value.strip() or any(c.isspace() for c in value):
        return "must be an image reference without spaces or newlines, e.g. ghcr.io/org/app:tag"
    found = _IMAGE.fullmatch(value)
    if not found:
        return "is not an image reference ([registry/]path[:tag][@digest], path in lower case)"
    name = len(found["path"]) + (len(found["host"]) + 1 if found["host"] else 0)
    if name > _NAME_MAX:
        return f"has a repository name of {name} characters; at most {_NAME_MAX}"
    if found["algorithm"] is not None:
        return _digest_problem(found["algorithm"], found["hex"])
    return None


def _digest_problem(algorithm: str, digits: str) -> str | None:
    length = _DIGEST_LENGTH.get(algorithm)
    if length is None:
        return (
            f"has a digest of algorithm {shown(algorithm)}; the container runtimes know "
            "sha256, sha384 and sha512 only"
        )
    if len(digits) != length:
        return f"has a {algorithm} digest of {len(digits)} hex digits; {algorithm} has exactly {length}"
    if digits != digits.lower():
        return f"has a {algorithm} digest in upper case; write its hex digits in lower case"
    return None


def absolute_path_problem(value: str) -> str | None:
    if not value.startswith("/"):
        return "must be an absolute path (starting with /)"
    if "\0" in value or "\n" in value:
        return "must not contain NUL or newline characters"
    return None


def interface_problem(value: str) -> str | None:
    """A network interface for the brokers to bind (Linux: 1-15 bytes, no '/'
    or white space), or ``*`` for every interface."""
    if value == "*":
        return None
    if not 0 < len(value.encode()) <= 15 or value in (".", ".."):
        return "must be a network interface name of 1 to 15 characters (e.g. eth0), or *"
    if "/" in value or ":" in value or any(c.isspace() for c in value):
        return "must be a network interface name, without '/', ':' or spaces (e.g. eth0)"
    return None


def resource_name_problem(value: str) -> str | None:
    """A container's requests and limits key, as the API server checks it
    (validateContainerResourceName): a standard container resource, or an
    extended one - a qualified name with a domain, which also reads as one
    behind quota's ``requests.`` prefix."""
    if value in _CONTAINER_RESOURCES or value.startswith("hugepages-"):
        return None
    if "/" not in value:
        return (
            "is not a container resource: use cpu, memory, ephemeral-storage, hugepages-<size>, "
            "or an extended resource with a domain such as nvidia.com/gpu"
        )
    problem = qualified_name_problem(value)
    if problem:
        return problem
    if "kubernetes.io/" not in value and (
        value.startswith("requests.") or qualified_name_problem(f"requests.{value}")
    ):
        return (
            "is not an extended resource name: a domain/name that does not start with "
            "'requests.' and fits a label key's length limits (e.g. nvidia.com/gpu)"
        )
    return None


def managed_by_problem(value: str) -> str | None:
    """A controller's name as batch/v1's Job.spec.managedBy takes one: a
    domain-prefixed path of at most 63 characters (kueue.x-k8s.io/multikueue)."""
    domain, slash, path = value.partition("/")
    if not slash or not path or dns_subdomain_problem(domain) or len(value) > 63:
        return "is not a domain-prefixed path of at most 63 characters (e.g. kueue.x-k8s.io/multikueue)"
    return None


def _rule(problem: Callable[[str], str | None]) -> AfterValidator:
    def check(value: str) -> str:
        found = problem(value)
        if found:
            raise ValueError(f"{shown(value)} {found}")
        return value

    return AfterValidator(check)


DnsLabel = Annotated[str, _rule(dns_label_problem)]
DnsSubdomain = Annotated[str, _rule(dns_subdomain_problem)]
QualifiedName = Annotated[str, _rule(qualified_name_problem)]
LabelValue = Annotated[str, _rule(label_value_problem)]
EnvName = Annotated[str, _rule(env_name_problem)]
ImageRef = Annotated[str, _rule(image_problem)]
AbsolutePath = Annotated[str, _rule(absolute_path_problem)]
Interface = Annotated[str, _rule(interface_problem)]
ResourceName = Annotated[str, _rule(resource_name_problem)]
ManagedBy = Annotated[str, _rule(managed_by_problem)]
Labels = dict[QualifiedName, LabelValue]
Id = Annotated[int, Field(ge=0, le=MAX_ID)]
Port = Annotated[int, Field(ge=1, le=65535)]
