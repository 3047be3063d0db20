"""The allowed-users policy and the job owner."""

from __future__ import annotations

import grp
import logging
import os
import pwd

import pytest

from fluxhop.rabbit.errors import RabbitError
from fluxhop.rabbit.policy import Owner, Policy, announce_open

ALICE = Owner(uid=1001, gid=2001, user="alice", groups=("hpc", "physics"))
BOB = Owner(uid=1002, gid=2002, user="bob", groups=("chemistry",))
NAMELESS = Owner(uid=1003, gid=2003)


@pytest.mark.parametrize(
    ("config", "owner", "allowed"),
    [
        ({"users": ["alice"]}, ALICE, True),
        ({"users": ["alice"]}, BOB, False),
        ({"users": [1002]}, BOB, True),  # numeric ids work too
        ({"users": "bob"}, BOB, True),  # a single name
        ({"groups": ["physics"]}, ALICE, True),
        ({"groups": ["physics"]}, BOB, False),
        ({"groups": [2003]}, NAMELESS, True),  # the primary gid
        ({"users": ["alice"], "groups": ["chemistry"]}, BOB, True),
        ({"users": [], "groups": []}, ALICE, False),  # configured but empty: nobody
        ({"users": ["bob"]}, NAMELESS, False),
    ],
)
def test_configured_policy(config, owner, allowed):
    policy = Policy.from_config(config)
    assert policy.allows(owner) is allowed
    if allowed:
        policy.check(owner)
    else:
        with pytest.raises(RabbitError) as caught:
            policy.check(owner)
        message = str(caught.value)
        assert "may not create rabbit MiniClusters" in message and "administrators" in message
        assert owner.describe() in message


@pytest.mark.parametrize("config", [None, {}])
def test_no_policy_allows_everyone_and_logs_that_once(config, caplog):
    announce_open.cache_clear()
    policy = Policy.from_config(config)
    assert policy.open
    with caplog.at_level(logging.INFO, logger="fluxhop.rabbit"):
        policy.check(ALICE)
        policy.check(BOB)
        Policy().check(NAMELESS)
    notes = [r for r in caplog.records if "no rabbit MPI user policy" in r.getMessage()]
    assert len(notes) == 1


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"user": ["alice"]}, "unknown key 'user'"),
        ({"users": {"alice": 1}}, "users must be a list"),
        ({"groups": [True]}, "groups must be a list"),
        ("alice", "must be a table"),
    ],
)
def test_bad_policy_config(config, words):
    with pytest.raises(RabbitError, match=words):
        Policy.from_config(config)


def test_owner_lookup_reads_the_user_database():
    uid = os.getuid()
    owner = Owner.lookup(uid)
    entry = pwd.getpwuid(uid)
    assert (owner.uid, owner.gid, owner.user) == (uid, entry.pw_gid, entry.pw_name)
    try:
        primary = grp.getgrgid(entry.pw_gid).gr_name
    except KeyError:
        primary = None  # containers may lack a group entry for the primary gid
    if primary is not None:
        assert primary in owner.groups


def test_owner_lookup_of_an_unknown_uid():
    unknown = next(u for u in range(4_000_000, 4_000_100) if not _exists(u))
    with pytest.raises(RabbitError, match=f"uid {unknown} has no passwd entry"):
        Owner.lookup(unknown)


def _exists(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True
