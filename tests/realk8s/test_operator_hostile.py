"""``fluxhop operator`` under hostile MiniCluster resources (issue #57, item
2), on the real cluster with deploy/'s ServiceAccount token. Every hostile
MiniCluster of the fast tier's refusal corpus (tests/hostile/corpus.py) is
applied at once, beside a good one, as kubectl sends it (field validation
Strict): what the CRD schema refuses never exists; the rest each end Failed with reason InvalidSpec and one line naming
the field, with a Warning event and no child object, and the good one is
Ready all the same. A thousand bad resources at once hold up no good one,
and leave the operator idle once answered. Then a 1 MiB command (a word Linux cannot exec; kopf's
record of it once outgrew the 256 KiB of annotations), a resource updated a hundred times
in a second, one deleted while it is made, and its namespace deleted under
a running MiniCluster: the operator answers each and goes on."""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from fluxhop.errors import FluxhopError
from fluxhop.spec import MiniCluster
from tests.hostile.corpus import mutations
from tests.realk8s.api import Api, ApiError
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.outcomes import KINDS, MINICLUSTERS
from tests.realk8s.placing import placed_minicluster
from tests.realk8s.test_operator import Operator, condition, deployed, until  # noqa: F401
from tests.realk8s.test_operator import operator as operator  # the fixture
from tests.realk8s.tools import eventually

pytestmark = [pytest.mark.usefixtures("needs_flux"), pytest.mark.timeout(900)]
CHILDREN = ("Job", "Service", "ConfigMap", "Secret")


def good(cluster: LocalCluster, name: str) -> dict[str, Any]:
    return placed_minicluster(cluster, {
        "apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
        "metadata": {"name": name},
        "spec": {"size": 1, "interactive": True, "flux": {"container": {"disable": True}},
                 "containers": [{"image": "host"}]},
    })  # fmt: skip


def hostile() -> list[tuple[str, dict[str, Any], str]]:
    """The corpus's resources the operator can be handed: its own name on
    each (the corpus's metadata, apiVersion and kind cases are the API
    server's to refuse, not a resource)."""
    out = []
    for n, (case, doc, words) in enumerate(mutations()):
        if case.split("#")[0].split(".")[0] in ("metadata", "apiVersion", "kind"):
            continue
        doc["metadata"] = {"name": f"h{n}"}
        out.append((case, doc, words))
    return out


def valid(resource: dict[str, Any]) -> bool:
    """Whether fluxhop takes the resource's spec as the API server stored it."""
    document = {"apiVersion": resource["apiVersion"], "kind": resource["kind"],
                "metadata": {"name": resource["metadata"]["name"]}, "spec": resource.get("spec")}  # fmt: skip
    try:
        MiniCluster.from_dict(document)
    except FluxhopError:
        return False
    return True


def children(admin: Api, namespace: str, name: str) -> list[str]:
    found = []
    for kind in CHILDREN:
        for obj in admin.get(KINDS[kind].format(namespace))["items"]:
            owners = obj["metadata"].get("ownerReferences") or []
            if any(o["kind"] == "MiniCluster" and o["name"] == name for o in owners):
                found.append(f"{kind}/{obj['metadata']['name']}")
    return found


def warned(admin: Api, namespace: str) -> dict[str, list[str]]:
    events = admin.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    out: dict[str, list[str]] = {}
    for e in events:
        if e["involvedObject"].get("kind") == "MiniCluster" and e["type"] == "Warning":
            out.setdefault(e["involvedObject"]["name"], []).append(e["reason"])
    return out


def test_every_hostile_resource_fails_in_one_line_and_the_good_one_runs(
    cluster: LocalCluster, admin: Api, namespace: str, operator: Operator
):
    path = MINICLUSTERS.format(namespace)
    before = operator.cpu_seconds()
    started = time.monotonic()
    applied: dict[str, tuple[str, str]] = {}
    schema = normalized = 0
    for case, doc, words in hostile():
        try:  # as kubectl sends it: an unknown field refused, not pruned
            made = admin.create(path, doc, fieldValidation="Strict")
        except ApiError as error:
            assert error.status in (400, 422), error  # the CRD's schema refused it
            schema += 1
            continue
        if made.get("spec") != doc.get("spec") and valid(made):
            normalized += 1  # the API server dropped what was wrong (a null): valid now
            continue
        applied[doc["metadata"]["name"]] = (case, words)
    admin.create(path, good(cluster, "good"))
    until("good Ready during the burst", operator, lambda: condition(
        admin.get(f"{path}/good"), "Ready").get("status") == "True", 300)  # fmt: skip
    ready_after = time.monotonic() - started

    def failed() -> dict[str, dict[str, Any]]:
        found = {r["metadata"]["name"]: r for r in admin.get(path)["items"]}
        return {
            n: found[n] for n in applied if condition(found[n], "Failed").get("status") == "True"
        }

    until("every hostile resource Failed", operator, lambda: len(failed()) == len(applied), 300)
    spent = operator.cpu_seconds() - before
    events = eventually("a Warning on each", lambda: (w := warned(admin, namespace)) and all(
        "InvalidSpec" in w.get(n, []) for n in applied) and w, 120)  # fmt: skip
    for name, resource in failed().items():
        case, words = applied[name]
        said = condition(resource, "Failed")
        assert said["reason"] == "InvalidSpec", (case, said)
        assert "\n" not in said["message"] and words in said["message"], (case, said)
        assert children(admin, namespace, name) == [], case
        assert "InvalidSpec" in events[name], case
    assert "Traceback" not in operator.text()
    print(
        f"hostile resources: {len(applied)} reached the operator, {schema} refused by the "
        f"CRD's schema, {normalized} made valid by the API server (nulls dropped); "
        f"operator CPU {spent:.1f} s; the good one Ready after {ready_after:.1f} s"
    )


