"""The hostile corpus: inputs that must each be refused with one clean line
naming the field. Every entry is (id, value, words): ``value`` replaces the
field at the id's path in a valid MiniCluster, ``words`` must appear in the
one error line."""

from __future__ import annotations

import copy
from typing import Any

DROP = object()  # remove the field instead of setting it


def base() -> dict[str, Any]:
    return {
        "apiVersion": "flux-framework.org/v1alpha2",
        "kind": "MiniCluster",
        "metadata": {"name": "hostile"},
        "spec": {
            "size": 2,
            "containers": [
                {
                    "image": "ghcr.io/converged-computing/metric-lammps:latest",
                    "command": "lmp -in x",
                }
            ],
        },
    }


C = "spec.containers[0]"
X = {"image": "x"}

# path -> [(value, words), ...]; a path ending in [0] replaces the whole container
FIELDS: dict[str, list[tuple[Any, str]]] = {
    "spec.size": [
        (True, "spec.size"),
        ("3", "spec.size"),
        (0, "spec.size"),
        (-1, "spec.size"),
        (2.5, "spec.size"),
        (200_001, "100000"),
        (None, "spec.size"),
        ([], "spec.size"),
        ({}, "spec.size"),
        (10**30, "spec.size"),
    ],
    "spec.maxSize": [
        (0, "spec.maxSize"),
        (True, "spec.maxSize"),
        ("x", "spec.maxSize"),
        (1, "maxSize 1 is smaller than size 2"),
        (100_001, "100000"),
    ],
    "spec.minSize": [
        (0, "spec.minSize"),
        (5, "minSize 5 is larger than size 2"),
        (False, "spec.minSize"),
    ],
    "spec.tasks": [
        (-1, "spec.tasks"),
        (True, "spec.tasks"),
        ("4", "spec.tasks"),
        (1.5, "spec.tasks"),
    ],
    "spec.deadlineSeconds": [
        (0, "spec.deadlineSeconds"),
        ("1h", "spec.deadlineSeconds"),
        (True, "spec.deadlineSeconds"),
    ],
    "spec.backoffLimit": [(-1, "spec.backoffLimit"), (True, "spec.backoffLimit")],
    "spec.interactive": [("yes", "spec.interactive"), (1, "spec.interactive")],
    "spec.cleanup": [("no", "spec.cleanup")],
    "spec.jobLabels": [
        (["a"], "spec.jobLabels"),
        ({"bad key!": "x"}, "bad key!"),
        ({"a": "bad value!"}, "bad value!"),
        ({"a": 1}, "spec.jobLabels.a"),
        ({"a" * 64: "x"}, "qualified name"),
    ],
    "spec.network": [
        ([], "spec.network"),
        ({"headlessName": "Bad_Name"}, "headlessName"),
        ({"headlessName": 5}, "spec.network.headlessName"),
        ({"headlesName": "x"}, "headlessName"),
    ],
    "spec.pod": [
        (5, "spec.pod"),
        ({"labels": ["a"]}, "spec.pod.labels"),
        ({"labels": {"a": 1}}, "spec.pod.labels.a"),
        ({"nodeSelector": {"k": "v v"}}, "'v v'"),
        ({"nodeSelector": {"k k": "v"}}, "'k k'"),
        ({"serviceAccountName": "Bad"}, "serviceAccountName"),
        ({"securityContext": {"runAsUser": -1}}, "runAsUser"),
        ({"securityContext": {"runAsUser": True}}, "runAsUser"),
        ({"securityContext": {"fsGroup": 2**40}}, "fsGroup"),
        ({"securityContext": {"runAsGroup": "0"}}, "runAsGroup"),
        ({"securityContext": {"supplementalGroups": [-1]}}, "supplementalGroups"),
        ({"tolerations": [{"key": "bad key", "effect": "NoSchedule"}]}, "'bad key'"),
        ({"tolerations": [{"effect": "Sometimes"}]}, "effect"),
        ({"tolerations": "x"}, "spec.pod.tolerations"),
        ({"tolerations": [{"key": "k", "tolerationSeconds": "soon"}]}, "tolerationSeconds"),
        ({"runtimeClassName": "Bad_X"}, "runtimeClassName"),
        ({"annotations": {"": "x"}}, "qualified name"),
        ({"annotations": {"a": 5}}, "spec.pod.annotations.a"),
        ({"nodeAffinity": {"k": "v"}}, "nodeAffinity"),
        ({"nodeAffinity": {"k": ["bad value!"]}}, "bad value!"),
        ({"hostIPC": "yes"}, "hostIPC"),
    ],
    "spec.flux": [
        (5, "spec.flux"),
        ({"logLevel": 9}, "logLevel"),
        ({"logLevel": "6"}, "logLevel"),
        ({"topology": "star"}, "topology"),
        ({"connectTimeout": "soon"}, "connectTimeout"),
        ({"networkDevice": "eth0/1"}, "'eth0/1'"),
        ({"networkDevice": "a" * 20}, "1 to 15"),
        ({"networkDevice": ""}, "networkDevice"),
        ({"networkDevice": "eth 0"}, "'eth 0'"),
        ({"environment": {"A\tB": "a"}}, "'A\\tB'"),
        ({"environment": {"A": 1}}, "environment.A"),
        ({"environment": []}, "spec.flux.environment"),
        ({"container": {"image": "a b"}}, "'a b'"),
        ({"container": {"image": "x\ny"}}, "spec.flux.container.image"),
        ({"container": {"mountPath": "rel"}}, "mountPath"),
        ({"container": {"mountPath": "/"}}, "mountPath"),
        ({"container": {"disable": "yes"}}, "disable"),
        ({"container": 5}, "spec.flux.container"),
        ({"scheduler": {"queuePolicy": "lifo"}}, "queuePolicy"),
        ({"curveCert": "x"}, "curveCert"),
        ({"curveCert": 5}, "curveCert"),
        ({"optionFlags": "'unterminated"}, "optionFlags"),
        ({"optionFlags": 5}, "optionFlags"),
        ({"contaner": {}}, "container"),
    ],
    "spec.logging": [
        ({"quiet": "yes"}, "spec.logging.quiet"),
        ([], "spec.logging"),
        ({"debugg": True}, "debug"),
    ],
    "spec.containers": [
        ([], "spec.containers"),
        ("x", "spec.containers"),
        ([5], "spec.containers[0]"),
        ([{**X, "runFlux": True}, {**X, "runFlux": True, "name": "b"}], "exactly one container"),
        ([X, {**X}], "exactly one container"),
        ([{**X, "runFlux": True}, X], "needs a name"),
        ({"a": X}, "spec.containers"),
    ],
    f"{C}": [
        ({"image": ""}, "image"),
        ({"image": "a\nb"}, "image"),
        ({"image": "UPPER/Case"}, "image"),
        ({"image": 5}, "image"),
        ({"image": "x y"}, "'x y'"),
        ({"image": " x"}, "image"),
        ({"image": "x:tag:tag"}, "image"),
        ({**X, "name": "Bad"}, "'Bad'"),
        ({**X, "name": ""}, "name"),
        ({**X, "workingDir": "rel"}, "'rel'"),
        ({**X, "workingDir": 5}, "workingDir"),
        ({**X, "environment": 5}, "environment"),
        ({**X, "environment": {"A\nB": "x"}}, "'A\\nB'"),
        ({**X, "environment": {"": "x"}}, "''"),
        ({**X, "environment": {"A=B": "x"}}, "'A=B'"),
        ({**X, "environment": {"A": None}}, "environment"),
        ({**X, "environment": {"A": ["x"]}}, "environment"),
        ({**X, "resources": {"limits": {"cpu": "lots"}}}, "cpu"),
        ({**X, "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}, "whole"),
        ({**X, "resources": {"limits": {"nvidia.com/gpu": True}}}, "nvidia.com/gpu"),
        ({**X, "resources": {"limits": {"bad name": 1}}}, "'bad name'"),
        ({**X, "resources": {"limits": {"cpu": -1}}}, "negative"),
        ({**X, "resources": {"limits": {"gpu": 1}}}, "'gpu'"),
        (
            {
                **X,
                "resources": {"requests": {"nvidia.com/gpu": 2}, "limits": {"nvidia.com/gpu": 1}},
            },
            "differ",
        ),
        ({**X, "resources": "x"}, "resources"),
        ({**X, "resources": {"limit": {}}}, "limits"),
        ({**X, "volumes": {"data": {"path": "rel"}}}, "'rel'"),
        ({**X, "volumes": {"Bad_Name": {"path": "/d", "emptyDir": True}}}, "'Bad_Name'"),
        ({**X, "volumes": {"d": {}}}, "path"),
        ({**X, "volumes": []}, "volumes"),
        ({**X, "volumes": {"d": {"path": "/d", "readOnly": "no"}}}, "readOnly"),
        ({**X, "ports": [0]}, "ports"),
        ({**X, "ports": [70000]}, "ports"),
        ({**X, "ports": ["80"]}, "ports"),
        ({**X, "ports": 80}, "ports"),
        ({**X, "command": 5}, "command"),
        ({**X, "command": "-x"}, "program"),
        ({**X, "command": "a 'b"}, "command"),
        ({**X, "command": [1, 2]}, "command"),
        ({**X, "command": "echo " + "x" * 200_000}, "MAX_ARG_STRLEN"),  # E2BIG in the pod
        ({**X, "securityContext": {"runAsUser": -5}}, "runAsUser"),
        ({**X, "securityContext": {"privileged": "yes"}}, "privileged"),
        ({**X, "securityContext": {"capabilities": {"add": "NET_ADMIN"}}}, "capabilities"),
        ({**X, "imagePullPolicy": "Sometimes"}, "imagePullPolicy"),
        ({**X, "imagePullSecret": "Bad_S"}, "'Bad_S'"),
        ({**X, "secrets": {"é": {"name": "s", "key": "k"}}}, "'é'"),
        ({**X, "secrets": {"A": {"name": "Bad Name", "key": "k"}}}, "'Bad Name'"),
        ({**X, "secrets": {"A": {"name": "s"}}}, "key"),
        ({**X, "runFlux": "yes"}, "runFlux"),
        ({"image": "x", "command": "a", "commands": {"script": "b"}}, "commands.script"),
        ({**X, "commands": {"pre": 5}}, "commands.pre"),
        ({**X, "commands": "echo"}, "commands"),
        ({**X, "preCommand": "x"}, "commands.pre"),
        ({**X, "imag": "y"}, "'image'"),
        ({**X, "existingVolumes": {}}, "became volumes"),
        ({**X, "launcher": "true"}, "launcher"),
        ({**X, "lifeCycle": {"postStartExec": 5}}, "postStartExec"),
    ],
    "metadata": [
        ([], "metadata"),
        ({"name": "Bad_Name"}, "'Bad_Name'"),
        ({"name": ""}, "metadata.name"),
        ({"name": 5}, "metadata.name"),
        ({"name": "a" * 70}, "63"),
        ({"name": "a" * 62}, "pod host name"),
        ({"name": "x", "namespace": "Bad NS"}, "'Bad NS'"),
        ({"name": "x", "namespace": ""}, "namespace"),
        ({"name": "x", "labels": {"k": "v v"}}, "'v v'"),
        ({"name": "x", "labels": ["x"]}, "metadata.labels"),
        ({"name": "x", "annotations": {"bad key!": "x"}}, "'bad key!'"),
        ({"name": "x", "annotations": {"k": 1}}, "metadata.annotations.k"),
        ({"nam": "x"}, "'name'"),
        ({"name": "../x"}, "'../x'"),
        ({"name": "a.b"}, "'a.b'"),
        ({}, "metadata.name is not set"),
        (DROP, "metadata.name is not set"),
    ],
    # fluxhop's extensions (the CRD's schema lets most of these through)
    "spec.autoscale": [
        ("x", "spec.autoscale: must be a mapping"),
        ({"scaleDownDelaySeconds": -1}, "spec.autoscale.scaleDownDelaySeconds"),
        ({"scaleDownDelaySeconds": "1h"}, "spec.autoscale.scaleDownDelaySeconds"),
        ({"scaleDownDelaySeconds": 10**20}, "spec.autoscale.scaleDownDelaySeconds"),
        ({"bogus": 1}, "spec.autoscale.bogus: unknown field"),
    ],
    "spec.metrics": [
        ("x", "spec.metrics: must be a mapping"),
        ({"port": 0}, "spec.metrics.port"),
        ({"port": 70000}, "spec.metrics.port"),
        ({"port": 8050}, "the Flux brokers' port"),
        ({"enabled": "yes"}, "spec.metrics.enabled"),
        ({"namespaces": ["Bad_NS"]}, "spec.metrics.namespaces[0]"),
    ],
    "spec.health": [
        ("x", "spec.health: must be a mapping"),
        ({"checks": "x"}, "spec.health.checks: must be a list"),
        ({"checks": [{"name": "a"}]}, "spec.health.checks[0].command"),
        ({"checks": [{"name": "Bad Name", "command": "true"}]}, "spec.health.checks[0].name"),
        (
            {"onFailure": "explode", "checks": [{"name": "a", "command": "true"}]},
            "spec.health.onFailure",
        ),
        (
            {"maxReplacements": -1, "checks": [{"name": "a", "command": "true"}]},
            "spec.health.maxReplacements",
        ),
        (
            {"checks": [{"name": "a", "command": "true", "intervalSeconds": 0}]},
            "spec.health.checks[0].intervalSeconds",
        ),
        (
            {"checks": [{"name": "a", "command": "true", "kind": "other"}]},
            "spec.health.checks[0].kind",
        ),
        (
            {"checks": [{"name": "a", "command": "true"}, {"name": "a", "command": "true"}]},
            "name a is used twice",
        ),
    ],
    "spec.leadState": [
        ("x", "spec.leadState: must be a mapping"),
        ({"claimName": "Bad_Name"}, "spec.leadState.claimName"),
        ({"size": "lots"}, "spec.leadState.size"),
        ({"checkpointSeconds": -1}, "spec.leadState.checkpointSeconds"),
        ({"emptyDir": True, "claimName": "c"}, "give one of them"),
        ({"storageClassName": "Bad Class"}, "spec.leadState.storageClassName"),
    ],
    f"{C}.hostPorts": [
        ("x", "hostPorts: must be a list"),
        ([0], "hostPorts[0]"),
        ([70000], "hostPorts[0]"),
        (["80"], "hostPorts[0]: must be a whole number"),
        ([80, 80], "lists port 80 twice"),
    ],
    "spec.managedBy": [
        (5, "spec.managedBy: must be a string"),
        ("", "spec.managedBy"),
        ("not a domain/!!", "spec.managedBy"),
        ("x" * 300, "spec.managedBy"),
    ],
    "apiVersion": [
        ("flux-framework.org/v1alpha1", "v1alpha2"),
        ("v1", "v1alpha2"),
        (5, "apiVersion"),
    ],
    "kind": [("Pod", "kind"), (5, "kind")],
    "spec": [(5, "spec"), ([], "spec"), (DROP, "spec"), (None, "spec")],
}


def put(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    parts = path.replace("[0]", ".0").split(".")
    node: Any = doc
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    last = parts[-1]
    key: Any = int(last) if last.isdigit() else last
    if value is DROP:
        del node[key]
    else:
        node[key] = value
    return doc


def mutations() -> list[tuple[str, dict[str, Any], str]]:
    out = []
    for path, cases in FIELDS.items():
        for index, (value, words) in enumerate(cases):
            out.append((f"{path}#{index}", put(base(), path, value), words))
    return out


LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
)

# raw file contents -> words
TEXTS: list[tuple[str, bytes, str]] = [
    ("empty", b"", "expected one MiniCluster document, found 0"),
    ("unclosed", b"spec: [", "not valid YAML"),
    ("tabs", b"spec:\n\tsize: 2\n", "not valid YAML"),
    ("nul", b"metadata: {name: x}\x00", "not valid YAML"),
    ("latin1", "metadata: {name: caf\xe9}\n".encode("latin-1"), "not UTF-8"),
    ("laughs", LAUGHS.encode(), "expands to more than"),
    (
        "alias-bomb",
        b"big: &b " + b"x" * 400_000 + b"\nl: [" + b",".join([b"*b"] * 2000) + b"]\n",
        "through YAML aliases",
    ),
    ("deep-flow", b"spec: " + b"[" * 200_000, "nesting"),
    ("deep-block", b"a:\n" + b"".join(b" " * i + b"k%d:\n" % i for i in range(1, 1200)), "nesting"),
    ("self-alias", b"spec: &s {containers: *s}\n", "refers to the value that contains it"),
    (
        "binary-image",
        b"metadata: {name: x}\nspec: {containers: [{image: !!binary aGVsbG8=}]}\n",
        "!!binary",
    ),
    ("python-tag", b"metadata: !!python/object/apply:os.system [id]\n", "constructor"),
    ("set", b"spec: !!set {a}\n", "!!set"),
    ("two-docs", b"kind: MiniCluster\n---\nkind: MiniCluster\n", "found 2"),
    ("list", b"- a\n- b\n", "mapping"),
    ("scalar", b"hello\n", "mapping"),
    ("json-broken", b'{"kind": "MiniCluster",', "not valid YAML"),
    ("huge", b"# " + b"x" * (1024 * 1024 + 10), "larger than 1 MiB"),
    ("int-past-python-digits", b"spec:\n  size: " + b"1" * 5000 + b"\n", "4300 digits"),
]
