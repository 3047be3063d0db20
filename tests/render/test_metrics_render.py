"""spec.metrics rendered: the port named metrics on the lead container, rank
0's entrypoint told to serve it, the NetworkPolicy opening it only to the
MiniCluster's namespace and those named, on by default where the instance
stays up (interactive, operated) and off for a run; the minicluster target
leaves it out and says so; bad values are one line naming the field."""

from __future__ import annotations

import warnings

import pytest

from fluxhop.errors import FluxhopWarning, SpecError
from fluxhop.operator.resource import operated
from fluxhop.render import render
from fluxhop.render.scripts import metrics_program
from fluxhop.spec import MiniCluster
from fluxhop.spec.metrics import BROKER_PORT, DEFAULT_PORT
from tests.documents import minicluster_doc
from tests.render.test_render import CERT, by_kind, lead_container


def spec_of(interactive: bool = False, **metrics: object) -> MiniCluster:
    container = (
        {"image": "ubuntu:noble"}
        if interactive
        else {"image": "ubuntu:noble", "command": "hostname"}
    )
    body: dict[str, object] = {"interactive": interactive, "containers": [container]}
    if metrics:
        body["metrics"] = metrics
    return MiniCluster.from_dict(minicluster_doc("demo", "team", **body))


def served_port(spec: MiniCluster) -> int | None:
    objects = render(spec, cert=CERT)
    ports = [p for p in lead_container(objects)["ports"] if p.get("name") == "metrics"]
    script = by_kind(objects)["ConfigMap"]["data"]["entrypoint.sh"]
    told = int(script.split("metrics_port=", 1)[1].split("\n", 1)[0])
    assert told == (ports[0]["containerPort"] if ports else 0)
    return ports[0]["containerPort"] if ports else None


@pytest.mark.parametrize(
    ("interactive", "metrics", "port"),
    [
        (False, {}, None),  # a run: off
        (True, {}, DEFAULT_PORT),  # interactive: on
        (False, {"enabled": True, "port": 9100}, 9100),
        (True, {"enabled": False}, None),
    ],
)
def test_when_rank_zero_serves_metrics(interactive, metrics, port):
    assert served_port(spec_of(interactive, **metrics)) == port


def test_the_operator_serves_them_unless_the_resource_says_no():
    assert served_port(operated(spec_of())) == DEFAULT_PORT
    assert served_port(operated(spec_of(enabled=False))) is None
    assert spec_of().spec.metrics.enabled is None  # the resource itself is not changed


def test_every_config_map_carries_the_program_status_runs():
    """All its files, side by side: metrics.py imports the others."""
    for spec in (spec_of(), spec_of(True)):
        data = by_kind(render(spec, cert=CERT))["ConfigMap"]["data"]
        assert {name: data[name] for name in metrics_program()} == metrics_program()
        assert set(metrics_program()) == {
            "metrics.py", "metrics_flux.py", "metrics_text.py", "metrics_changes.py",
        }  # fmt: skip


def ingress(spec: MiniCluster) -> list[dict]:
    return by_kind(render(spec, cert=CERT))["NetworkPolicy"]["spec"]["ingress"]


def open_to_all(rules: list[dict]) -> set[int]:
    """The TCP ports the last rule (no 'from': anyone) opens, among a few."""
    ranges = [(p["port"], p["endPort"]) for p in rules[-1]["ports"] if p["protocol"] == "TCP"]
    probes = {1, BROKER_PORT - 1, BROKER_PORT, BROKER_PORT + 1, 9100, DEFAULT_PORT, 65535}
    return {port for port in probes if any(a <= port <= b for a, b in ranges)}


def test_only_the_named_namespaces_reach_the_metrics_port():
    rules = ingress(spec_of(True, namespaces=["monitoring", "team"]))
    scrape = next(r for r in rules if r.get("ports") == [{"protocol": "TCP", "port": DEFAULT_PORT}])
    (source,) = scrape["from"]
    assert source["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["monitoring", "team"]}
    ]
    assert DEFAULT_PORT not in open_to_all(rules) and BROKER_PORT not in open_to_all(rules)
    assert {1, BROKER_PORT - 1, BROKER_PORT + 1, 9100, 65535} <= open_to_all(rules)


def test_without_metrics_the_port_stays_open_as_before():
    rules = ingress(spec_of())
    assert len(rules) == 2 and DEFAULT_PORT in open_to_all(rules)


def test_the_minicluster_target_leaves_it_out_and_says_so():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (resource,) = render(spec_of(True, enabled=True), "minicluster")
    assert "metrics" not in resource["spec"]
    assert any("spec.metrics is not copied" in str(w.message) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FluxhopWarning)
        render(spec_of(True), "minicluster")  # nothing set, nothing to say


@pytest.mark.parametrize(
    ("metrics", "says"),
    [
        ({"port": BROKER_PORT}, "spec.metrics.port"),
        ({"port": 0}, "spec.metrics.port"),
        ({"namespaces": ["Not_A_Name"]}, "spec.metrics.namespaces"),
        ({"enabled": "yes"}, "spec.metrics.enabled"),
        ({"scrape": True}, "spec.metrics.scrape"),
        ({"port": 8080, "containerPorts": [8080]}, "metrics.port 8080 is also a container's port"),
    ],
)
def test_bad_values_are_one_line_naming_the_field(metrics, says):
    ports = metrics.pop("containerPorts", None)
    with pytest.raises(SpecError) as error:
        spec = spec_of(True, **metrics)
        if ports:  # the lead container's own ports
            body = spec.model_dump(by_alias=True, exclude_none=True)
            body["spec"]["containers"][0]["ports"] = ports
            MiniCluster.from_dict(body)
    assert says in str(error.value) and "\n" not in str(error.value)
