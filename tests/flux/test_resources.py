"""RFC 20 R: every R document and the facts of rv1/facts.json that the
ResourceSet API can express."""

from __future__ import annotations

import json
import re

import pytest

from fluxhop.errors import InvalidResourceSet
from fluxhop.flux import hostlist, idset
from fluxhop.flux.resources import ResourceSet
from tests.conformance import CONFORMANCE, by_op, load_vectors

FACTS = by_op(load_vectors("rv1/facts.json"), key="kind")

# flux R subcommands that fluxhop does not implement, and why those facts are
# not run. Facts of the encode/decode subcommands that map onto from_nodes /
# from_json are run below.
NOT_EXPRESSIBLE = {
    "rcalc": "the job shell's task distribution is Flux's job, not fluxhop's; the "
    "header counts (nnodes/ncores/ngpus) of every rcalc fact are still checked",
    "flux-R-parse-config": "fluxhop writes R directly instead of [[resource.config]] tables",
}


def read(relative: str) -> ResourceSet:
    return ResourceSet.from_json((CONFORMANCE / relative).read_text())


def ids(vectors):
    return [v["id"] for v in vectors]


def test_every_fact_kind_is_tested_or_excluded_with_a_reason():
    tested = {"sample", "resource-list", "job-list-R", "flux-R-cmd", "python-ResourceSet"}
    assert set(FACTS) <= tested | set(NOT_EXPRESSIBLE)


def test_every_r_document_in_the_folder_is_read_or_rejected_as_expected():
    expected_bad = {
        "job-list__invalid_R_lite.R",
        "job-list__invalid_nodelist.R",
        "job-list__invalid_version.R",
        "job-list__missing_nodelist.R",
        "job-list__missing_version.R",
    }
    documents = sorted(
        p
        for p in (CONFORMANCE / "rv1").iterdir()
        if p.suffix in (".R", ".json")
        and not p.name.endswith(".status.json")
        and p.name != "facts.json"
    )
    assert documents
    for path in documents:
        if path.name in expected_bad:
            with pytest.raises(InvalidResourceSet):
                ResourceSet.from_json(path.read_text())
        else:
            r = ResourceSet.from_json(path.read_text())
            assert r.nnodes >= 1, path.name


@pytest.mark.parametrize("fact", FACTS["sample"], ids=ids(FACTS["sample"]))
def test_sample(fact):
    r = read(fact["file"])
    assert fact["expected"]["valid"] is True
    assert r.nnodes == 4 and r.ncores == 4 * 48 and r.ngpus == 4 * 8  # RFC 20 example
    assert r.nodelist == [f"node{i}" for i in range(186, 190)]
    assert r.ranks == [19, 20, 21, 22]


@pytest.mark.parametrize("fact", FACTS["resource-list"], ids=ids(FACTS["resource-list"]))
def test_resource_list_counts(fact):
    expected = fact["expected"]
    info = expected["flux_resource_info"]
    for r in (
        read(expected["flux_resource_R_output_file"]),
        ResourceSet.from_json(json.loads((CONFORMANCE / fact["file"]).read_text())["all"]),
    ):
        assert (r.nnodes, r.ncores, r.ngpus) == (info["nnodes"], info["ncores"], info["ngpus"])
    status = json.loads((CONFORMANCE / fact["file"]).read_text())
    totals: dict[str, list[int]] = {}
    for row in expected["flux_resource_list"]:
        total = totals.setdefault(row["state"], [0, 0, 0])
        total[0] += row["nnodes"]
        total[1] += row["ncores"]
        total[2] += row["ngpus"]
    for state in ("down", "allocated"):
        doc = status.get(state)
        r = ResourceSet.from_json(doc) if doc else None
        counts = [r.nnodes, r.ncores, r.ngpus] if r else [0, 0, 0]
        if state == "allocated":
            assert counts[1:] == totals[state][1:]
        else:
            assert counts == totals[state]
    down = ResourceSet.from_json(status["down"]) if status.get("down") else None
    allocated = ResourceSet.from_json(status["allocated"]) if status.get("allocated") else None
    free_cores = (
        info["ncores"] - (down.ncores if down else 0) - (allocated.ncores if allocated else 0)
    )
    assert free_cores == totals["free"][1]


