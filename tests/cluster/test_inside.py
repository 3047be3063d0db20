"""submit, jobs, status, cancel, attach: process-level, through a stand-in
kubectl on PATH that records its argv and runs the command here, against a
MiniCluster on the fake API server. The control flow (one exec, argv exact,
the one-line errors) runs everywhere with a recording flux; the answers
(job IDs, jobs, status, exit codes) come from a real local Flux instance where
flux-core is installed, and those tests skip elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fluxhop import Client
from fluxhop.cli import main
from fluxhop.cluster.inside import Inside
from fluxhop.flux.jobid import parse as parse_jobid
from fluxhop.flux.jobopts import JobOptions
from fluxhop.render.targets import Target
from fluxhop.spec import MiniCluster
from fluxhop.workload import Root
from fluxhop.workload.marks import CONFIG_DIR, FLUX_ROOT, OPERATED
from tests.cluster.standin import (
    RealInstance,
    install_kubectl,
    kubectl_calls,
    recording_flux,
    write_env,
)
from tests.conformance import CONFORMANCE
from tests.realflux import flux_prefix, missing_flux
from tests.render.fluxmetrics import EXPORTER_FILES

real_flux = pytest.mark.skipif(missing_flux() is not None, reason=missing_flux() or "")


def interactive(name: str, flux_root: str, command: list[str] | None = None) -> MiniCluster:
    container: dict = {"image": "ubuntu:noble"}
    if command:
        container["command"] = command
    return MiniCluster.from_dict(
        {
            "apiVersion": "flux-framework.org/v1alpha2",
            "kind": "MiniCluster",
            "metadata": {"name": name},
            "spec": {
                "size": 2,
                "interactive": not command,
                "flux": {"container": {"mountPath": flux_root}},
                "containers": [container],
            },
        }
    )


@pytest.fixture
def pod(tmp_path, cli_cluster, kubeconfig, monkeypatch, ops):
    """An interactive MiniCluster whose rank 0 pod "is" this machine: its
    Flux root is a directory here, and kubectl exec runs the command here."""
    flux_root = tmp_path / "flux"
    bin_dir, log = tmp_path / "bin", tmp_path / "kubectl.log"
    install_kubectl(bin_dir, log)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    root = ops.create(interactive("demo", str(flux_root)))
    ops.wait_ready(root, timeout=60)

    class Pod:
        def __init__(self) -> None:
            self.flux_root, self.log, self.kubeconfig = flux_root, log, str(kubeconfig)
            self.flux_log = tmp_path / "flux.log"

        def calls(self) -> list[list[str]]:
            return kubectl_calls(log)

        def with_recording_flux(self) -> None:
            write_env(flux_root, flux_bin=str(recording_flux(bin_dir, self.flux_log)))

        def flux_calls(self) -> list[str]:
            return self.flux_log.read_text().splitlines() if self.flux_log.exists() else []

    return Pod()


def cli(capfd, *args):
    code = main([str(a) for a in args])
    out = capfd.readouterr()
    return code, out.out, out.err


# --- control flow, everywhere -----------------------------------------------------------


def test_argv_reaches_flux_submit_exactly(pod, capfd):
    pod.with_recording_flux()
    command = ["sh", "-c", 'echo "a  b" && exit 3', "it's", "$HOME", ""]
    code, out, err = cli(
        capfd, "submit", "demo", "--kubeconfig", pod.kubeconfig, "-N", "1", "-o",
        "cpu-affinity=per-task", "-t", "5", "--", *command,
    )  # fmt: skip
    assert code == 0, err
    assert out == "fStandIn0\n"
    (call,) = pod.calls()
    assert call[:4] == ["--kubeconfig", pod.kubeconfig, "--namespace", "default"]
    assert call[4] == "exec" and call[5].startswith("demo-0-")  # rank 0's pod
    assert call[6:9] == ["-c", "demo", "--"]
    tail = call[call.index("fluxhop") + 1 :]
    assert tail == [
        str(pod.flux_root), "submit", "-N", "1", "-o", "cpu-affinity=per-task", "-t", "5", "--",
        *command,
    ]  # fmt: skip
    (recorded,) = pod.flux_calls()
    assert recorded == " ".join(
        ["submit", "-N", "1", "-o", "cpu-affinity=per-task", "-t", "5", "--", *command]
    )


def test_an_ensemble_is_one_exec(pod, capfd):
    pod.with_recording_flux()
    code, out, err = cli(
        capfd, "submit", "demo", "--kubeconfig", pod.kubeconfig, "--cc", "1-200", "--", "true"
    )
    assert code == 0, err
    assert len(out.splitlines()) == 200
    assert len(pod.calls()) == 1 and len(pod.flux_calls()) == 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["submit", "demo", "-t", "soon", "--", "true"],
            "-t/--time-limit: invalid duration 'soon'",
        ),
        (["submit", "demo", "-o", "=x", "--", "true"], "-o/--setopt '=x': write it as KEY[=VALUE]"),
        (["submit", "demo", "--cc", "1-x", "--", "true"], "--cc '1-x'"),
        (["submit", "demo", "-N", "0", "--", "true"], "-N must be 1 or more"),
        (
            ["submit", "demo", "--env", "NOVALUE", "--", "true"],
            "--env 'NOVALUE': write it as KEY=VALUE",
        ),
        (["cancel", "demo", "not-a-job"], "job ID 'not-a-job' is neither F58"),
        (["submit", "nosuch", "--", "true"], "MiniCluster nosuch not found"),
    ],
)
def test_bad_input_is_one_line_and_no_exec(pod, capfd, args, says):
    pod.with_recording_flux()
    code, out, err = cli(capfd, args[0], args[1], "--kubeconfig", pod.kubeconfig, *args[2:])
    assert code != 0 and out == ""
    assert err.count("\n") == 1 and says in err, err
    assert pod.calls() == []


def test_a_broker_that_has_not_started_is_said_not_hung(pod, capfd):
    code, _, err = cli(capfd, "jobs", "demo", "--kubeconfig", pod.kubeconfig)  # no run/env.sh yet
    assert code != 0
    assert err == "fluxhop: MiniCluster demo: the broker has not started in this pod yet\n"


def test_kubectl_missing_is_one_line(pod, capfd, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, _, err = cli(capfd, "jobs", "demo", "--kubeconfig", pod.kubeconfig)
    assert code != 0 and err.count("\n") == 1 and "kubectl is not on PATH" in err


def test_a_finished_or_batch_minicluster_is_refused(pod, capfd, ops, fake):
    fake.schedulable = False  # the batch job stays pending: not finished, not interactive
    ops.create(interactive("batch", str(pod.flux_root), command=["sleep", "inf"]))
    code, _, err = cli(capfd, "submit", "batch", "--kubeconfig", pod.kubeconfig, "--", "true")
    assert code != 0 and "MiniCluster batch is not interactive" in err
    fake.schedulable = True
    fake.runner = lambda p, index: ([], 0)
    done = ops.create(interactive("done", str(pod.flux_root), command=["true"]))
    ops.wait_exit(done, timeout=60)
    code, _, err = cli(capfd, "jobs", "done", "--kubeconfig", pod.kubeconfig)
    assert code != 0 and "MiniCluster done has finished (Succeeded)" in err
    assert pod.calls() == []


def test_flux_refusing_an_option_says_flux_may_be_too_old(pod, capfd, tmp_path):
    old = tmp_path / "old-flux"
    old.write_text(
        "#!/bin/sh\necho 'usage: flux submit [OPTIONS...] COMMAND [ARGS...]' >&2\n"
        "echo 'flux submit: error: unrecognized arguments: --flux-args-x' >&2\nexit 2\n"
    )
    old.chmod(0o755)
    write_env(pod.flux_root, flux_bin=str(old))
    code, _, err = cli(
        capfd,
        "submit",
        "demo",
        "--kubeconfig",
        pod.kubeconfig,
        "--flux-args",
        "--flux-args-x",
        "--",
        "true",
    )
    assert code != 0 and err.count("\n") == 1
    assert "flux in MiniCluster demo refused flux submit: flux submit: error: unrecognized" in err
    assert "flux-core may be too old" in err


def test_a_job_the_scheduler_finds_unsatisfiable_is_one_line_naming_the_flags(pod, capfd, tmp_path):
    """flux's own reason, not the line kubectl exec adds after it. (Real Flux
    refusing a job beyond maxSize: tests/realk8s/test_interactive.py.)"""
    refusing = tmp_path / "refusing-flux"
    refusing.write_text(
        "#!/bin/sh\necho 'flux-submit: ERROR: [Errno 19] Unsatisfiable request' >&2\nexit 1\n"
    )
    refusing.chmod(0o755)
    write_env(pod.flux_root, flux_bin=str(refusing))
    code, out, err = cli(
        capfd, "submit", "demo", "--kubeconfig", pod.kubeconfig, "-N", "9", "--", "true"
    )
    assert (code, out) == (1, "")
    assert err == (
        "fluxhop: flux submit in MiniCluster demo failed: flux-submit: ERROR: [Errno 19] "
        "Unsatisfiable request (not even at its maxSize does the MiniCluster have what the job "
        "asks: check -N, -n, -c and -g)\n"
    )


def test_status_runs_the_config_dirs_metrics_py_in_its_one_exec(pod, capfd, ops):
    """A MiniCluster made before metrics.py (none in its config dir): the
    status it always had, with metrics null and nothing said about them."""
    pod.with_recording_flux()
    config_dir = ops.require("demo").config_dir
    code, out, err = cli(capfd, "status", "demo", "--kubeconfig", pod.kubeconfig, "-o", "json")
    assert code == 0, err
    (call,) = pod.calls()
    assert call[call.index("fluxhop") + 1 :] == [str(pod.flux_root), f"{config_dir}/metrics.py"]
    assert [" ".join(c.split()[:2]) for c in pod.flux_calls()] == [
        "resource status",
        "resource list",
        "queue status",
    ]  # no flux python: there is no metrics.py to run
    status = json.loads(out)
    assert (status["metrics"], status["metrics_error"]) == (None, None)
    code, out, err = cli(capfd, "status", "demo", "--kubeconfig", pod.kubeconfig)
    assert code == 0 and err == "" and "metrics" not in out


class OneRoot:
    """MiniClusters (operations.py) with one running root: what Inside asks of them."""

    class kube:
        namespace = "default"

    def __init__(self, root: Root) -> None:
        self.root = root

    def require(self, name):
        return self.root

    def status(self, root):
        class State:
            state = "Running"

        return State()

    def lead_pod(self, root):
        return {"metadata": {"name": "demo-0"}, "status": {"phase": "Running"}}


SECTIONS = "avail 1 0 demo-0\n--- fluxhop ---\nfree 1 2 0 0 demo-0\n--- fluxhop ---\n"


@pytest.mark.parametrize(
    ("target", "annotations", "tail"),
    [
        (
            Target.JOB,
            {FLUX_ROOT: "/mnt/flux", CONFIG_DIR: "/etc/x"},
            ["/mnt/flux", "/etc/x/metrics.py"],
        ),
        (
            Target.MINICLUSTER,
            {OPERATED: "fluxhop", CONFIG_DIR: "/etc/y"},
            ["/mnt/flux", "/etc/y/metrics.py"],
        ),
        (Target.MINICLUSTER, {}, ["-"]),  # the Flux Operator's pods: no metrics.py, none named
    ],
)
def test_which_metrics_py_the_status_exec_names(target, annotations, tail):
    obj = {
        "kind": Target.parse(target).kind,
        "metadata": {"name": "demo", "annotations": annotations},
    }
    calls = []

    def runner(argv, **kwargs):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, SECTIONS + "--- fluxhop ---\n", "")

    inside = Inside(OneRoot(Root(target, obj)), kubectl="kubectl", runner=runner)
    status = inside.status("demo")
    (argv,) = calls
    assert argv[argv.index("fluxhop") + 1 :] == tail
    assert (status.up, status.metrics, status.metrics_error) == (1, None, None)


def _jobspec_file(tmp_path, command: list[str], suffix: str = ".yaml") -> Path:
    """A V1 jobspec of ``command`` on one node (what flux run builds), as YAML or JSON."""
    import yaml

    from fluxhop.flux.jobspec import from_command

    doc = from_command(command, nodes=1).to_dict()
    path = tmp_path / f"job{suffix}"
    path.write_text(json.dumps(doc) if suffix == ".json" else yaml.safe_dump(doc))
    return path


CANONICAL_ONLY = CONFORMANCE / "jobspec" / "valid" / "use_case_1.10.yaml"  # a rack: RFC 14, not V1


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("missing", "does not exist"),
        ("broken", "-f {path}: "),
        ("canonical", "-f {path} is a canonical jobspec (RFC 14) but not V1 (RFC 25)"),
        ("with -N", "write what --nodes says in the jobspec"),
        ("with a command", "give a command or -f JOBSPEC, not both"),
    ],
)
def test_a_jobspec_is_checked_before_any_exec(pod, capfd, tmp_path, case, says):
    good = _jobspec_file(tmp_path, ["true"])
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: 1\nresources: []\ntasks: []\n")
    path, extra = {"missing": (tmp_path / "nope.yaml", []), "broken": (broken, []),
                   "canonical": (CANONICAL_ONLY, []), "with -N": (good, ["-N", "2"]),
                   "with a command": (good, ["--", "true"])}[case]  # fmt: skip
    code, out, err = cli(
        capfd, "submit", "demo", "--kubeconfig", pod.kubeconfig, "-f", path, *extra
    )
    assert code != 0 and out == "" and err.count("\n") == 1, err
    assert says.format(path=path) in err, err
    assert pod.calls() == []  # nothing reached the pod


# --- against a real Flux instance ------------------------------------------------------------


@pytest.fixture
def real(pod):
    flux = str(flux_prefix() / "bin" / "flux")
    instance = RealInstance(flux, size=2)
    write_env(pod.flux_root, flux_bin=flux, uri=instance.uri)
    pod.uri = instance.uri
    yield pod
    instance.stop()


@real_flux
def test_submit_jobs_cancel_status_with_real_flux(real, capfd):
    config = ["--kubeconfig", real.kubeconfig]
    code, out, err = cli(
        capfd, "submit", "demo", *config, "--cc", "1-5", "--", "sh", "-c", "exit 0"
    )
    assert code == 0, err
    ids = out.split()
    assert len(ids) == 5 and all(i.startswith("f") for i in ids)
    for jobid in ids:
        parse_jobid(jobid)
    code, out, err = cli(capfd, "submit", "demo", *config, "--", "sleep", "300")
    sleeper = out.strip()
    code, out, err = cli(capfd, "jobs", "demo", *config, "-a", "-o", "json")
    assert code == 0, err
    listed = {job["id"]: job for job in json.loads(out)}
    assert set(ids) | {sleeper} <= set(listed)  # IDs as submit printed them
    code, out, err = cli(capfd, "jobs", "demo", *config)
    assert out.splitlines()[0].split() == [
        "JOBID",
        "USER",
        "NAME",
        "ST",
        "NTASKS",
        "NNODES",
        "TIME",
        "INFO",
    ]
    code, _, err = cli(capfd, "cancel", "demo", sleeper, *config)
    assert code == 0, err
    code, out, err = cli(capfd, "status", "demo", *config, "-o", "json")
    assert code == 0, err
    status = json.loads(out)
    assert status["brokers"] == {"up": 2, "down": 0}
    assert [r["rank"] for r in status["ranks"]] == [0, 1]
    assert status["resources"]["free"]["nodes"] + status["resources"]["allocated"]["nodes"] == 2
    assert "Job submission is enabled" in status["queue"]
    assert status["metrics"] is None  # its config dir has no metrics.py (made before it)
    assert len(real.calls()) == 6  # one exec per verb


@real_flux
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_jobspec_file_is_submitted_as_it_is_with_real_flux(real, capfd, tmp_path, suffix):
    """fluxhop submit NAME -f JOBSPEC: flux job submit reads it on stdin (one
    exec); --watch streams the job and exits with its code."""
    config = ["--kubeconfig", real.kubeconfig]
    path = _jobspec_file(tmp_path, ["sh", "-c", "echo from the jobspec; exit 7"], suffix)
    code, out, err = cli(capfd, "submit", "demo", *config, "-f", path)
    assert code == 0, err
    jobid = out.strip()
    parse_jobid(jobid)
    code, out, err = cli(capfd, "jobs", "demo", *config, "-a", "-o", "json")
    assert jobid in {job["id"] for job in json.loads(out)}, out
    code, out, err = cli(capfd, "submit", "demo", *config, "-f", path, "--watch")
    assert (code, out) == (7, "from the jobspec\n"), err
    first = real.calls()[0]
    assert "-i" in first[: first.index("--")]  # the jobspec went on stdin


@real_flux
def test_status_shows_the_metrics_of_the_config_dirs_metrics_py(real, capfd, ops, tmp_path):
    """The ConfigMap's metrics.py where the root says the config dir is, run
    by rank 0's flux in the status' one exec: its numbers under "metrics"."""
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    for path in EXPORTER_FILES:  # metrics.py and the files it imports, as the ConfigMap has them
        shutil.copy(path, config_dir / path.name)
    root = ops.require("demo")
    annotations = {CONFIG_DIR: str(config_dir)}
    ops.kube.merge_patch(root.obj["kind"], "demo", {"metadata": {"annotations": annotations}})
    config = ["--kubeconfig", real.kubeconfig]
    code, out, err = cli(capfd, "submit", "demo", *config, "--", "sh", "-c", "exit 2")
    assert code == 0, err
    failed = out.strip()
    env = {**os.environ, "FLUX_URI": real.uri}
    flux = str(flux_prefix() / "bin" / "flux")
    subprocess.run(
        [flux, "job", "wait-event", "-t", "60", failed, "clean"],
        env=env,
        check=True,
        capture_output=True,
    )
    code, out, err = cli(capfd, "status", "demo", *config, "-o", "json")
    assert code == 0, err
    status = json.loads(out)
    assert status["metrics_error"] is None
    metrics = status["metrics"]
    assert metrics["brokers"] == {"online": 2, "offline": 0, "lost": 0}
    assert metrics["jobs_result"]["failed"] == 1 and metrics["jobs"]["inactive"] == 1
    assert metrics["nodes"]["free"] == status["resources"]["free"]["nodes"]
    code, out, err = cli(capfd, "status", "demo", *config)
    assert "  results  0 completed, 1 failed, 0 canceled, 0 timeout\n" in out
    assert len(real.calls()) == 3  # submit, and one exec per status


@real_flux
def test_watch_and_attach_carry_the_jobs_output_and_exit_code(real, capfd):
    config = ["--kubeconfig", real.kubeconfig]
    code, out, _ = cli(
        capfd, "submit", "demo", *config, "--watch", "--", "sh", "-c", 'echo "a  b"; exit 7'
    )
    assert code == 7
    jobid, output = out.split("\n", 1)  # flux submit --watch prints the ID, then the output
    parse_jobid(jobid)
    assert output == "a  b\n"
    code, out, _ = cli(
        capfd,
        "submit",
        "demo",
        *config,
        "--env",
        "WORD=later",
        "--",
        "sh",
        "-c",
        'echo "$WORD"; exit 4',
    )
    jobid = out.strip()
    code, out, _ = cli(capfd, "attach", "demo", jobid, *config)
    assert code == 4 and "later" in out


@real_flux
def test_the_python_api_does_the_same(real, fake, kubeconfig):
    with Client(kubeconfig=str(kubeconfig), transport=fake.transport()) as client:
        jobid = client.submit(
            "demo", ["sh", "-c", "exit 0"], options=JobOptions(setattr=("user.tag=x",))
        )
        ids = client.submit("demo", ["true"], cc="1-3")
        assert isinstance(jobid, str) and len(ids) == 3
        jobs = {job.id: job for job in client.jobs("demo", all_jobs=True)}
        assert {jobid, *ids} <= set(jobs)
        assert client.status("demo").up == 2
        sleeper = client.submit("demo", ["sleep", "300"])
        client.cancel("demo", sleeper)
