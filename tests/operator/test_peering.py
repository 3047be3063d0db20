"""How a replica is named in kopf's peering (operator/peering.py)."""

from __future__ import annotations

import getpass

import pytest

from fluxhop.operator.peering import nameable


def _no_passwd_entry(uid: int) -> None:
    raise KeyError(f"getpwuid(): uid not found: {uid}")


@pytest.fixture
def nameless(monkeypatch):
    """A pod's user: no LOGNAME, USER..., and a uid without a passwd entry."""
    for variable in ("LOGNAME", "USER", "LNAME", "USERNAME", "POD_ID"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr("pwd.getpwuid", _no_passwd_entry)


def test_a_uid_without_a_passwd_entry_is_named_by_its_uid(nameless, monkeypatch):
    with pytest.raises((KeyError, OSError)):
        getpass.getuser()  # what kopf asks, and what stopped the operator's pods
    env: dict[str, str] = {}
    monkeypatch.setattr("os.getuid", lambda: 65532)
    nameable(env)
    assert env == {"LOGNAME": "65532"}


def test_pod_id_or_a_known_user_changes_nothing(nameless, monkeypatch):
    env = {"POD_ID": "fluxhop-operator-abc"}
    nameable(env)
    assert env == {"POD_ID": "fluxhop-operator-abc"}
    monkeypatch.setenv("USER", "someone")
    env = {}
    nameable(env)
    assert env == {}