@pytest.mark.parametrize("fact", FACTS["job-list-R"], ids=ids(FACTS["job-list-R"]))
def test_job_list_parser_facts(fact):
    expected = fact["expected"]
    if not expected["job_list_parse_ok"]:
        with pytest.raises(InvalidResourceSet):
            read(fact["file"])
        return
    r = read(fact["file"])
    if "nnodes" in expected:
        assert r.nnodes == expected["nnodes"]
        assert r.ncores == expected["ncores"]
    if "ranks" in expected:
        assert idset.encode(r.ranks, brackets=True) == expected["ranks"]
        assert r.nodelist == hostlist.decode(expected["nodelist"])


@pytest.mark.parametrize("fact", FACTS["rcalc"], ids=ids(FACTS["rcalc"]))
def test_rcalc_header_counts(fact):
    header = fact["expected"]["header"]
    if "file" in fact:
        r = read(fact["file"])
    else:  # "flux R encode -r 0-1 -c 0-14": two nodes of 15 cores
        match = re.fullmatch(r"flux R encode -r 0-(\d+) -c 0-(\d+)", fact["input"]["R_from"])
        assert match, fact["input"]["R_from"]
        nodes = int(match.group(1)) + 1
        r = ResourceSet.from_nodes([f"n{i}" for i in range(nodes)], cores=int(match.group(2)) + 1)
    assert (r.nnodes, r.ncores, r.ngpus) == (header["nnodes"], header["ncores"], header["ngpus"])


def _encode(command: str) -> ResourceSet:
    """`flux R encode` flags that map onto ResourceSet.from_nodes."""
    args = command.split()[3:]
    opts: dict[str, str] = {}
    while args:
        flag = args.pop(0)
        if "=" in flag:
            flag, value = flag.split("=", 1)
        else:
            value = args.pop(0)
        opts[
            {"-r": "--ranks", "-c": "--cores", "-g": "--gpus", "-H": "--hosts"}.get(flag, flag)
        ] = value
    unsupported = set(opts) - {"--ranks", "--cores", "--gpus", "--hosts"}
    if unsupported:
        pytest.skip(f"flux R encode {sorted(unsupported)}: fluxhop has no hwloc or property flags")
    ranks = idset.decode(opts.get("--ranks", "0"))
    if ranks != list(range(len(ranks))):
        pytest.skip("fluxhop numbers ranks 0..N-1 in host order; sparse ranks are not generated")
    hosts = hostlist.decode(opts["--hosts"]) if "--hosts" in opts else [f"host{i}" for i in ranks]
    cores = (
        len(idset.decode(opts["--cores"])) if "--cores" in opts else (0 if "--gpus" in opts else 1)
    )
    gpus = len(idset.decode(opts["--gpus"])) if "--gpus" in opts else 0
    return ResourceSet.from_nodes(hosts, cores=cores, gpus=gpus)


@pytest.mark.parametrize("fact", FACTS["flux-R-cmd"], ids=ids(FACTS["flux-R-cmd"]))
def test_flux_r_command_facts(fact):
    given, expected = fact["input"], fact["expected"]
    if "decode_input" in given:
        if expected.get("error"):
            with pytest.raises(InvalidResourceSet):
                ResourceSet.from_json(json.dumps(given["decode_input"]))
        else:
            r = ResourceSet.from_json(json.dumps(given["decode_input"]))
            assert r.ncores == expected["count"]["core"]
        return
    if "encode" not in given or "then" in given or "nodelist_with_properties" in expected:
        pytest.skip("flux R append/diff/intersect/verify/remap/properties: not fluxhop operations")
    if expected.get("error"):
        pytest.skip("the failing encode uses --property, which fluxhop does not write")
    r = _encode(given["encode"])
    counts = {"node": r.nnodes, "core": r.ncores, "gpu": r.ngpus}
    for kind, value in expected.get("count", {}).items():
        assert counts[kind] == value
    if "nodelist" in expected:
        assert r.nodelist == hostlist.decode(expected["nodelist"])
    again = ResourceSet.from_json(r.to_json())
    assert (again.nnodes, again.ncores, again.ngpus, again.nodelist) == (
        r.nnodes,
        r.ncores,
        r.ngpus,
        r.nodelist,
    )


@pytest.mark.parametrize("fact", FACTS["python-ResourceSet"], ids=ids(FACTS["python-ResourceSet"]))
def test_python_resource_set_facts(fact):
    given, expected = fact["input"], fact["expected"]
    if "error" in expected:
        with pytest.raises(InvalidResourceSet):
            ResourceSet.from_json(json.dumps(given["R"]))
        return
    if "op" in given:
        pytest.skip("ResourceSet set algebra (difference) is not a fluxhop operation")
    r = ResourceSet.from_json(json.dumps(given["R"]))
    assert (r.nnodes, r.ncores, r.ngpus) == (
        expected["nnodes"],
        expected["ncores"],
        expected["ngpus"],
    )


