"""Hostile input through the Python API: public functions and constructors
given an argument of the wrong type, or data nested without end.

Each row is (callable, args, kwargs, the exception expected, words its
message must hold): a ``TypeError`` naming the function and the parameter, or
a ``FluxhopError`` naming the field; always one line, never an
``AttributeError``, ``KeyError`` or ``RecursionError`` from inside. The
``Client`` rows also prove that nothing reached the (fake) API server.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from fluxhop import Client
from fluxhop.errors import (
    BrokerConfigError,
    FluxhopError,
    InputError,
    InvalidJobspec,
    InvalidResourceSet,
    SpecError,
)
from fluxhop.flux import broker, curve, hostlist, idset, jobid, jobspec
from fluxhop.flux.jobopts import JobOptions
from fluxhop.flux.resources import ResourceSet
from fluxhop.local.backend import LocalMiniClusters
from fluxhop.local.store import LocalStore
from fluxhop.rabbit import RabbitError, RabbitRequest
from fluxhop.render import bundle_for, render
from fluxhop.spec import Container, MiniCluster
from fluxhop.spec.flags import minicluster_from_flags, parse_env
from fluxhop.trainer import build
from fluxhop.workload import owner_reference, prepare, spec_hash
from tests.conformance import CONFORMANCE, REPO

LAMMPS = (REPO / "examples" / "lammps.yaml").read_text()
SPEC = MiniCluster.from_yaml(LAMMPS)
EXAMPLES = CONFORMANCE / "trainer-examples"
TRAINJOB = yaml.safe_load((EXAMPLES / "examples__flux__lammps-train-job.yaml").read_text())
RUNTIME = yaml.safe_load((EXAMPLES / "examples__flux__flux-runtime.yaml").read_text())
DEEP = 5000  # far past Python's recursion limit
R = '{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}]}}'


class Thing:
    """An object of no type any API takes."""


def nested(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def with_chain(depth: int) -> dict[str, Any]:
    """A V1-shaped jobspec whose slot holds ``depth`` groups, one in another."""
    vertex: dict[str, Any] = {"type": "core", "count": 1}
    for _ in range(depth):
        vertex = {"type": "group", "count": 1, "with": [vertex]}
    return {
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "task", "with": [vertex]}],
        "tasks": [{"command": ["app"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 0}},
    }


def with_user(user: Any) -> dict[str, Any]:
    doc = with_chain(0)
    doc["attributes"]["user"] = user
    return doc


def minicluster_with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = yaml.safe_load(LAMMPS)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


def mpi(value: Any) -> dict[str, Any]:
    return {"attributes": {"system": {"rabbit": {"mpi": value}}}}


def enabled() -> RabbitRequest:
    return RabbitRequest(enabled=True)


def to_minicluster(rabbits: Any) -> MiniCluster:
    return enabled().to_minicluster(rabbits, name="x", uid=1, gid=1)


Row = tuple[
    str, Callable[..., Any], tuple[Any, ...], dict[str, Any], type[Exception], tuple[str, ...]
]

# (id, callable, args, kwargs, exception, words in its one line)
# fmt: off
ROWS: list[Row] = [
    # --- jobspecs -----------------------------------------------------------------
    *[
        (f"jobspec.load-{name}", jobspec.load, (value,), {}, TypeError, ("jobspec.load: source must be str, bytes or a mapping, not", name))
        for name, value in [("None", None), ("int", 7), ("list", ["a"]), ("PosixPath", Path("/x")), ("Thing", Thing())]
    ],
    ("jobspec.load-v1", jobspec.load, (with_chain(0),), {"v1": "no"}, TypeError, ("jobspec.load: v1 must be bool", "str")),
    ("set_attribute-attributes", jobspec.set_attribute, ([], "a=1"), {}, TypeError, ("set_attribute: attributes must be a dict", "list")),
    ("set_attribute-keyval", jobspec.set_attribute, ({}, 7), {}, TypeError, ("set_attribute: keyval must be str", "int")),
    ("from_command-str", jobspec.from_command, ("zz",), {}, TypeError, ("from_command: command must be a list of str, not str",)),
    ("from_command-nodes-str", jobspec.from_command, (["a"],), {"nodes": "2"}, TypeError, ("from_command: nodes must be int or None", "str")),
    ("from_command-ntasks-list", jobspec.from_command, (["a"],), {"ntasks": [2]}, TypeError, ("from_command: ntasks", "list")),
    ("from_command-cores-bool", jobspec.from_command, (["a"],), {"cores_per_task": True}, TypeError, ("cores_per_task must be int", "bool")),
    ("from_command-gpus-float", jobspec.from_command, (["a"],), {"gpus_per_task": 1.5}, TypeError, ("gpus_per_task must be int", "float")),
    ("jobspec-with-250", jobspec.load, (with_chain(250),), {}, InvalidJobspec, ("jobspec is nested deeper than 100 levels",)),
    ("jobspec-with-5000", jobspec.load, (with_chain(DEEP),), {"v1": False}, InvalidJobspec, ("nested deeper than 100",)),
    ("jobspec-user-5000", jobspec.load, (with_user(nested(DEEP)),), {}, InvalidJobspec, ("nested deeper than 100",)),
    ("jobspec-user-bytes", jobspec.load, (with_user({"x": b"x"}),), {}, InvalidJobspec, ("attributes.user.x", "bytes")),
    ("jobspec-user-huge-key", jobspec.load, (with_user({"k" * 100_000: {1}}),), {}, InvalidJobspec, ("attributes.user.kkk", "...: set")),
    ("Jobspec-with-5000", jobspec.Jobspec, (with_chain(DEEP),), {}, InvalidJobspec, ("nested deeper than 100",)),
    # --- rabbit ---------------------------------------------------------------------
    *[
        (f"from_jobspec-attributes-{name}", RabbitRequest.from_jobspec, ({"attributes": value},), {}, RabbitError, ("attributes must be a mapping", name))
        for name, value in [("int", 7), ("str", "x"), ("list", ["a"])]
    ],
    ("from_jobspec-str", RabbitRequest.from_jobspec, ("rabbit.mpi=1",), {}, TypeError, ("RabbitRequest.from_jobspec: jobspec must be", "str")),
    *[
        (f"rabbit.mpi.{key}-{type(value).__name__}", RabbitRequest.from_jobspec, (mpi({key: value}),), {}, RabbitError, (f"rabbit.mpi {key}", type(value).__name__, "not a JSON value"))
        for key, value in [("image", b"x"), ("rabbits", {"r1"}), ("command", Path("/bin/x")), ("tasks", Thing())]
    ],
    ("rabbit.mpi.env-set", RabbitRequest.from_jobspec, (mpi({"env": {"A": {1}}}),), {}, RabbitError, ("rabbit.mpi env.A", "set")),
    ("rabbit.mpi-5000", RabbitRequest.from_jobspec, (mpi(nested(DEEP)),), {}, RabbitError, ("rabbit.mpi is nested deeper than 100 levels",)),
    ("rabbit.mpi.env-5000", RabbitRequest.from_jobspec, (mpi({"env": {"X": nested(DEEP)}}),), {}, RabbitError, ("nested deeper than 100",)),
    ("to_minicluster-bytes", to_minicluster, (b"r1",), {}, TypeError, ("RabbitRequest.to_minicluster: rabbits must be", "bytes")),
    ("to_minicluster-set-of-int", to_minicluster, ({1},), {}, TypeError, ("RabbitRequest.to_minicluster: rabbits", "must be str", "int")),
    ("RabbitRequest-image", RabbitRequest, (), {"enabled": True, "image": 7}, TypeError, ("RabbitRequest: image must be str", "int")),
    # --- render and workload -------------------------------------------------------------
    *[
        (f"{fn.__name__}-{name}", fn, (value,), {}, TypeError, (f"{where}: spec must be MiniCluster", name))
        for fn, where in [(render, "render.render"), (bundle_for, "render.bundle_for"), (prepare, "workload.prepare")]
        for name, value in [("None", None), ("dict", {"a": 1}), ("str", LAMMPS)]
    ],
    ("render-cert", render, (SPEC,), {"cert": "x"}, TypeError, ("render.render: cert must be CurveCert or None", "str")),
    ("render-cluster_domain-None", render, (SPEC,), {"cluster_domain": None}, TypeError, ("render.render: cluster_domain must be str", "None")),
    ("render-cluster_domain-int", render, (SPEC,), {"cluster_domain": 7}, TypeError, ("cluster_domain must be str", "int")),
    ("render-cluster_domain-bad", render, (SPEC,), {"cluster_domain": "svc..local"}, SpecError, ("cluster_domain 'svc..local'", "DNS-1123")),
    ("trainer.build-cluster_domain", build, (TRAINJOB, RUNTIME), {"cluster_domain": None}, TypeError, ("cluster_domain must be str", "None")),
    ("spec_hash-None", spec_hash, (None,), {}, TypeError, ("workload.spec_hash: objects must be a list", "None")),
    ("spec_hash-str-items", spec_hash, (["a"],), {}, TypeError, ("objects[0] must be a dict", "str")),
    ("owner_reference-empty", owner_reference, ({},), {}, InputError, ("owner_reference: obj has no apiVersion, kind, metadata.name, metadata.uid",)),
    ("owner_reference-no-uid", owner_reference, ({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a"}},), {}, InputError, ("has no metadata.uid",)),
    ("owner_reference-list", owner_reference, ([],), {}, TypeError, ("owner_reference: obj must be a mapping", "list")),
    # --- job IDs, job options, the broker config -----------------------------------------
    ("jobid.parse-None", jobid.parse, (None,), {}, TypeError, ("jobid.parse: text must be str", "None")),
    ("jobid.f58-None", jobid.f58, (None,), {}, TypeError, ("jobid.f58: jobid must be int", "None")),
    ("jobid.f58-bool", jobid.f58, (True,), {}, TypeError, ("jobid.f58: jobid must be int", "bool")),
    ("validate_uri-int", broker.validate_uri, (7,), {}, TypeError, ("broker.validate_uri: uri must be str", "int")),
    ("BrokerConfig-None", broker.BrokerConfig, (None,), {}, TypeError, ("BrokerConfig: hosts must be", "None")),
    ("BrokerConfig-host-int", broker.BrokerConfig, ([1],), {}, TypeError, ("BrokerConfig: hosts[0] must be str or HostEntry", "int")),
    ("BrokerConfig-good-type-bad-name", broker.BrokerConfig, (["a_b"],), {}, BrokerConfigError, ("RFC 1035",)),
    ("JobOptions-flux_args-int", JobOptions, (), {"flux_args": 7}, TypeError, ("JobOptions: flux_args must be str or None", "int")),
    ("JobOptions-flux_args-list", JobOptions, (), {"flux_args": ["-x"]}, TypeError, ("JobOptions: flux_args", "list")),
    ("JobOptions-setopt-bytes", JobOptions, (), {"setopt": b"x"}, TypeError, ("JobOptions: setopt must be a list of str", "bytes")),
    ("JobOptions-setopt-set", JobOptions, (), {"setopt": {"a=1"}}, TypeError, ("JobOptions: setopt", "set")),
    ("parse_env-bytes", parse_env, (b"A=1",), {}, TypeError, ("flags.parse_env: items must be a list of str", "bytes")),
    ("parse_env-set", parse_env, ({"A=1"},), {}, TypeError, ("flags.parse_env: items", "set")),
    # --- Flux formats --------------------------------------------------------------------
    ("idset.decode-limit", idset.decode, ("1-3",), {"limit": None}, TypeError, ("idset.decode: limit must be int", "None")),
    ("idset.runs-bytes", idset.runs, (b"1",), {}, TypeError, ("idset.runs: text must be str", "bytes")),
    ("hostlist.encode-None", hostlist.encode, (None,), {}, TypeError, ("hostlist.encode: hosts must be a list of str", "None")),
    ("hostlist.count-int", hostlist.count, (7,), {}, TypeError, ("hostlist.count: text must be str", "int")),
    ("z85_encode-str", curve.z85_encode, ("abcd",), {}, TypeError, ("curve.z85_encode: data must be bytes", "str")),
    ("z85_decode-bytes", curve.z85_decode, (b"abcde",), {}, TypeError, ("curve.z85_decode: text must be str", "bytes")),
    ("CurveCert.generate-int", curve.CurveCert.generate, (7,), {}, TypeError, ("CurveCert.generate: name must be str", "int")),
    ("ResourceSet.from_nodes-None", ResourceSet.from_nodes, (None,), {}, TypeError, ("ResourceSet.from_nodes: hosts must be", "None")),
    ("ResourceSet.from_nodes-cores-bytes", ResourceSet.from_nodes, (["a"],), {"cores": b"x"}, TypeError, ("ResourceSet.from_nodes: cores must be int or a list of int", "bytes")),
    ("ResourceSet.from_json-int", ResourceSet.from_json, (7,), {}, TypeError, ("ResourceSet.from_json: text must be", "int")),
    ("R-text-5000", ResourceSet.from_json, ('{"version": 1, "execution": ' + '{"a":' * DEEP + "1" + "}" * DEEP + "}",), {}, InvalidResourceSet, ("R is nested deeper than 100 levels",)),
    ("R-scheduling-5000", ResourceSet.from_json, ({**yaml.safe_load(R), "scheduling": nested(DEEP)},), {}, InvalidResourceSet, ("R is nested deeper than 100 levels",)),
    ("R-scheduling-bytes", ResourceSet.from_json, ({**yaml.safe_load(R), "scheduling": {"x": b"x"}},), {}, InvalidResourceSet, ("R scheduling.x", "bytes")),
    # --- the MiniCluster -----------------------------------------------------------------
    *[
        (f"from_yaml-{name}", MiniCluster.from_yaml, (value,), {}, TypeError, ("MiniCluster.from_yaml: text must be str", name))
        for name, value in [("None", None), ("int", 7), ("PosixPath", Path("/x"))]
    ],
    ("from_yaml-adjust", MiniCluster.from_yaml, (LAMMPS,), {"adjust": "x"}, TypeError, ("MiniCluster.from_yaml: adjust must be callable or None", "str")),
    ("MiniCluster-spec", MiniCluster, (), {"spec": 7}, SpecError, ("MiniCluster: spec: must be a mapping",)),
    ("Container-image", Container, (), {"image": 7}, SpecError, ("Container: image: must be a string",)),
    ("Container-environment-5000", Container, (), {"image": "x", "environment": {"A": nested(DEEP)}}, SpecError, ("Container is nested deeper than 100 levels",)),
    ("renamed-name-62", SPEC.renamed, ("a" * 62,), {}, SpecError, ("metadata.name", "would exceed 63 characters")),
    ("renamed-name-bad", SPEC.renamed, ("Bad_Name",), {}, SpecError, ("name 'Bad_Name'",)),
    ("renamed-namespace-int", SPEC.renamed, (), {"namespace": 7}, TypeError, ("MiniCluster.renamed: namespace must be str or None", "int")),
    ("renamed-namespace-bad", SPEC.renamed, (), {"namespace": "a..b"}, SpecError, ("namespace 'a..b'",)),
    *[
        (f"from_dict-{'.'.join(map(str, path))}-{depth}", MiniCluster.from_dict, (minicluster_with(path, nested(depth)),), {}, SpecError, ("the MiniCluster is nested deeper than 100 levels",))
        for path, depth in [
            (("spec", "archive"), 500),
            (("spec", "containers", 0, "batch"), 500),
            (("spec", "containers", 0, "environment"), DEEP),
            (("spec", "containers", 0, "securityContext"), DEEP),
            (("metadata", "labels"), DEEP),
        ]
    ],
    *[
        (f"minicluster_from_flags-{key}-{type(value).__name__}", minicluster_from_flags, (["a"],), {"image": "x", key: value}, TypeError, (f"flags.minicluster_from_flags: {key} must be int", type(value).__name__))
        for key, value in [("nodes", "2"), ("tasks", [4]), ("cores_per_task", True), ("cores_per_task", 1.5), ("gpus_per_task", "1")]
    ],
    ("minicluster_from_flags-command-str", minicluster_from_flags, ("zz",), {"image": "x"}, TypeError, ("flags.minicluster_from_flags: command must be a list of str, not str",)),
    # --- the local backend, without a Client in front ------------------------------------
    *[
        (f"LocalMiniClusters.{verb}-list", getattr(LocalMiniClusters(), verb), (["x"],), {}, TypeError, (f"LocalMiniClusters.{verb}: name must be str", "list"))
        for verb in ("status", "delete", "logs", "wait_ready")
    ],
]
# fmt: on


@pytest.mark.filterwarnings("ignore::fluxhop.errors.FluxhopWarning")
@pytest.mark.parametrize(
    ("call", "args", "kwargs", "error", "words"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_a_wrong_argument_is_one_line(call, args, kwargs, error, words):
    with pytest.raises(error) as info:
        call(*args, **kwargs)
    assert_one_line(info.value, words)


def assert_one_line(err: BaseException, words: tuple[str, ...]) -> None:
    message = str(err)
    assert isinstance(err, (TypeError, ValueError, FluxhopError)), repr(err)
    assert not isinstance(err, (AttributeError, KeyError, RecursionError)), repr(err)
    assert "\n" not in message and message, repr(message)
    assert len(message) < 400, message
    for word in words:
        assert word in message, (word, message)


def test_local_store_refuses_a_name_that_is_a_path(tmp_path):
    """``delete("..")`` once meant rmtree of the state directory's parent."""
    store = LocalStore(tmp_path / "state")
    (tmp_path / "state").mkdir()
    for name in ("..", "/", "a/b", ""):
        with pytest.raises(InputError) as info:
            store.delete(name)
        assert_one_line(info.value, ("local MiniCluster name",))
    with pytest.raises(TypeError) as info:
        store.delete(["x"])
    assert_one_line(info.value, ("LocalStore.delete: name must be str", "list"))
    assert tmp_path.is_dir() and (tmp_path / "state").is_dir()


