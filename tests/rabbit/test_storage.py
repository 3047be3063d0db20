"""Where a rabbit MiniCluster mounts the Workflow's file systems: what NNF
wrote (NnfContainerData, else NnfAccess), each value checked, every bad one
a single line naming the object and field."""

from __future__ import annotations

import pytest

from fluxhop.rabbit import RabbitError, Workflow
from fluxhop.rabbit.storage import (
    RabbitVolume,
    directories_variable,
    from_accesses,
    from_container_data,
    from_lustre,
    global_names,
    index_directories,
)
from tests.rabbit.conftest import WORKFLOW_UID, workflow_object

FLOW = Workflow.from_object(
    workflow_object(
        "#DW jobdw type=gfs2 capacity=10GiB name=my-scratch",
        "#DW persistentdw name=project",
        "#DW container name=mpi profile=p DW_JOB_my_scratch=my-scratch DW_PERSISTENT_proj=project",
    )
)
AT = {0: f"/mnt/nnf/{WORKFLOW_UID}-0", 1: "/mnt/nnf/persistent-project"}


def data(*volumes):
    return {"kind": "NnfContainerData", "data": {"volumes": list(volumes)}}


def volume(name, command, index, path):
    return {"name": name, "command": command, "directiveIndex": index, "mountPath": path}


GOOD = (volume("my-scratch", "jobdw", 0, AT[0]), volume("proj", "persistentdw", 1, AT[1]))


def test_the_volumes_nnf_lists_are_mounted_where_it_says():
    found = from_container_data(FLOW, 2, data(*GOOD))
    assert found == [
        RabbitVolume("my-scratch", "jobdw", 0, AT[0]),
        RabbitVolume("proj", "persistentdw", 1, AT[1]),
    ]
    assert [(v.env_name, v.volume_name) for v in found] == [
        ("DW_JOB_my_scratch", "rabbit-0"),
        ("DW_PERSISTENT_proj", "rabbit-1"),
    ]


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        (
            volume("my-scratch", "jobdw", 0, "mnt/nnf/x"),
            r"data\.volumes\[0\]\.mountPath .* relative",
        ),
        (
            volume("my-scratch", "jobdw", 0, "/etc"),
            r"mountPath '/etc' is outside NNF's mount root /mnt/nnf",
        ),
        (volume("my-scratch", "jobdw", 0, "/mnt/nnf/../../etc"), "outside NNF's mount root"),
        (volume("my-scratch", "jobdw", 0, None), r"data\.volumes\[0\]\.mountPath must be a path"),
        (volume("my-scratch", "copy_in", 0, AT[0]), r"\.command must be jobdw or persistentdw"),
        (volume("my-scratch", "jobdw", 7, AT[0]), r"\.directiveIndex 7 is no directive"),
        (volume("my-scratch", "jobdw", True, AT[0]), r"\.directiveIndex True"),
        (volume("", "jobdw", 0, AT[0]), r"\.name must be a volume name"),
        ("scratch", r"data\.volumes\[0\] must be a mapping"),
    ],
)
def test_a_bad_volume_is_one_line_naming_it(entry, said):
    with pytest.raises(RabbitError, match=said) as caught:
        from_container_data(FLOW, 2, data(entry, GOOD[1]))
    assert str(caught.value).startswith("NnfContainerData fluxjob-1234-2 data.volumes[0]")
    assert "\n" not in str(caught.value)


def test_a_volume_the_directive_names_must_be_listed():
    with pytest.raises(RabbitError, match=r"lists no volume 'proj' \(directive 1\)"):
        from_container_data(FLOW, 2, data(GOOD[0]))


def test_no_volume_list_is_said():
    with pytest.raises(RabbitError, match=r"has no data\.volumes list; NNF writes it at PreRun"):
        from_container_data(FLOW, 2, {"data": {}})


def test_another_mount_root_is_a_setting():
    moved = volume("my-scratch", "jobdw", 0, "/lus/nnf/x-0")
    found = from_container_data(
        FLOW, 2, data(moved, volume("proj", "persistentdw", 1, "/lus/nnf/p")), root="/lus/nnf"
    )
    assert [v.mount_path for v in found] == ["/lus/nnf/x-0", "/lus/nnf/p"]


def access(path):
    return {"kind": "NnfAccess", "spec": {"mountPath": path, "target": "all"}}


def test_without_container_data_each_servers_access_says_where():
    found = from_accesses(FLOW, {0: access(AT[0]), 1: access(AT[1])})
    assert [(v.name, v.mount_path) for v in found] == [("my-scratch", AT[0]), ("project", AT[1])]


def test_a_missing_access_is_said():
    with pytest.raises(
        RabbitError, match=r"no NnfAccess fluxjob-1234-0-servers for '#DW jobdw type=gfs2"
    ):
        from_accesses(FLOW, {0: None, 1: access(AT[1])})


def test_a_persistent_file_system_nnf_did_not_mount_on_the_rabbits_gets_no_volume():
    """A persistentdw's type is its storage's: an XFS one has no servers NnfAccess."""
    assert [v.name for v in from_accesses(FLOW, {0: access(AT[0]), 1: None})] == ["my-scratch"]


def test_an_access_outside_the_root_is_said():
    with pytest.raises(
        RabbitError, match=r"NnfAccess fluxjob-1234-0-servers spec\.mountPath '/tmp/x'"
    ):
        from_accesses(FLOW, {0: access("/tmp/x"), 1: access(AT[1])})


def test_a_workflow_with_no_mountable_storage_gets_no_volume():
    flow = Workflow.from_object(workflow_object("#DW jobdw type=xfs capacity=1GiB name=local"))
    assert from_accesses(flow, {}) == []


