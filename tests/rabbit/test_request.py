"""``rabbit.mpi.*`` attributes, read the way ``flux run -S`` stores them.

Each row is one attribute as it arrives in a jobspec (``-S`` JSON-decodes
values: ``-S rabbit.mpi.nodes=4`` is the int 4, ``rabbits=a,b`` the string
"a,b"). Rows marked "upstream defect" are regressions against the
flux-coral2 prototype (reference/flux-coral2-rabbit-mpi.md §7.3).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from fluxhop.flux.jobspec import Jobspec
from fluxhop.rabbit import DEFAULT_IMAGE, RabbitError, RabbitRequest
from fluxhop.rabbit.request import parse_bool


def job(mpi=None, **system):
    """A jobspec mapping whose ``attributes.system.rabbit.mpi`` is ``mpi``."""
    if mpi is not None:
        system["rabbit"] = {"mpi": mpi}
    return {"attributes": {"system": system}}


def request(**mpi) -> RabbitRequest:
    return RabbitRequest.from_jobspec(job(mpi))


# (attribute, value as -S delivers it, field, expected)
ATTRIBUTES = [
    ("image", "ghcr.io/x/lammps:cxi", "image", "ghcr.io/x/lammps:cxi"),
    ("workdir", "/opt/lammps/examples", "workdir", "/opt/lammps/examples"),
    ("command", "lmp -in 'in file.x'", "command", ("lmp", "-in", "in file.x")),
    ("command", ["lmp", "-in", "in.x"], "command", ("lmp", "-in", "in.x")),
    ("add_flux", True, "add_flux", True),
    ("add_flux", False, "add_flux", False),  # upstream defect: JSON false kept the view
    ("add_flux", "no", "add_flux", False),
    ("add_flux", "false", "add_flux", False),
    ("add_flux", 0, "add_flux", False),  # upstream defect: 0 was "unset", i.e. true
    ("add_flux", "YES", "add_flux", True),
    ("succeed", True, "succeed", True),
    ("succeed", "no", "succeed", False),  # upstream defect: "no" turned succeed on
    ("succeed", False, "succeed", False),
    ("succeed", 1, "succeed", True),  # -S rabbit.mpi.succeed (no value) gives 1
    ("exclusive", "true", "exclusive", True),
    ("exclusive", "0", "exclusive", False),
    ("tasks", 96, "tasks", 96),
    ("tasks", "96", "tasks", 96),
    ("nodes", 4, "nodes", 4),
    ("nodes", " 4 ", "nodes", 4),
    ("rabbits", "r1,r2", "rabbits", ("r1", "r2")),  # upstream defect: matched nothing
    ("rabbits", " r1 , r2,r1 ", "rabbits", ("r1", "r2")),
    ("rabbits", ["r1", "r2"], "rabbits", ("r1", "r2")),
    (
        "env",
        {"one": "ketchup", "N": 4, "ON": True},
        "env",
        {"one": "ketchup", "N": "4", "ON": "true"},
    ),
    ("pull_policy", "always", "pull_policy", "Always"),
    ("pull_secret", "regcred", "pull_secret", "regcred"),
    ("rabbit_mount", "/mnt/wabbit/", "rabbit_mount", "/mnt/wabbit"),
]


@pytest.mark.parametrize(("key", "value", "field", "expected"), ATTRIBUTES)
def test_each_attribute_is_parsed_for_its_own_type(key, value, field, expected):
    parsed = request(**{key: value})
    assert parsed.enabled
    got = getattr(parsed, field)
    assert (dict(got) if field == "env" else got) == expected
    # upstream defect (02b30ad): every attribute read back the whole mpi table
    for other in ("image", "workdir", "pull_secret"):
        if other != field:
            assert not isinstance(getattr(parsed, other), dict)


# (attribute, bad value, words the one-line error must contain)
BAD = [
    ("nodes", "four", ["rabbit.mpi.nodes", "whole number"]),  # upstream: warned and used all
    ("nodes", 0, ["rabbit.mpi.nodes", "1 or more"]),
    ("nodes", True, ["rabbit.mpi.nodes"]),
    ("tasks", 1.5, ["rabbit.mpi.tasks", "whole number"]),
    ("add_flux", "maybe", ["rabbit.mpi.add_flux", "true or false"]),
    ("succeed", 2, ["rabbit.mpi.succeed"]),
    ("rabbits", ",,", ["rabbit.mpi.rabbits", "names no rabbit"]),
    ("rabbits", 7, ["rabbit.mpi.rabbits", "comma-separated"]),
    ("env", "A=1", ["rabbit.mpi.env", "rabbit.mpi.env.NAME=VALUE"]),
    ("env", {"A": {"b": 1}}, ["rabbit.mpi.env.A"]),
    ("pull_policy", "Sometimes", ["rabbit.mpi.pull_policy", "IfNotPresent"]),
    ("rabbit_mount", "relative/dir", ["rabbit.mpi.rabbit_mount", "absolute"]),
    ("command", "lmp 'unclosed", ["rabbit.mpi.command"]),
    ("command", [], ["rabbit.mpi.command"]),
    ("image", "", ["rabbit.mpi.image", "non-empty"]),
    ("imgae", "x", ["rabbit.mpi.imgae", "did you mean rabbit.mpi.image?"]),
    ("nodez", 2, ["did you mean rabbit.mpi.nodes?"]),
    ("zzz", 2, ["rabbit.mpi.zzz", "known keys"]),
]


@pytest.mark.parametrize(("key", "value", "words"), BAD)
def test_bad_attributes_get_one_line_naming_the_field(key, value, words):
    with pytest.raises(RabbitError) as caught:
        request(**{key: value})
    message = str(caught.value)
    assert "\n" not in message
    for word in words:
        assert word in message


@pytest.mark.parametrize(
    ("mpi", "enabled"),
    [
        (True, True),
        (1, True),  # -S rabbit.mpi with no value
        ("yes", True),
        ("TRUE", True),
        ({}, True),
        ({"image": "x"}, True),
        (False, False),  # the prototype treated an explicit false as a request
        (0, False),
        ("no", False),
        ("", False),
    ],
)
def test_enabled(mpi, enabled):
    assert RabbitRequest.from_jobspec(job(mpi)).enabled is enabled


@pytest.mark.parametrize(
    "spec", [job(), job(None), {"attributes": {"system": {"rabbit": 1}}}, {"attributes": {}}]
)
def test_absent_or_malformed_rabbit_table_is_not_a_request(spec):
    assert RabbitRequest.from_jobspec(spec) == RabbitRequest()
    assert not RabbitRequest.from_jobspec(spec).enabled


@pytest.mark.parametrize("mpi", ["maybe", 2, 1.5, ["a"]])
def test_a_scalar_that_is_no_switch_is_an_error(mpi):
    with pytest.raises(RabbitError, match=r"rabbit\.mpi=.*sub-keys"):
        RabbitRequest.from_jobspec(job(mpi))


def test_not_a_jobspec_is_an_error():
    with pytest.raises(RabbitError, match="expected a jobspec"):
        RabbitRequest.from_jobspec({"system": {}})
    with pytest.raises(TypeError, match=r"^RabbitRequest.from_jobspec: jobspec must be Jobspec"):
        RabbitRequest.from_jobspec("rabbit.mpi=yes")  # type: ignore[arg-type]


def test_a_real_jobspec_from_the_conformance_set(conformance: Path):
    doc = yaml.safe_load((conformance / "jobspec/valid_v1/example1.yaml").read_text())
    doc["attributes"]["system"]["dw"] = "#DW jobdw type=gfs2 capacity=10GiB name=scratch"
    doc["attributes"]["system"]["rabbit"] = {"mpi": {"image": "lammps:cxi", "nodes": 2}}
    parsed = RabbitRequest.from_jobspec(Jobspec(doc, v1=True))
    assert (parsed.enabled, parsed.image, parsed.nodes) == (True, "lammps:cxi", 2)


def test_defaults():
    parsed = RabbitRequest.from_jobspec(job("yes"))
    assert parsed.image == DEFAULT_IMAGE
    assert parsed.interactive and parsed.command == ()
    assert parsed.adds_flux is False  # the default image has Flux
    assert (parsed.tasks, parsed.nodes, parsed.rabbits) == (None, None, None)
    assert dict(parsed.env) == {} and parsed.rabbit_mount is None
    assert not (parsed.succeed or parsed.exclusive)


@pytest.mark.parametrize(
    ("image", "add_flux", "adds"),
    [
        (DEFAULT_IMAGE, None, False),
        ("other:1", None, True),
        ("other:1", False, False),
        ("other:1", True, True),
        (DEFAULT_IMAGE, True, True),  # an explicit request wins, even for the default image
    ],
)
def test_adds_flux(image, add_flux, adds):
    mpi = {"image": image} | ({} if add_flux is None else {"add_flux": add_flux})
    assert request(**mpi).adds_flux is adds


def test_nothing_leaks_between_requests():
    first = request(env={"A": "1"}, rabbits="r1,r2", succeed=True)
    second = request()
    assert dict(second.env) == {} and second.rabbits is None and not second.succeed
    with pytest.raises(TypeError):
        first.env["B"] = "2"  # type: ignore[index]
    source = job({"env": {"A": "1"}})
    before = copy.deepcopy(source)
    RabbitRequest.from_jobspec(source)
    assert source == before


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        ("On", True),
        ("1", True),
        (1, True),
        (False, False),
        ("off", False),
        (0, False),
    ],
)
def test_parse_bool(value, expected):
    assert parse_bool(value, "x") is expected