# --- Client: refused before anything is sent -------------------------------------------------

# (id, constructor arguments, method, args, kwargs, exception, words)
ClientRow = tuple[
    str, dict[str, Any], str, tuple[Any, ...], dict[str, Any], type[Exception], tuple[str, ...]
]
NAME_VERBS: list[tuple[str, tuple[Any, ...]]] = [
    ("get", ()), ("wait", ()), ("logs", ()), ("scale", (2,)), ("delete", ()),
    ("submit", (["a"],)), ("jobs", ()), ("status", ()), ("cancel", ("f1",)), ("attach", ("f1",)),
]  # fmt: skip

# fmt: off
CLIENT_ROWS: list[ClientRow] = [
    ("namespace-int", {"namespace": 7}, "list", (), {}, TypeError, ("Client: namespace must be str or None", "int")),
    ("namespace-path", {"namespace": "../x"}, "list", (), {}, InputError, ("Client: namespace '../x'",)),
    ("context-bytes", {"context": b"x"}, "list", (), {}, TypeError, ("Client: context must be str or None", "bytes")),
    ("kubeconfig-int", {"kubeconfig": 7}, "list", (), {}, TypeError, ("Client: kubeconfig must be str, a path or None", "int")),
    ("request_timeout-None", {"request_timeout": None}, "list", (), {}, TypeError, ("Client: request_timeout must be a number", "None")),
    ("request_timeout-str", {"request_timeout": "5"}, "list", (), {}, TypeError, ("request_timeout", "str")),
    ("cluster_domain-None", {"cluster_domain": None}, "list", (), {}, TypeError, ("Client: cluster_domain must be str", "None")),
    ("cluster_domain-int", {"cluster_domain": 7}, "list", (), {}, TypeError, ("Client: cluster_domain must be str", "int")),
    ("cluster_domain-bad", {"cluster_domain": "a b"}, "create", (LAMMPS,), {}, SpecError, ("cluster_domain 'a b'",)),
    ("backend-None", {"backend": None}, "list", (), {}, TypeError, ("Client: backend must be str", "None")),
    ("target-int", {"target": 1}, "list", (), {}, TypeError, ("Client: target must be Target or str", "int")),
    ("create-None", {}, "create", (None,), {}, TypeError, ("Client.create: spec must be MiniCluster, str, a path or a dict", "None")),
    ("create-int", {}, "create", (7,), {}, TypeError, ("Client.create: spec", "int")),
    ("create-list", {}, "create", ([LAMMPS],), {}, TypeError, ("Client.create: spec", "list")),
    ("create-target", {}, "create", (LAMMPS,), {"target": 1}, TypeError, ("Client.create: target", "int")),
    ("create-deep", {}, "create", (minicluster_with(("spec", "archive"), nested(DEEP)),), {}, SpecError, ("nested deeper than 100",)),
    *[
        (f"{verb}-name-{shown}", {}, verb, (name, *extra), {}, TypeError, (f"Client.{verb}: name must be str, not {shown}",))
        for verb, extra in NAME_VERBS
        for name, shown in [(None, "None"), (7, "int"), (Path("/x"), "PosixPath")]
    ],
    *[
        (f"{verb}-name-{name!r}", {}, verb, (name, *extra), {}, InputError, (f"Client.{verb}: name {name!r}",))
        for verb, extra in NAME_VERBS
        for name in ("..", "a/b", "")
    ],
    ("get-name-huge", {}, "get", ("a" * 100_000,), {}, InputError, ("Client.get: name 'aaa", "(100000 characters)")),
    ("scale-size-str", {}, "scale", ("x", "2"), {}, TypeError, ("Client.scale: size must be int", "str")),
    ("wait-timeout-str", {}, "wait", ("x",), {"timeout": "5"}, TypeError, ("Client.wait: timeout must be a number or None", "str")),
    ("submit-command-str", {}, "submit", ("x", "hostname"), {}, TypeError, ("Client.submit: command must be a list of str, not str",)),
    ("submit-nodes-str", {}, "submit", ("x", ["a"]), {"nodes": "2"}, TypeError, ("Client.submit: nodes must be int or None", "str")),
    ("submit-options-dict", {}, "submit", ("x", ["a"]), {"options": {"setopt": ["a"]}}, TypeError, ("Client.submit: options must be JobOptions or None", "dict")),
    ("submit-cc-int", {}, "submit", ("x", ["a"]), {"cc": 5}, TypeError, ("Client.submit: cc must be str or None", "int")),
    ("cancel-jobid-bytes", {}, "cancel", ("x", b"f1"), {}, TypeError, ("Client.cancel: jobid must be str or a list of str", "bytes")),
    ("cancel-jobid-ints", {}, "cancel", ("x", [1]), {}, TypeError, ("Client.cancel: jobid[0] must be str", "int")),
    ("attach-jobid-None", {}, "attach", ("x", None), {}, TypeError, ("Client.attach: jobid must be str", "None")),
    *[
        (f"local-{verb}-list", {"backend": "local"}, verb, (["x"], *extra), {}, TypeError, (f"Client.{verb}: name must be str", "list"))
        for verb, extra in [("get", ()), ("delete", ()), ("logs", ()), ("submit", (["a"],)), ("jobs", ())]
    ],
]
# fmt: on


