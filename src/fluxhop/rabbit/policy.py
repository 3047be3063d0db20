"""Who may ask for a rabbit MiniCluster, and who the job owner is.

The site configures the allowed users and groups (names or numeric ids), for
example in the Flux config table ``[rabbit.mpi.allowed]`` or ``rabbit.toml``::

    users = ["alice", 1001]
    groups = ["hpc-rabbit"]

With no table configured every user is allowed; that is logged once, so that
an open door is a decision someone can see, not an accident.
"""

from __future__ import annotations

import contextlib
import functools
import grp
import logging
import pwd
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fluxhop.rabbit.errors import RabbitError

__all__ = ["Owner", "Policy"]

log = logging.getLogger("fluxhop.rabbit")


@functools.cache
def announce_open() -> None:
    """Log, once per process, that no policy restricts rabbit MiniClusters."""
    log.info("no rabbit MPI user policy is configured: every user may create MiniClusters")


@dataclass(frozen=True)
class Owner:
    """The owner of a Flux job: the MiniCluster runs with their uid and gid."""

    uid: int
    gid: int
    user: str | None = None
    groups: tuple[str, ...] = ()

    @classmethod
    def lookup(cls, uid: int) -> Owner:
        """The owner's primary gid and group names from this host's user database."""
        try:
            entry = pwd.getpwuid(uid)
        except KeyError:
            raise RabbitError(
                f"uid {uid} has no passwd entry on this host, so its group id is unknown; "
                "pass Owner(uid=..., gid=...) explicitly"
            ) from None
        names = {group.gr_name for group in grp.getgrall() if entry.pw_name in group.gr_mem}
        with contextlib.suppress(KeyError):  # a primary gid without a group entry
            names.add(grp.getgrgid(entry.pw_gid).gr_name)
        return cls(uid, entry.pw_gid, entry.pw_name, tuple(sorted(names)))

    def describe(self) -> str:
        return f"user {self.user} (uid {self.uid})" if self.user else f"uid {self.uid}"


def _names(value: Any, key: str) -> frozenset[str]:
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not all(
        isinstance(v, (str, int)) and not isinstance(v, bool) for v in value
    ):
        raise RabbitError(f"rabbit MPI policy: {key} must be a list of names or ids, not {value!r}")
    return frozenset(str(v).strip() for v in value if str(v).strip())


@dataclass(frozen=True)
class Policy:
    """Allowed users and groups; ``None`` for both means everyone."""

    users: frozenset[str] | None = None
    groups: frozenset[str] | None = None

    @classmethod
    def from_config(cls, table: Mapping[str, Any] | None) -> Policy:
        if not table:
            return cls()
        if not isinstance(table, Mapping):
            raise RabbitError("rabbit MPI policy must be a table with users and/or groups")
        unknown = sorted(set(table) - {"users", "groups"})
        if unknown:
            raise RabbitError(
                f"rabbit MPI policy: unknown key {unknown[0]!r}; use users and/or groups"
            )
        users = _names(table["users"], "users") if "users" in table else frozenset()
        groups = _names(table["groups"], "groups") if "groups" in table else frozenset()
        return cls(users, groups)

    @property
    def open(self) -> bool:
        return self.users is None and self.groups is None

    def allows(self, owner: Owner) -> bool:
        if self.open:
            return True
        users = self.users or frozenset()
        groups = self.groups or frozenset()
        if str(owner.uid) in users or (owner.user is not None and owner.user in users):
            return True
        return str(owner.gid) in groups or any(name in groups for name in owner.groups)

    def check(self, owner: Owner) -> None:
        """Raise a :class:`RabbitError` for an owner the site did not allow."""
        if self.open:
            announce_open()
            return
        if not self.allows(owner):
            raise RabbitError(
                f"{owner.describe()} may not create rabbit MiniClusters on this system; "
                "ask the system administrators to add you to the rabbit MPI policy"
            )