def test_from_nodes_writes_what_flux_r_encode_writes():
    r = ResourceSet.from_nodes(["flux-sample-0", "flux-sample-1"], cores=1)
    assert r.to_json() == (
        '{"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0"}}], '
        '"starttime": 0.0, "expiration": 0.0, "nodelist": ["flux-sample-[0-1]"]}}'
    )


def test_from_nodes_groups_identical_nodes_and_keeps_host_order():
    hosts = ["n3", "n1", "n2", "n0"]
    r = ResourceSet.from_nodes(hosts, cores=[8, 4, 8, 4], gpus=[2, 0, 2, 0])
    doc = json.loads(r.to_json())
    assert doc["execution"]["R_lite"] == [
        {"rank": "0,2", "children": {"core": "0-7", "gpu": "0-1"}},
        {"rank": "1,3", "children": {"core": "0-3"}},
    ]
    assert hostlist.decode(doc["execution"]["nodelist"][0]) == hosts
    back = ResourceSet.from_json(r.to_json())
    assert (back.nnodes, back.ncores, back.ngpus) == (4, 24, 4)
    assert back.nodelist == hosts


def test_hostlist_string_gives_the_same_r_without_expanding():
    as_list = ResourceSet.from_nodes([f"n{i}" for i in range(1000)], cores=8, gpus=2)
    as_text = ResourceSet.from_nodes("n[0-999]", cores=8, gpus=2)
    assert as_list.to_json() == as_text.to_json()
    assert (as_text.nnodes, as_text.ncores, as_text.ngpus) == (1000, 8000, 2000)
    assert as_text.nodelist[-1] == "n999"
    assert as_text.nodes[3].hostname == "n3" and as_text.nodes[3].cores == tuple(range(8))


def test_gpu_only_node_has_no_core_key():
    doc = json.loads(ResourceSet.from_nodes(["g0"], cores=0, gpus=1).to_json())
    assert doc["execution"]["R_lite"][0]["children"] == {"gpu": "0"}


@pytest.mark.parametrize(
    "hosts, kwargs, match",
    [
        ([], {}, "at least one"),
        (["a", "a"], {}, "unique"),
        (["a", "b"], {"cores": [1]}, "per-node"),
        (["a"], {"cores": -1}, ">= 0"),
        (["a"], {"cores": 0, "gpus": 0}, "no cores"),
        ("foo[", {}, "hosts"),
        ("", {}, "at least one"),
    ],
)
def test_from_nodes_rejects(hosts, kwargs, match):
    with pytest.raises(InvalidResourceSet, match=match):
        ResourceSet.from_nodes(hosts, **kwargs)


@pytest.mark.parametrize(
    "doc",
    [
        "not json",
        "[]",
        "{}",
        '{"version": 1}',
        '{"version": 1, "execution": {}}',
        '{"version": 2, "execution": {"R_lite": []}}',
        '{"version": 1, "execution": {"R_lite": [{"rank": "0"}]}}',
        '{"version": 1, "execution": {"R_lite": [{"rank": "x", "children": {"core": "0"}}]}}',
        '{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}], "nodelist": ["a", "b"]}}',
        '{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}, {"rank": "0", "children": {"core": "1"}}]}}',
        '{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}], "properties": {"x": "1"}}}',
        '{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}], "starttime": 5, "expiration": 4}}',
    ],
)
def test_malformed_r_is_invalid_resource_set(doc):
    with pytest.raises(InvalidResourceSet) as info:
        ResourceSet.from_json(doc)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("no_r", [None, "null", b"null"])
def test_no_r_is_the_empty_set_as_in_flux_python(no_r):
    """flux's ``ResourceSet()`` / ``ResourceSet(None)``: 0 nodes, 0 cores, and
    this encoding (what flux-core 0.88's ``ResourceSet().encode()`` prints)."""
    empty = ResourceSet.from_json(no_r)
    assert (empty.nnodes, empty.ncores, empty.ngpus, empty.nodelist) == (0, 0, 0, [])
    assert empty.to_json() == (
        '{"version": 1, "execution": {"R_lite": [], "starttime": 0.0, "expiration": 0.0}}'
    )
    assert ResourceSet.from_json(empty.to_json()) == empty