@pytest.mark.parametrize(
    ("options", "method", "args", "kwargs", "error", "words"),
    [row[1:] for row in CLIENT_ROWS],
    ids=[row[0] for row in CLIENT_ROWS],
)
def test_a_wrong_client_argument_sends_nothing(
    fake, kubeconfig, options, method, args, kwargs, error, words
):
    def call() -> Any:
        client = Client(**{"kubeconfig": str(kubeconfig), "transport": fake.transport(), **options})
        with client:
            return getattr(client, method)(*args, **kwargs)

    with pytest.raises(error) as info:
        call()
    assert_one_line(info.value, words)
    assert fake.requests == []


def test_create_takes_a_path_too(fake, kubeconfig):
    """Where a file's name is taken, a Path is too (it was 'not iterable')."""
    with Client(kubeconfig=str(kubeconfig), transport=fake.transport()) as client:
        assert client.create(REPO / "examples" / "lammps.yaml") == "lammps"


def test_what_fits_still_passes():
    """The checks refuse the wrong types only: the right ones, at the bound, pass."""
    # two levels a group: 45 of them and the rest are 96 levels, within the bound
    assert jobspec.load(with_chain(45), v1=False).nslots == 1
    assert jobspec.from_command(("a", "b"), nodes=1, environment={"A": "1"}).nnodes == 1
    assert RabbitRequest.from_jobspec(mpi({"rabbits": "r1,r2", "env": {"N": 4}})).rabbits == (
        "r1",
        "r2",
    )
    assert to_minicluster("r1,r2").spec.size == 2
    assert ResourceSet.from_json(R).ncores == 1
    assert ResourceSet.from_nodes(("a", "b"), cores=[1, 2]).ncores == 3
    assert JobOptions(setopt=["a=1"]).words() == ["-o", "a=1"]
    with pytest.warns(UserWarning, match="archive"):
        assert (
            MiniCluster.from_dict(minicluster_with(("spec", "archive"), nested(90))).name
            == "lammps"
        )
    assert SPEC.renamed("b", "team").namespace == "team"