def client_mount(compute, rabbit, k, access="fluxjob-1234-0-computes"):
    reference = {"objectReference": {"kind": "NnfNodeStorage", "namespace": rabbit}, "data": k}
    return {
        "metadata": {"labels": {"dataworkflowservices.github.io/owner.name": access}},
        "spec": {
            "node": compute,
            "mounts": [{"device": {"type": "reference", "deviceReference": reference}}],
        },
    }


def test_each_compute_finds_its_gfs2_directory():
    mounts = [
        client_mount("c3", "rabbit-b", 0),
        client_mount("c1", "rabbit-a", 0),
        client_mount("c2", "rabbit-a", 1),
        client_mount(
            "c1", "rabbit-a", 5, access="fluxjob-1234-1-computes"
        ),  # another file system's
    ]
    assert index_directories(mounts, FLOW, 0) == {
        "c1": "rabbit-a-0",
        "c2": "rabbit-a-1",
        "c3": "rabbit-b-0",
    }
    assert index_directories(mounts, FLOW, 1) == {"c1": "rabbit-a-5"}


def test_the_directories_are_one_variable_of_pairs():
    plain = RabbitVolume("my-scratch", "jobdw", 0, AT[0])
    assert directories_variable(plain) is None
    indexed = RabbitVolume(
        "my-scratch", "jobdw", 0, AT[0], (("c1", "rabbit-a-0"), ("c2", "rabbit-a-1"))
    )
    assert directories_variable(indexed) == (
        "DW_JOB_my_scratch_DIRECTORIES",
        "c1=rabbit-a-0 c2=rabbit-a-1",
    )


# --- global Lustre (DW_GLOBAL_) -------------------------------------------------------

GLOBAL = Workflow.from_object(
    workflow_object(
        "#DW jobdw type=gfs2 capacity=10GiB name=scratch",
        "#DW container name=mpi profile=p DW_JOB_scratch=scratch "
        "DW_GLOBAL_home_dirs=/lus/home/alice DW_GLOBAL_proj=/lus/proj/x",
        namespace="jobs",
    )
)


def lustre(name, root, namespaces=("jobs",), namespace="nnf-system", modes=("ReadWriteMany",)):
    """A LustreFileSystem as NNF's Lustre operator's CRD has it."""
    return {
        "apiVersion": "lus.cray.hpe.com/v1beta1",
        "kind": "LustreFileSystem",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"name": name[:8], "mgsNids": "10.1.1.1@tcp", "mountRoot": root,
                 "namespaces": {ns: {"modes": list(modes)} for ns in namespaces}},
    }  # fmt: skip


LUSTRES = [lustre("home", "/lus/home"), lustre("proj", "/lus/proj", namespace="lus")]


def test_a_global_lustre_is_its_claim_at_its_root():
    found = from_lustre(GLOBAL, 1, LUSTRES, None)
    assert [(v.name, v.env_name, v.mount_path, v.claim) for v in found] == [
        ("home-dirs", "DW_GLOBAL_home_dirs", "/lus/home", "home-nnf-system-readwritemany-pvc"),
        ("proj", "DW_GLOBAL_proj", "/lus/proj", "proj-lus-readwritemany-pvc"),
    ]
    assert global_names(GLOBAL, 1) == {
        "home-dirs": ("DW_GLOBAL_home_dirs", "/lus/home/alice"),
        "proj": ("DW_GLOBAL_proj", "/lus/proj/x"),
    }


def test_the_profile_picks_the_claims_mode():
    profile = {"storages": [{"name": "DW_GLOBAL_proj", "pvcMode": "ReadOnlyMany"}]}
    both = ("ReadWriteMany", "ReadOnlyMany")
    lustres = [
        lustre("home", "/lus/home"),
        lustre("proj", "/lus/proj", namespace="lus", modes=both),
    ]
    claims = {v.name: v.claim for v in from_lustre(GLOBAL, 1, lustres, profile)}
    assert claims == {"home-dirs": "home-nnf-system-readwritemany-pvc",
                      "proj": "proj-lus-readonlymany-pvc"}  # fmt: skip


def test_a_mode_the_namespace_lacks_is_refused_before_pods_wait_for_its_claim():
    profile = {"storages": [{"name": "DW_GLOBAL_proj", "pvcMode": "ReadOnlyMany"}]}
    with pytest.raises(RabbitError) as caught:
        from_lustre(GLOBAL, 1, [lustre("home", "/lus/home"), lustre("proj", "/lus/proj")], profile)
    assert str(caught.value) == (
        "DW_GLOBAL_proj: LustreFileSystem proj has no ReadOnlyMany claim for namespace jobs (its "
        "modes there: ReadWriteMany); set the container profile's storages[].pvcMode to one of them"
    )


@pytest.mark.parametrize(
    ("lustres", "said"),
    [
        ([lustre("proj", "/lus/proj")], "DW_GLOBAL_home_dirs: no LustreFileSystem holds '/lus/home/alice'"),
        ([lustre("home", "/lus/home", namespaces=("other",)), lustre("proj", "/lus/proj")],
         "DW_GLOBAL_home_dirs: LustreFileSystem home is not configured for namespace jobs"),
        ([lustre("home", "lus/home"), lustre("proj", "/lus/proj")], None),
    ],
    ids=["none", "namespace", "relative-root-never-matches"],
)  # fmt: skip
def test_a_global_lustre_nnf_would_refuse_is_one_line(lustres, said):
    with pytest.raises(RabbitError) as caught:
        from_lustre(GLOBAL, 1, lustres, None)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(said or "DW_GLOBAL_home_dirs: no LustreFileSystem"), message
