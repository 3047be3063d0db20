"""The MiniCluster model: every operator example loads; bad input is one line."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from fluxhop.errors import FluxhopWarning, SpecError
from fluxhop.spec import MiniCluster
from fluxhop.spec.container import Capabilities, Container
from fluxhop.spec.names import ADJECTIVES, NOUNS, random_name
from fluxhop.spec.pod import PodSpec
from tests.conformance import CONFORMANCE
from tests.documents import minicluster_doc

EXAMPLES = sorted((CONFORMANCE / "operator-examples").glob("*.yaml"))


def load(text: str) -> MiniCluster:
    return MiniCluster.from_yaml(text)


def minimal(**spec) -> dict:
    return minicluster_doc(containers=[{"image": "ubuntu:noble", "command": "hostname"}], **spec)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_operator_example_loads(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FluxhopWarning)
        spec = load(path.read_text())
    assert spec.name == "flux-sample"
    assert spec.spec.size >= 1
    assert spec.spec.flux_container.image


def test_lammps_example_fields():
    spec = load((CONFORMANCE / "operator-examples" / "tests__lammps__minicluster.yaml").read_text())
    lead = spec.spec.flux_container
    assert (spec.spec.size, spec.spec.tasks, spec.spec.logging.quiet) == (4, 2, True)
    assert lead.command == [
        "lmp",
        "-v",
        "x",
        "2",
        "-v",
        "y",
        "2",
        "-v",
        "z",
        "2",
        "-in",
        "in.reaxc.hns",
        "-nocite",
    ]
    assert lead.working_dir == "/opt/lammps/examples/reaxff/HNS"
    assert spec.spec.pod.labels == {"selector": "lammps"}


def test_command_string_is_split_with_shell_quoting():
    doc = minimal()
    doc["spec"]["containers"][0]["command"] = """sh -c 'echo "a  b" && exit 3'"""
    assert MiniCluster.from_dict(doc).spec.flux_container.command == [
        "sh",
        "-c",
        'echo "a  b" && exit 3',
    ]


def test_command_list_is_kept_exactly():
    argv = ["python3", "-c", "import sys; print(sys.argv)", "  spaced  ", "$(HOME)", "*"]
    doc = minimal()
    doc["spec"]["containers"][0]["command"] = argv
    assert MiniCluster.from_dict(doc).spec.flux_container.command == argv


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"size": 0}, "spec.size: Input should be greater than or equal to 1"),
        ({"size": 4, "maxSize": 2}, "maxSize 2 is smaller than size 4"),
        ({"tasks": -1}, "spec.tasks: Input should be greater than or equal to 0"),
        ({"minSize": 3, "size": 2}, "minSize 3 is larger than size 2"),
        ({"sise": 3}, "spec.sise: unknown field; did you mean 'size'?"),
        ({"deadlineSeconds": 0}, "spec.deadlineSeconds"),
        ({"flux": {"topology": "star"}}, "spec.flux.topology"),
        ({"flux": {"connectTimeout": "soon"}}, "spec.flux.connectTimeout"),
        ({"flux": {"scheduler": {"queuePolicy": "lifo"}}}, "spec.flux.scheduler.queuePolicy"),
        ({"flux": {"logLevel": 9}}, "spec.flux.logLevel"),
        ({"flux": {"curveCert": "not a cert"}}, "spec.flux.curveCert"),
        ({"network": {"headlessName": "Bad_Name"}}, "spec.network.headlessName"),
        ({"flux": {"contaner": {}}}, "did you mean 'container'?"),
        (
            {
                "size": 1,
                "maxSize": 4,
                "autoscale": {},
                "flux": {"scheduler": {"queuePolicy": "fcfs"}},
            },
            "spec: flux.scheduler.queuePolicy fcfs cannot autoscale: Fluxion fails a job larger",
        ),
    ],
)
def test_invalid_values_are_one_line_errors(spec, message):
    with pytest.raises(SpecError) as info:
        MiniCluster.from_dict(minimal(**spec))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_container_field_suggests_the_closest_name():
    doc = minimal()
    doc["spec"]["containers"][0]["imag"] = "x"
    with pytest.raises(
        SpecError, match=r"spec\.containers\[0\]\.imag: unknown field; did you mean 'image'\?"
    ):
        MiniCluster.from_dict(doc)


def test_a_switch_fluxhop_does_not_implement_warns_only_when_on():
    # the CRD defaults logging.timed and logging.zeromq to false: that asks for nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error", FluxhopWarning)
        MiniCluster.from_dict(minimal(logging={"timed": False, "zeromq": False}))
    with pytest.warns(FluxhopWarning, match=r"spec\.logging\.timed is ignored"):
        MiniCluster.from_dict(minimal(logging={"timed": True}))


@pytest.mark.parametrize(
    "field, became",
    [
        ("existingVolumes", "became volumes"),
        ("preCommand", "became commands.pre"),
        ("fluxUser", "runAsUser"),
        ("cores", "resources.limits.cpu"),
        ("diagnostics", "spec.logging.debug"),
        ("runFluxAsRoot", "run the container as root"),
        ("fluxOptionFlags", "became spec.flux.optionFlags"),
        ("fluxLogLevel", "became spec.flux.logLevel"),
    ],
)
def test_a_v1alpha1_container_field_names_what_it_became(field, became):
    doc = minimal()
    doc["spec"]["containers"][0][field] = "x"
    with pytest.raises(SpecError) as info:
        MiniCluster.from_dict(doc)
    message = str(info.value)
    assert message.startswith(f"spec.containers[0].{field} is a Flux Operator v1alpha1 field")
    assert became in message and "valid keys" not in message and "\n" not in message


def test_v1alpha1_run_flux_as_root_in_commands_names_the_replacement():
    doc = minimal()
    doc["spec"]["containers"][0]["commands"] = {"runFluxAsRoot": True}
    with pytest.raises(SpecError, match=r"commands\.runFluxAsRoot is a Flux Operator v1alpha1"):
        MiniCluster.from_dict(doc)


@pytest.mark.parametrize(
    "field, became",
    [("volumes", "claimName"), ("fluxRestful", "flux proxy"), ("preCommand", "commands.pre")],
)
def test_a_v1alpha1_top_level_field_warns_with_what_it_became(field, became):
    with pytest.warns(FluxhopWarning) as record:
        MiniCluster.from_dict(minimal(**{field: {}}))
    (line,) = [str(w.message) for w in record]
    assert line.startswith(f"spec.{field} is ignored: it is a v1alpha1 field") and became in line


@pytest.mark.parametrize(
    "name, message",
    [
        ("Bad_Name", "lower-case"),
        ("-lead", "lower-case"),
        ("a" * 64, "63"),
        ("a" * 61, "pod host name"),  # a-...-0 is 63, but maxSize 11 needs "-10"
    ],
)
def test_names(name, message):
    doc = minimal(size=11)
    doc["metadata"]["name"] = name
    with pytest.raises(SpecError, match=message):
        MiniCluster.from_dict(doc)


def test_known_unsupported_fields_warn_once_each():
    doc = minimal(services=[{"image": "nginx", "name": "web"}])
    doc["spec"]["containers"][0]["batch"] = True
    doc["spec"]["logging"] = {"timed": True}
    with pytest.warns(FluxhopWarning) as caught:
        spec = MiniCluster.from_dict(doc)
    messages = [str(w.message) for w in caught]
    for field in ("spec.services", "spec.containers[0].batch", "spec.logging.timed"):
        assert [m for m in messages if m.startswith(f"{field} is ignored")] != []
        assert len([m for m in messages if m.startswith(f"{field} is ignored")]) == 1, messages
    assert all("\n" not in m for m in messages)
    assert spec.operator_extras  # kept for the Flux Operator target


def test_server_metadata_is_ignored_with_a_warning():
    doc = minimal()
    doc["metadata"].update(uid="1234", resourceVersion="7")
    with pytest.warns(FluxhopWarning, match="metadata.uid is ignored"):
        MiniCluster.from_dict(doc)


def test_legacy_add_capabilities_is_read_as_capabilities_add():
    doc = minimal()
    doc["spec"]["containers"][0]["securityContext"] = {
        "privileged": True,
        "addCapabilities": ["SYS_PTRACE"],
    }
    with pytest.warns(FluxhopWarning, match="addCapabilities"):
        spec = MiniCluster.from_dict(doc)
    context = spec.spec.flux_container.security_context
    assert context is not None and context.capabilities is not None
    assert context.capabilities.add == ["SYS_PTRACE"]


def test_exactly_one_flux_container():
    doc = minimal()
    doc["spec"]["containers"].append({"image": "nginx", "name": "web"})
    with pytest.raises(SpecError, match="runFlux"):
        MiniCluster.from_dict(doc)
    doc["spec"]["containers"][0]["runFlux"] = True
    spec = MiniCluster.from_dict(doc)
    assert [c.name for c in spec.spec.sidecars] == ["web"]


def test_sidecars_need_names():
    doc = minimal()
    doc["spec"]["containers"][0]["runFlux"] = True
    doc["spec"]["containers"].append({"image": "nginx"})
    with pytest.raises(SpecError, match="sidecar and needs a name"):
        MiniCluster.from_dict(doc)


def test_environment_values_must_be_strings():
    doc = minimal()
    doc["spec"]["containers"][0]["environment"] = {"N": 4}
    with pytest.raises(SpecError, match="quote 4"):
        MiniCluster.from_dict(doc)


def test_command_must_start_with_a_program():
    doc = minimal()
    doc["spec"]["containers"][0]["command"] = "-N 4 hostname"
    with pytest.raises(SpecError, match="program name"):
        MiniCluster.from_dict(doc)


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["echo", "x" * 131_071], None),  # the longest word Linux execs
        (["echo", "x" * 131_072], r"word 1 is 131072 bytes; .* \(MAX_ARG_STRLEN\)"),
        (["echo", "é" * 65_536], r"word 1 is 131072 bytes"),  # bytes, not characters
        (["echo", *["y" * 100_000] * 21], r"its words are 2100026 bytes together; .* \(ARG_MAX\)"),
    ],
)
def test_a_command_linux_cannot_exec_is_refused(words, message):
    """E2BIG in the pod otherwise: the run would fail only once it started."""
    doc = minimal()
    doc["spec"]["containers"][0]["command"] = words
    if message is None:
        assert MiniCluster.from_dict(doc).spec.containers[0].command == words
        return
    with pytest.raises(SpecError, match=f"spec.containers\\[0\\].command: {message}"):
        MiniCluster.from_dict(doc)


@pytest.mark.parametrize(
    "text, message",
    [
        ("spec: [", "not valid YAML"),
        ("kind: Pod\nspec: {}", "expected MiniCluster"),
        ("apiVersion: flux-framework.org/v1alpha1\nspec: {containers: [{image: x}]}", "v1alpha2"),
        ("---\nspec: {containers: [{image: x}]}\n---\nspec: {containers: [{image: y}]}", "found 2"),
        ("spec: {}", "spec.containers: is required"),
    ],
)
def test_bad_documents(text, message):
    with pytest.raises(SpecError, match=message):
        load(text)


def test_renamed_keeps_checks():
    spec = MiniCluster.from_dict(minimal(size=4))
    assert spec.renamed("other", "team-a").name == "other"
    with pytest.raises(ValueError):
        spec.renamed("Bad_Name")


def test_random_names_are_dns_labels_from_ordinary_words():
    import random

    rng = random.Random(7)
    for _ in range(50):
        name = random_name(rng)
        adjective, noun = name.split("-")
        assert adjective in ADJECTIVES and noun in NOUNS
        MiniCluster.from_dict({**minimal(), "metadata": {"name": name}})
    assert len(set(ADJECTIVES)) == len(ADJECTIVES) and len(set(NOUNS)) == len(NOUNS)


def test_interactive_with_command_warns():
    with pytest.warns(FluxhopWarning, match="interactive"):
        MiniCluster.from_dict(minimal(interactive=True))


@pytest.mark.parametrize(
    ("model", "field"),
    [(Capabilities, "add"), (Capabilities, "drop"), (Container, "ports"), (PodSpec, "tolerations")],
)
def test_list_defaults_are_never_shared(model, field):
    """The models take plain ``[]`` defaults, not ``default_factory=list`` (inspecting
    the builtin costs start-up time); pydantic copies them per instance, and this keeps
    it so."""
    first, second = model(), model()
    getattr(first, field).append(None)
    assert getattr(second, field) == []
    assert model.model_fields[field].default == []


@pytest.mark.parametrize(
    "spec, policy",
    [
        ({"size": 2}, "easy"),  # not Fluxion's fcfs: a job waits for a restarting rank
        ({"size": 2, "maxSize": 2}, "easy"),
        ({"size": 1, "maxSize": 4}, "easy"),  # and for the ranks a scale-up brings
        ({"size": 4, "minSize": 2}, "easy"),  # and for those that join after the start
        ({"size": 2, "flux": {"scheduler": {"queuePolicy": "fcfs"}}}, "fcfs"),  # as asked
        ({"size": 1, "maxSize": 4, "autoscale": {}}, "easy"),
        ({"size": 1, "maxSize": 4, "flux": {"scheduler": {"queuePolicy": "hybrid"}}}, "hybrid"),
        ({"size": 2, "flux": {"scheduler": {"queuePolicy": "conservative"}}}, "conservative"),
        ({"size": 1, "maxSize": 4, "flux": {"scheduler": {"simple": True}}}, None),
        ({"size": 2, "flux": {"scheduler": {"simple": True, "queuePolicy": "easy"}}}, None),
    ],
)
def test_the_queue_policy_lets_jobs_wait_for_ranks_not_up(spec, policy):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FluxhopWarning)
        assert MiniCluster.from_dict(minimal(**spec)).spec.queue_policy == policy


def test_fcfs_asked_for_on_a_minicluster_that_can_grow_is_said_once():
    doc = minimal(size=1, maxSize=3, flux={"scheduler": {"queuePolicy": "fcfs"}})
    with pytest.warns(FluxhopWarning) as caught:
        spec = MiniCluster.from_dict(doc)
    assert spec.spec.queue_policy == "fcfs"  # as asked: the user may want its strict order
    [warning] = caught
    assert "fails a job larger than the nodes up" in str(warning.message)
    assert "use easy (fluxhop's default), hybrid or conservative" in str(warning.message)


@pytest.mark.parametrize("name", ["Flux_View", "view.init", "-view"])
def test_the_view_containers_name_is_a_dns_label(name):
    """It becomes an init container's name: the API server would refuse it
    after fluxhop had started."""
    with pytest.raises(SpecError, match=r"spec\.flux\.container\.name: .* lower-case letters"):
        MiniCluster.from_dict(minimal(flux={"container": {"name": name}}))
