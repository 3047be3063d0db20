"""The placement flags: parsed with one-line errors naming the flag, and each
written as the MiniCluster field a file would set, so that flags and file
render the same bytes."""

from __future__ import annotations

import copy

import pytest

from fluxhop.cli.jobflags import spec_from_options
from fluxhop.errors import InputError
from fluxhop.flux.curve import CurveCert
from fluxhop.render import render
from fluxhop.render.output import dump_yaml
from fluxhop.spec import MiniCluster
from fluxhop.spec.placement import (
    Placement,
    parse_selector,
    parse_toleration,
    parse_topology,
    place,
)

CERT = CurveCert.generate("placement")


@pytest.mark.parametrize(
    ("text", "toleration"),
    [
        (
            "gpu=yes:NoSchedule",
            {"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"},
        ),
        ("spot:NoExecute", {"key": "spot", "operator": "Exists", "effect": "NoExecute"}),
        (
            "example.com/pool=:PreferNoSchedule",
            {
                "key": "example.com/pool",
                "operator": "Equal",
                "value": "",
                "effect": "PreferNoSchedule",
            },
        ),
        (":NoSchedule", {"operator": "Exists", "effect": "NoSchedule"}),
    ],
)
def test_tolerations_in_kubectl_taint_spelling(text, toleration):
    assert parse_toleration(text) == toleration


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gpu", "write it as KEY\\[=VALUE\\]:EFFECT"),
        ("gpu:Sometimes", "effect 'Sometimes' is not one of NoSchedule"),
        ("bad key:NoSchedule", "key must be a qualified name"),
        ("gpu=a b:NoSchedule", "value must be a label value"),
        ("=x:NoSchedule", "a value needs a key"),
    ],
)
def test_a_toleration_that_does_not_parse_is_one_line(text, says):
    with pytest.raises(InputError, match=f"^--toleration '{text}': {says}") as err:
        parse_toleration(text)
    assert "\n" not in str(err.value)


def test_node_selectors_and_topology():
    assert parse_selector("cloud.google.com/gke-nodepool=hpc") == (
        "cloud.google.com/gke-nodepool",
        "hpc",
    )
    for bad, says in (("pool", "KEY=VALUE"), ("-x=1", "key must"), ("pool=a/b", "value must")):
        with pytest.raises(InputError, match=f"--node-selector '{bad}': .*{says}"):
            parse_selector(bad)
    assert parse_topology("kubernetes.io/hostname") == ("kubernetes.io/hostname", False)
    assert parse_topology("required:cloud.google.com/gke-nodepool") == (
        "cloud.google.com/gke-nodepool",
        True,
    )
    assert parse_topology("preferred:rack") == ("rack", False)
    with pytest.raises(
        InputError, match="--topology 'required:not a key': the level must be a node label key"
    ):
        parse_topology("required:not a key")


@pytest.mark.parametrize(
    ("placement", "says"),
    [
        (Placement(memory="12XB"), "--memory '12XB': .*unknown quantity suffix"),
        (Placement(memory="lots"), "--memory 'lots': .*not a Kubernetes quantity"),
        (Placement(cpu="0"), "--cpu '0': must be more than 0"),
        (Placement(queue="Team A"), "--queue 'Team A': "),
        (Placement(priority_class="High!"), "--priority-class 'High!': "),
        (Placement(service_account="a_b"), "--service-account 'a_b': "),
        (Placement(pods_per_node=0), "--pods-per-node must be 1 or more"),
        (Placement(pull_policy="Sometimes"), "--pull-policy 'Sometimes' is not one of"),
        (Placement(security="baseline"), "--security 'baseline' is not one of restricted"),
    ],
)
def test_bad_placement_values_are_one_line_errors(placement, says):
    with pytest.raises(InputError, match=says) as err:
        place(DOCUMENT, placement)
    assert "\n" not in str(err.value)


DOCUMENT = {
    "apiVersion": "flux-framework.org/v1alpha2",
    "kind": "MiniCluster",
    "metadata": {"name": "demo", "namespace": "default"},
    "spec": {
        "size": 2,
        "tasks": 2,
        "interactive": False,
        "containers": [{"image": "ghcr.io/org/app:1", "command": ["hostname"]}],
    },
}

