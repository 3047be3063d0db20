"""broker.toml generation and the validation flux-core's conf_bootstrap applies
(test vectors from src/common/libfluxutil/test/conf_bootstrap.c)."""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from fluxhop.errors import BrokerConfigError
from fluxhop.flux import hostlist
from fluxhop.flux.broker import (
    CORES_AS_SLOTS,
    BrokerConfig,
    HostEntry,
    format_uri,
    validate_hostname,
    validate_uri,
)
from fluxhop.flux.topology import parents

BASE = {
    "curve_cert": "/etc/flux/curve.cert",
    "default_port": 8050,
    "default_bind": "tcp://eth0:%p",
    "default_connect": "tcp://%h.svc.ns.svc.cluster.local:%p",
}


def ranks_of(toml_text: str) -> dict[str, int]:
    """What a config-booted broker computes: expand hosts in order, first wins."""
    table = tomllib.loads(toml_text)["bootstrap"]
    ranks: dict[str, int] = {}
    for entry in table["hosts"]:
        for host in hostlist.decode(entry["host"]):
            ranks.setdefault(host, len(ranks))
    return ranks


@pytest.mark.parametrize(
    "template, host, port, expected",
    [
        ("abcd", None, 0, "abcd"),
        ("abcd:%p", None, 42, "abcd:42"),
        ("a%pb", None, 42, "a42b"),
        ("%p:abcd", None, 42, "42:abcd"),
        ("%h", None, 0, "%h"),
        ("%h", "foo", 0, "foo"),
        ("%%", None, 0, "%"),
        ("a%X", None, 0, "a%X"),
    ],
)
def test_format_uri_vectors(template, host, port, expected):
    assert format_uri(template, host, port) == expected


@pytest.mark.parametrize("host", ["foo", "foo42", "foo.bar", "foo-bar", "flux-sample-0"])
def test_valid_hostnames(host):
    assert validate_hostname(host) == host


@pytest.mark.parametrize(
    "host", ["-foo", "foo-", "fo:o", "foo.-bar", "foo.-bar.baz", "a_b", "", "x" * 64]
)
def test_invalid_hostnames(host):
    with pytest.raises(BrokerConfigError):
        validate_hostname(host)


@pytest.mark.parametrize(
    "uri",
    [
        "ipc://foo/bar/baz",
        "tcp://en0",
        "tcp://foo:42",
        "tcp://foo.bar.baz:42",
        "tcp://1.2.3.4:42",
        "tcp://[2001:0db8:85a3:0000:0000:8a2e:0370:7334]:42",
    ],
)
def test_valid_uris(uri):
    assert validate_uri(uri) == uri


@pytest.mark.parametrize(
    "uri",
    ["", "pgm://xyz", "ipc://" + "x" * 114, "ipc://", "tcp://", "tcp://eth1:*", "ipc://foo:*"],
)
def test_invalid_uris(uri):
    with pytest.raises(BrokerConfigError):
        validate_uri(uri)


def test_sixty_four_hosts_rank_by_position():
    hosts = [f"foo{i}" for i in range(64)]
    config = BrokerConfig(
        hosts=hosts,
        curve_cert="foo",
        default_port=42,
        default_bind="tcp://en0:%p",
        default_connect="tcp://x%h:%p",
    )
    text = config.to_toml()
    assert ranks_of(text) == {host: rank for rank, host in enumerate(hosts)}
    doc = tomllib.loads(text)["bootstrap"]
    assert doc["hosts"] == [{"host": "foo[0-63]"}]
    assert format_uri(doc["default_bind"], "foo0", doc["default_port"]) == "tcp://en0:42"
    assert format_uri(doc["default_connect"], "foo0", doc["default_port"]) == "tcp://xfoo0:42"


def test_compact_false_writes_one_entry_per_host_in_rank_order():
    hosts = ["b-1", "a-0", "c-2"]
    text = BrokerConfig(hosts=hosts, compact=False, **BASE).to_toml()
    assert tomllib.loads(text)["bootstrap"]["hosts"] == [{"host": h} for h in hosts]
    assert ranks_of(text) == {"b-1": 0, "a-0": 1, "c-2": 2}


def test_singleton_needs_no_cert():
    text = BrokerConfig(hosts=["solo"]).to_toml()
    assert tomllib.loads(text) == {"bootstrap": {"hosts": [{"host": "solo"}]}}


def test_size_two_without_cert_fails():
    with pytest.raises(BrokerConfigError, match="curve_cert"):
        BrokerConfig(
            hosts=["foo0", "foo1"], default_bind="tcp://en0:%p", default_connect="tcp://%h:%p"
        )