BURST = 1000  # bad resources applied at once
IDLE_WINDOW = 30.0  # seconds the operator's CPU is read over once the burst is done


def test_a_thousand_bad_resources_at_once_hold_up_no_good_one(
    cluster: LocalCluster, admin: Api, namespace: str, operator: Operator
):
    """A thousand resources fluxhop refuses (maxSize below size: the CRD's
    schema lets it through) applied at once by eight writers, then a good
    one: the good one is Ready while the operator still works through them,
    each bad one ends Failed (InvalidSpec) with no child, the operator is
    never restarted, and once done it holds no core in a loop."""
    path = MINICLUSTERS.format(namespace)
    bad = good(cluster, "bad")
    bad["spec"].update(size=2, maxSize=1)
    before = operator.cpu_seconds()
    started = time.monotonic()

    def apply(n: int) -> None:
        admin.create(path, {**bad, "metadata": {"name": f"bad-{n}"}})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(apply, range(BURST)))
    sent = time.monotonic() - started
    admin.create(path, good(cluster, "good"))
    until("good Ready during the burst", operator, lambda: condition(
        admin.get(f"{path}/good"), "Ready").get("status") == "True", 600)  # fmt: skip
    ready_after = time.monotonic() - started

    def failed() -> int:
        return sum(condition(r, "Failed").get("reason") == "InvalidSpec"
                   for r in admin.get(path)["items"])  # fmt: skip

    until(f"all {BURST} Failed", operator, lambda: failed() == BURST, 900)
    done_after = time.monotonic() - started
    spent = operator.cpu_seconds() - before
    assert [k for k in CHILDREN if any(o["metadata"]["name"].startswith("bad-")
            for o in admin.get(KINDS[k].format(namespace))["items"])] == []  # fmt: skip
    assert operator.alive() and "Traceback" not in operator.text()  # never ended or restarted
    # idle once done: its CPU over the next 30 s, as its kubelet counts it (a
    # loop would hold a core: 30 s)
    idle_from, idle_start = operator.cpu_seconds(), time.monotonic()
    time.sleep(IDLE_WINDOW)
    idle = operator.cpu_seconds() - idle_from
    window = time.monotonic() - idle_start
    assert idle < window / 3, (idle, window)
    print(
        f"burst: {BURST} bad resources sent in {sent:.1f} s; the good one Ready after "
        f"{ready_after:.1f} s; all Failed after {done_after:.1f} s; operator CPU {spent:.1f} s, "
        f"then {idle:.2f} s in {window:.0f} s idle"
    )
    admin.delete(path)  # the collection: one request


def test_a_1_mib_command_fails_in_one_line(
    cluster: LocalCluster, admin: Api, namespace: str, operator: Operator
):
    path = MINICLUSTERS.format(namespace)
    doc = good(cluster, "big")
    doc["spec"]["containers"][0]["command"] = "echo " + "x" * (1 << 20)
    try:
        admin.create(path, doc)
    except ApiError as error:  # the API server's own limit, then: nothing exists
        assert error.status in (400, 413, 422), error
        return
    until("big Failed", operator, lambda: condition(
        admin.get(f"{path}/big"), "Failed").get("status") == "True", 120)  # fmt: skip
    said = condition(admin.get(f"{path}/big"), "Failed")
    assert said["reason"] == "InvalidSpec" and "\n" not in said["message"], said
    assert said["message"].startswith("spec.containers[0].command: word 1 is 1048576 bytes")
    assert "MAX_ARG_STRLEN" in said["message"] and len(said["message"]) < 2000, said
    assert children(admin, namespace, "big") == []


def test_a_resource_updated_a_hundred_times_a_second_ends_as_its_last_spec(
    cluster: LocalCluster, admin: Api, namespace: str, operator: Operator
):
    """Edits that flip it between valid and not (maxSize 0, which the schema
    lets through and fluxhop refuses, and back to none): it ends as its last
    spec says, Ready and not Failed, and the operator goes on."""
    path = MINICLUSTERS.format(namespace)
    admin.create(path, good(cluster, "busy"))
    started = time.monotonic()
    for n in range(100):
        admin.patch(f"{path}/busy", {"spec": {"maxSize": None if n % 2 else 0}}, "merge")
    assert time.monotonic() - started < 10  # the API server's pace, not the operator's
    until("busy Ready as its last spec says", operator, lambda: condition(
        admin.get(f"{path}/busy"), "Ready").get("status") == "True", 300)  # fmt: skip
    assert condition(admin.get(f"{path}/busy"), "Failed").get("status") != "True"
    assert operator.alive()


def test_deleted_while_made_and_a_namespace_deleted_under_it(
    cluster: LocalCluster, admin: Api, namespace: str, operator: Operator
):
    path = MINICLUSTERS.format(namespace)
    try:
        admin.create(path, good(cluster, "gone"))
        admin.delete(f"{path}/gone")
        eventually("gone and nothing of it left", lambda: admin.find(f"{path}/gone") is None
                   and children(admin, namespace, "gone") == [], 120)  # fmt: skip
        admin.create(path, good(cluster, "running"))
        until("running Ready", operator, lambda: condition(
            admin.get(f"{path}/running"), "Ready").get("status") == "True", 300)  # fmt: skip
        admin.delete(f"/api/v1/namespaces/{namespace}")
        eventually("the namespace gone", lambda: admin.find(f"/api/v1/namespaces/{namespace}")
                   is None, 300)  # fmt: skip
        assert operator.alive(), operator.tail()
        assert "Traceback" not in operator.text(), operator.tail()
    finally:
        with contextlib.suppress(ApiError):  # for the fixture, which deletes it
            admin.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