# flag value -> (path in the document, value there): the field a file sets.
FLAG_FIELDS = [
    ("queue", "team-a", ("metadata", "labels", "kueue.x-k8s.io/queue-name"), "team-a"),
    ("priority_class", "high", ("spec", "pod", "priorityClassName"), "high"),
    (
        "topology",
        "required:rack",
        ("spec", "pod", "annotations", "kueue.x-k8s.io/podset-required-topology"),
        "rack",
    ),
    (
        "topology",
        "zone",
        ("spec", "pod", "annotations", "kueue.x-k8s.io/podset-preferred-topology"),
        "zone",
    ),
    ("node_selector", ("pool=hpc",), ("spec", "pod", "nodeSelector"), {"pool": "hpc"}),
    (
        "tolerations",
        ("gpu:NoSchedule",),
        ("spec", "pod", "tolerations"),
        [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    ),
    (
        "memory",
        "16Gi",
        ("spec", "containers", 0, "resources"),
        {"requests": {"memory": "16Gi"}, "limits": {"memory": "16Gi"}},
    ),
    ("cpu", "8", ("spec", "containers", 0, "resources"), {"requests": {"cpu": "8"}}),
    ("pods_per_node", 1, ("spec", "pod", "podsPerNode"), 1),
    ("service_account", "runner", ("spec", "pod", "serviceAccountName"), "runner"),
    ("image_pull_secret", "regcred", ("spec", "containers", 0, "imagePullSecret"), "regcred"),
    ("pull_policy", "Never", ("spec", "containers", 0, "imagePullPolicy"), "Never"),
]


def with_field(path, value):
    document = copy.deepcopy(DOCUMENT)
    node = document
    for part in path[:-1]:
        node = node[part] if isinstance(part, int) else node.setdefault(part, {})
    node[path[-1]] = value
    return document


def rendered(spec: MiniCluster) -> str:
    return dump_yaml(render(spec, "job", cert=CERT))


UNSET = dict(
    nodes=None, ntasks=None, cores=None, gpus=None, image=None, workdir=None, env=(),
    name=None, namespace=None, max_size=None, gpu_resource="nvidia.com/gpu",
)  # fmt: skip


def from_flags(command=("hostname",), **given):
    """spec_from_options as run/create call it for flags (no -f)."""
    defaults = {**UNSET, "image": "ghcr.io/org/app:1", "name": "demo", "namespace": "default"}
    return spec_from_options(None, list(command), **{**defaults, **given})


def from_file(path, **given):
    """spec_from_options as run/create call it for -f FILE."""
    return spec_from_options(str(path), [], **{**UNSET, **given})


@pytest.mark.parametrize(("flag", "given", "path", "value"), FLAG_FIELDS, ids=lambda x: str(x)[:24])
def test_each_flag_and_its_file_field_render_the_same_bytes(flag, given, path, value, tmp_path):
    placement = Placement(**{flag: given})
    by_flags = from_flags(nodes=2, placement=placement)
    by_file = MiniCluster.from_dict(with_field(path, value))
    assert rendered(by_flags) == rendered(by_file)
    assert rendered(by_file) != rendered(
        MiniCluster.from_dict(DOCUMENT)
    )  # the field does something
    # and the flag on top of a file (-f FILE --queue ...) is the same again
    path_ = tmp_path / "mc.yaml"
    path_.write_text(dump_yaml([DOCUMENT]))
    on_file = from_file(path_, placement=placement)
    assert rendered(on_file) == rendered(by_file)


def test_security_profile_restricted_takes_the_view_or_flux_in_the_image():
    placement = Placement(security="restricted")
    for flux_in_image in (False, True):
        spec = from_flags(nodes=1, placement=placement, flux_in_image=flux_in_image)
        file = copy.deepcopy(DOCUMENT)
        file["spec"]["size"] = file["spec"]["tasks"] = 1
        file["spec"]["pod"] = {"securityProfile": "restricted"}
        file["spec"]["flux"] = {"container": {"disable": flux_in_image}}
        assert rendered(spec) == rendered(MiniCluster.from_dict(file))


def test_placement_leaves_the_document_it_was_given_alone():
    before = copy.deepcopy(DOCUMENT)
    placed = place(DOCUMENT, Placement(queue="q", memory="1Gi", tolerations=("a:NoSchedule",)))
    assert before == DOCUMENT
    assert placed != before
    assert place(DOCUMENT, Placement()) == before


def test_a_quantity_too_large_for_decimal_is_one_line_in_a_file_too():
    """1e999999999 overflowed Python's Decimal: an internal error before."""
    document = with_field(
        ("spec", "containers", 0, "resources"), {"limits": {"cpu": "1e999999999"}}
    )
    with pytest.raises(InputError, match=r"cpu: .1e999999999. is larger than 2\^63-1"):
        MiniCluster.from_dict(document)


def test_flux_job_options_reach_the_job_rank_0_runs_from_flags_and_files(tmp_path):
    words = ["-o", "cpu-affinity=per-task", "-S", "user.x=a b", "-t", "1h"]
    path = tmp_path / "mc.yaml"
    path.write_text(dump_yaml([with_field(("spec", "flux", "optionFlags"), "-o pmi=pmix")]))
    on_file = from_file(path, flux_words=words)
    assert (
        on_file.spec.flux.option_flags
        == "-o pmi=pmix -o cpu-affinity=per-task -S 'user.x=a b' -t 1h"
    )
    by_flags = from_flags(nodes=2, flux_words=words)
    entrypoint = next(o for o in render(by_flags, "job", cert=CERT) if o["kind"] == "ConfigMap")
    assert (
        "flux_run_args=(-N 2 -n 2 --exclusive -o cpu-affinity=per-task -S 'user.x=a b' -t 1h)"
        in entrypoint["data"]["entrypoint.sh"]
    )