def test_parent_needs_bind_and_connect():
    with pytest.raises(BrokerConfigError, match="bind URI is undefined for rank 0"):
        BrokerConfig(hosts=["foo0", "foo1"], curve_cert="c", default_connect="tcp://%h:1")
    with pytest.raises(BrokerConfigError, match="connect URI is undefined for rank 0"):
        BrokerConfig(hosts=["foo0", "foo1"], curve_cert="c", default_bind="tcp://en0:1")


def test_leaves_need_no_uris_with_per_host_entries():
    config = BrokerConfig(
        hosts=[
            HostEntry("foo0", bind="tcp://127.0.0.1:5000", connect="tcp://127.0.0.1:5000"),
            "foo1",
            "foo2",
        ],
        curve_cert="c",
    )
    table = tomllib.loads(config.to_toml())["bootstrap"]["hosts"]
    assert table[0] == {
        "host": "foo0",
        "bind": "tcp://127.0.0.1:5000",
        "connect": "tcp://127.0.0.1:5000",
    }
    assert table[1:] == [{"host": "foo1"}, {"host": "foo2"}]


@pytest.mark.parametrize(
    "entry, match",
    [
        (HostEntry("foo[1-"), "RFC 1035"),
        (HostEntry("foo", bind="x://z"), "tcp://"),
        (HostEntry("foo", connect="x://z"), "tcp://"),
        (HostEntry("foo", connect=""), "tcp://"),
        (HostEntry("foo", connect="ipc://foo:*"), "wildcard"),
        (HostEntry("foo", parent="foo"), "self"),
        (HostEntry("foo", parent="woo"), "not in hosts"),
    ],
)
def test_bad_host_entries(entry, match):
    with pytest.raises(BrokerConfigError, match=match):
        BrokerConfig(hosts=["root", entry], topo="custom", **BASE)


def test_duplicate_host_is_refused():
    with pytest.raises(BrokerConfigError, match="twice"):
        BrokerConfig(hosts=["a", "b", "a"], **BASE)


def test_uri_longer_than_2048_bytes_fails():
    with pytest.raises(BrokerConfigError):
        BrokerConfig(hosts=["a", "b"], **{**BASE, "default_bind": "tcp://" + "x" * 2048})


def test_all_tables_and_no_archive():
    config = BrokerConfig(
        hosts=["flux-sample-0", "flux-sample-1"],
        topo="kary:32",
        connect_timeout="5s",
        resource_path="/mnt/flux/R",
        resource_noverify=True,
        access={"allow-guest-user": True, "allow-root-owner": True},
        queue_policy="easy",
        **BASE,
    )
    doc = tomllib.loads(config.to_toml())
    assert set(doc) == {"bootstrap", "tbon", "resource", "access", "sched-fluxion-qmanager"}
    assert doc["tbon"] == {"topo": "kary:32", "connect_timeout": "5s"}
    assert doc["resource"] == {"path": "/mnt/flux/R", "noverify": True}
    assert doc["sched-fluxion-qmanager"] == {"queue-policy": "easy"}
    assert doc["access"] == {"allow-guest-user": True, "allow-root-owner": True}
    assert "archive" not in config.to_toml()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"queue_policy": "lifo"}, "queue-policy"),
        ({"queue_policy": "easy", "simple_scheduler": True}, "sched-simple has none"),
        ({"topo": "kary"}, "kary"),
        ({"topo": "kary:x"}, "integer"),
        ({"topo": "binomial:2"}, "directive"),
        ({"topo": "star"}, "unknown topology"),
        ({"connect_timeout": "soon"}, "connect_timeout"),
        ({"default_port": 70000}, "default_port"),
        ({"resource_verify": {"cores": "ignore"}}, r"\[resource.verify\] 'cores' is not one of"),
        ({"resource_verify": {"core": "loose"}}, r"core = 'loose' is not one of strict, "),
    ],
)
def test_bad_values_fail_before_anything_is_written(kwargs, match):
    with pytest.raises(BrokerConfigError, match=match):
        BrokerConfig(hosts=["a", "b"], **{**BASE, **kwargs})


def test_the_scheduler_tables():
    """sched-simple is chosen for both services it provides (with Fluxion
    installed, its modules outrank flux-core's), and the feasibility validator
    refuses at submit what no size of the instance could run."""
    plain = tomllib.loads(BrokerConfig(hosts=["a", "b"], **BASE).to_toml())
    assert "modules" not in plain and "ingest" not in plain
    config = BrokerConfig(hosts=["a", "b"], simple_scheduler=True, check_feasibility=True, **BASE)
    doc = tomllib.loads(config.to_toml())
    assert doc["modules"] == {
        "alternatives": {"sched": "sched-simple", "feasibility": "sched-simple"}
    }
    assert doc["ingest"] == {"validator": {"plugins": ["jobspec", "feasibility"]}}
    assert "sched-fluxion-qmanager" not in doc


def test_verify_table_is_written_whole_and_noverify_overrides_it():
    """A [resource.verify] table replaces flux's implicit defaults (an empty one
    is strict for everything), so CORES_AS_SLOTS spells every key out."""
    config = BrokerConfig(hosts=["a", "b"], resource_verify=CORES_AS_SLOTS, **BASE)
    verify = tomllib.loads(config.to_toml())["resource"]["verify"]
    assert verify == {
        "default": "allow-extra",
        "hostname": "strict",
        "core": "ignore",
        "gpu": "ignore",
    }
    both = dataclasses.replace(config, resource_noverify=True)
    assert tomllib.loads(both.to_toml())["resource"] == {"noverify": True}


def test_errors_are_one_line():
    with pytest.raises(BrokerConfigError) as info:
        BrokerConfig(hosts=["a_b"], **BASE)
    assert "\n" not in str(info.value)


def test_kary_parents():
    hosts = [f"h{i}" for i in range(10)]
    assert parents("kary:2", hosts) == [None, 0, 0, 1, 1, 2, 2, 3, 3, 4]
    assert parents("kary:1", hosts[:4]) == [None, 0, 1, 2]
    assert parents("kary:0", hosts[:4]) == [None, 0, 0, 0]


def test_binomial_parents():
    assert parents("binomial", [f"h{i}" for i in range(8)]) == [None, 0, 0, 2, 0, 4, 4, 6]


def test_mincrit_parents():
    assert parents("mincrit:2", [f"h{i}" for i in range(7)]) == [None, 0, 0, 1, 2, 1, 2]
    assert parents("mincrit", [f"h{i}" for i in range(5)]) == [None, 0, 0, 0, 0]


def test_custom_tree_and_cycles():
    hosts = ["test0", "test1", "test2", "test3"]
    assert parents("custom", hosts, {"test2": "test1", "test3": "test1"}) == [None, 0, 1, 1]
    with pytest.raises(BrokerConfigError, match="cycle"):
        parents("custom", hosts, {"test1": "test2", "test2": "test1"})
    with pytest.raises(BrokerConfigError, match="rank 0"):
        parents("custom", hosts, {"test0": "test1"})
    with pytest.raises(BrokerConfigError, match="custom"):
        parents("kary:2", hosts, {"test2": "test1"})


def test_custom_tree_needs_bind_only_on_parents():
    config = BrokerConfig(
        hosts=[
            HostEntry("test0", bind="tcp://en0:1", connect="tcp://test0:1"),
            HostEntry("test1", parent="test0", bind="tcp://en0:1", connect="tcp://test1:1"),
            HostEntry("test2", parent="test1"),
        ],
        curve_cert="c",
        topo="custom",
    )
    assert ranks_of(config.to_toml()) == {"test0": 0, "test1": 1, "test2": 2}
    with pytest.raises(BrokerConfigError, match="rank 1"):
        BrokerConfig(
            hosts=[
                HostEntry("test0", bind="tcp://en0:1", connect="tcp://test0:1"),
                HostEntry("test1", parent="test0"),
                HostEntry("test2", parent="test1"),
            ],
            curve_cert="c",
            topo="custom",
        )


def test_ten_thousand_hosts_stay_small():
    hosts = [f"flux-sample-{i}" for i in range(10_000)]
    text = BrokerConfig(hosts=hosts, topo="kary:32", **BASE).to_toml()
    assert len(text) < 1024
    assert ranks_of(text)["flux-sample-9999"] == 9999


def test_hostlist_string_is_validated_without_expanding():
    config = BrokerConfig(hosts="flux-sample-[0-99999]", topo="kary:32", **BASE)
    assert config.size == 100_000
    text = config.to_toml()
    assert tomllib.loads(text)["bootstrap"]["hosts"] == [{"host": "flux-sample-[0-99999]"}]
    assert ranks_of(BrokerConfig(hosts="a-[0-3]", **BASE).to_toml()) == {
        f"a-{i}": i for i in range(4)
    }


@pytest.mark.parametrize(
    "hosts, match",
    [
        ("a_b[0-3]", "RFC 1035"),
        ("a-[0-3],a-2", "twice"),
        ("n[1-3],n[3-4]", "twice"),
        ("foo[", "hosts"),
        ("", "empty"),
        ("x" * 62 + "[0-10]", "RFC 1035"),
    ],
)
def test_bad_hostlist_strings(hosts, match):
    with pytest.raises(BrokerConfigError, match=match):
        BrokerConfig(hosts=hosts, **BASE)


def test_hostlist_string_needs_uris_for_rank_zero():
    with pytest.raises(BrokerConfigError, match="bind URI is undefined for rank 0"):
        BrokerConfig(hosts="a-[0-1]", curve_cert="c", default_connect="tcp://%h:1")
    BrokerConfig(hosts="solo")  # a singleton needs neither
