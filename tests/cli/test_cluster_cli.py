"""The cluster verbs end to end against the fake API server."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from fluxhop.cli import main
from fluxhop.cli.connect import REMOTE_RELAY, shell_argv, ssh_wrapper
from fluxhop.cluster.operations import MiniClusters
from tests.conformance import REPO

COMMAND = ["sh", "-c", 'echo "a  b" && exit 3']


def cli(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def create_args(config, *extra):
    return ["create", "--kubeconfig", config, "--name", "demo", "-N", "2", *extra]


def run_args(config, *extra):
    return [
        "run",
        "--kubeconfig",
        config,
        "--name",
        "demo",
        "-N",
        "2",
        "--image",
        "ubuntu",
        *extra,
        "--",
        *COMMAND,
    ]


def test_run_streams_rank0_and_exits_with_the_job_code(cli_cluster, kubeconfig, capsys):
    cli_cluster.runner = lambda pod, index: (["a  b\n"], 3) if index == 0 else ([], 0)
    code, out, err = cli(capsys, *run_args(kubeconfig))
    assert code == 3, err
    assert out == "a  b\n"
    assert cli_cluster.objects() == []  # deleted afterwards
    # the root looked for once, the nodes listed once (do they mount the
    # view image?), then server-side apply
    assert [str(r) for r in cli_cluster.requests[:3]] == [
        "GET jobs/demo", "GET /api/v1/nodes", "APPLY jobs/demo"]  # fmt: skip


def run_through_an_eviction(cli_cluster, kubeconfig, capsys):
    """run, while a drain evicts rank 0's pod once run streams it; the first
    pod's name, run's exit code, stdout and stderr."""
    first: list[str] = []

    def runner(pod, index):
        name = pod["metadata"]["name"]
        if index != 0:
            return [], 0
        if not first:
            first.append(name)
            cli_cluster.logs[("default", name)] = ["attempt 1\n"]
        if name != first[0]:
            return ["attempt 2\n"], 3
        if any(r.path.endswith(f"/pods/{name}/log") for r in cli_cluster.requests):
            cli_cluster.evict(name)  # run follows its log: now the drain
        return None  # still running

    cli_cluster.runner = runner
    code, out, err = cli(capsys, *run_args(kubeconfig))
    return first[0], code, out, err


def test_run_follows_rank_0_through_a_disruption(cli_cluster, kubeconfig, capsys):
    """A drain evicts rank 0's pod once run streams it: the Job replaces the
    pod (its podFailurePolicy ignores disruptions) once it is gone, and run
    names the eviction (the pod is removed by then: its last state says),
    streams the new one and exits with the job's code - not the evicted
    container's 143."""
    first, code, out, err = run_through_an_eviction(cli_cluster, kubeconfig, capsys)
    assert code == 3, err
    assert out == "attempt 1\nattempt 2\n"
    assert f"rank 0's pod {first} ended before the job did: it was evicted (a node drain" in err
    assert cli_cluster.objects() == []


def test_run_keep_leaves_everything(cli_cluster, kubeconfig, capsys):
    code, out, _ = cli(capsys, *run_args(kubeconfig, "--keep"))
    assert code == 0 and out == "hello from rank 0\n"
    kinds = {o["kind"] for o in cli_cluster.objects()}
    assert {"Job", "ConfigMap", "Secret", "Service", "NetworkPolicy"} <= kinds


def test_ctrl_c_while_waiting_deletes_everything(cli_cluster, kubeconfig, capsys, monkeypatch):
    def interrupted(self, root, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(MiniClusters, "wait_lead_started", interrupted)
    code, _, err = cli(capsys, *run_args(kubeconfig))
    assert code == 130
    assert "interrupted; deleting the MiniCluster" in err
    assert cli_cluster.objects() == []


def test_ctrl_c_with_keep_keeps(cli_cluster, kubeconfig, capsys, monkeypatch):
    monkeypatch.setattr(
        MiniClusters,
        "wait_lead_started",
        lambda self, root, **kw: (_ for _ in ()).throw(KeyboardInterrupt),
    )
    code, _, _ = cli(capsys, *run_args(kubeconfig, "--keep"))
    assert code == 130
    assert cli_cluster.get("Job", "demo") is not None


def test_create_get_list_logs_scale_delete(cli_cluster, kubeconfig, capsys):
    said: set[str] = set()

    def running(pod, index):  # rank 0 says hello and goes on: a running MiniCluster scales
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if index == 0 and key not in said:
            said.add(key)
            cli_cluster.logs.setdefault(key, []).append("hello from rank 0\n")

    cli_cluster.runner = running
    code, _, err = cli(
        capsys, *create_args(kubeconfig, "--max-size", "4", "--image", "ubuntu", "--", "hostname")
    )
    assert code == 0, err
    assert "minicluster/demo created" in err
    code, out, _ = cli(capsys, "get", "demo", "--kubeconfig", kubeconfig)
    assert code == 0
    header, row = out.splitlines()
    assert header.split() == ["NAME", "TARGET", "SIZE", "STATE", "AGE"]
    assert row.split()[:3] == ["demo", "job", "2"]
    code, out, _ = cli(capsys, "get", "demo", "--kubeconfig", kubeconfig, "-o", "json")
    assert json.loads(out)["fluxhop"]["maxSize"] == 4
    code, out, _ = cli(capsys, "get", "demo", "--kubeconfig", kubeconfig, "-o", "yaml")
    assert yaml.safe_load(out)["kind"] == "Job"
    code, out, _ = cli(capsys, "list", "--kubeconfig", kubeconfig)
    assert out.splitlines()[1].split()[0] == "demo"
    code, out, _ = cli(capsys, "logs", "demo", "--kubeconfig", kubeconfig)
    assert (code, out) == (0, "hello from rank 0\n")
    code, _, err = cli(capsys, "scale", "demo", "--size", "5", "--kubeconfig", kubeconfig)
    assert code == 2 and "above the MiniCluster's maxSize 4" in err and err.count("\n") == 1
    code, _, _ = cli(capsys, "scale", "demo", "--size", "3", "--kubeconfig", kubeconfig)
    assert code == 0 and cli_cluster.get("Job", "demo")["spec"]["parallelism"] == 3
    code, _, err = cli(capsys, "delete", "demo", "--kubeconfig", kubeconfig)
    assert code == 0 and "minicluster/demo deleted" in err
    assert cli_cluster.objects() == []
    code, _, err = cli(capsys, "delete", "demo", "--kubeconfig", kubeconfig)
    assert code == 1 and err == "fluxhop: MiniCluster demo not found in namespace default\n"
    assert cli(capsys, "delete", "demo", "--kubeconfig", kubeconfig, "--ignore-not-found")[0] == 0


def test_create_from_file_with_namespace(cli_cluster, kubeconfig, capsys):
    example = REPO / "examples" / "lammps.yaml"
    code, _, err = cli(
        capsys,
        "create",
        "--kubeconfig",
        kubeconfig,
        "-f",
        example,
        "--namespace",
        "team",
        "--no-wait",
    )
    assert code == 0, err
    assert cli_cluster.get("Job", "lammps", namespace="team") is not None


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (["scale", "demo", "--size", "2"], "no Kubernetes configuration: pass --kubeconfig"),
        (["list"], "no Kubernetes configuration and no local MiniClusters"),  # cli/where.py
    ],
)
def test_no_kubeconfig_is_one_line(capsys, monkeypatch, tmp_path, args, start):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("FLUXHOP_STATE_DIR", str(tmp_path / "state"))
    code, _, err = cli(capsys, *args)
    assert code == 1
    assert err.startswith(f"fluxhop: {start}")
    assert err.count("\n") == 1


def test_forbidden_names_the_verb_and_resource(cli_cluster, kubeconfig, capsys):
    cli_cluster.fail(
        "PATCH",
        "/jobs/",
        403,
        message='jobs.batch is forbidden: User "dev" cannot patch resource "jobs"',
    )
    code, _, err = cli(capsys, *run_args(kubeconfig))
    assert code == 1
    assert "you may not patch jobs.batch in namespace default" in err and err.count("\n") == 1
    assert cli_cluster.objects() == []


def test_missing_jobset_suggests_target_job(cli_cluster, kubeconfig, capsys):
    cli_cluster.crds = set()
    code, _, err = cli(capsys, *run_args(kubeconfig, "--target", "jobset"))
    assert code == 1 and "use --target job" in err


@pytest.fixture
def fake_tools(tmp_path, monkeypatch):
    """Recording kubectl and flux on PATH."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "calls.log"
    for tool in ("kubectl", "flux"):
        script = bindir / tool
        # the stand-in flux calls FLUX_SSH the way flux's ssh connector does
        script.write_text(
            f'#!/bin/sh\nprintf "%s\\0" {tool} "$@" >> {log}\nprintf "\\n" >> {log}\n'
            f'if [ "{tool}" = flux ]; then target=${{2#ssh://}}; '
            f'exec "$FLUX_SSH" -p 22 "root@${{target%%/*}}" '
            f'PATH=/x "$FLUX_SSH_RCMD" relay /sock; fi\n'
        )
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    return log


def calls(log: Path) -> list[list[str]]:
    return [
        line.strip("\0").split("\0") for line in log.read_text().splitlines() if line.strip("\0")
    ]


def test_proxy_runs_local_flux_through_a_kubectl_ssh_wrapper(
    cli_cluster, kubeconfig, capsys, fake_tools
):
    cli_cluster.runner = lambda pod, index: ([], 0)
    assert cli(capsys, *create_args(kubeconfig, "--image", "u"))[0] == 0
    lead = next(
        o
        for o in cli_cluster.objects(kinds=("Pod",))
        if o["metadata"]["name"].startswith("demo-0-")
    )
    code, _, err = cli(
        capsys, "proxy", "--kubeconfig", kubeconfig, "demo", "flux", "resource", "list"
    )
    assert code == 0, err
    flux_call, kubectl_call = calls(fake_tools)
    assert flux_call[:3] == [
        "flux",
        "proxy",
        f"ssh://{lead['metadata']['name']}/mnt/flux/run/broker/local-0",
    ]
    assert flux_call[3:] == ["flux resource list"]  # one word: flux proxy hands it to $SHELL -c
    assert kubectl_call == [
        "kubectl",
        "--kubeconfig",
        str(kubeconfig),
        "--namespace",
        "default",
        "exec",
        "-i",
        lead["metadata"]["name"],
        "-c",
        "demo",
        "--",
        "bash",
        "-c",
        REMOTE_RELAY,
        "fluxhop-proxy",
        "/mnt/flux/run/env.sh",
        "PATH=/x",
        "flux",
        "relay",
        "/sock",
    ]


def test_the_remote_relay_runs_the_flux_env_sh_names(tmp_path):
    """In the pod: the view's or the image's flux, whatever this machine's
    flux connector sent as its PATH and its own flux's path."""
    env_file = tmp_path / "env.sh"
    env_file.write_text("flux_bin=/bin/echo\nexport FLUX_URI=local:///x\n")
    argv = ["bash", "-c", REMOTE_RELAY, "fluxhop-proxy", str(env_file),
            "PATH=/mine", "A=b", "/my/flux", "relay", "/sock", "a  b"]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    assert out == "relay /sock a  b\n"


def test_shell_and_proxy_need_their_tools(cli_cluster, kubeconfig, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    code, _, err = cli(capsys, "shell", "demo", "--kubeconfig", kubeconfig)
    assert (
        code == 1
        and err
        == "fluxhop: kubectl is not on PATH; fluxhop shell runs kubectl exec -it; install kubectl\n"
    )
    code, _, err = cli(capsys, "proxy", "--kubeconfig", kubeconfig, "demo")
    assert code == 1 and err.startswith("fluxhop: flux is not on PATH")


def test_shell_argv_sets_flux_uri_through_connect_helper():
    from fluxhop.workload import Root

    root = Root("job", {"metadata": {"name": "demo"}})
    argv = shell_argv("/usr/bin/kubectl", ["--namespace", "ns"], root, "demo-0-abcde")
    assert argv == [
        "/usr/bin/kubectl",
        "--namespace",
        "ns",
        "exec",
        "-it",
        "demo-0-abcde",
        "-c",
        "demo",
        "--",
        "bash",
        "/etc/fluxhop/config/connect.sh",
    ]


def test_ssh_wrapper_is_valid_sh(tmp_path):
    wrapper = tmp_path / "w"
    wrapper.write_text(ssh_wrapper("/bin/echo", ["--namespace", "a b"], "demo"))
    wrapper.chmod(stat.S_IRWXU)
    out = subprocess.run(
        [str(wrapper), "-p", "22", "-o", "x", "me@pod-0", "PATH=/p", "flux", "relay", "/s"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == "--namespace a b exec -i pod-0 -c demo -- env PATH=/p flux relay /s\n"


@pytest.mark.parametrize("verb", ["create", "run"])
def test_a_lost_answer_leaves_nothing_and_is_one_line(cli_cluster, kubeconfig, capsys, verb):
    cli_cluster.fail("PATCH", "/jobs/demo", 0, times=10, mode="lost")
    extra = ("--request-timeout", "5", "--image", "ubuntu")
    args = create_args(kubeconfig, *extra) if verb == "create" else run_args(kubeconfig, *extra[:2])
    code, _out, err = cli(capsys, *args)
    assert code == 1
    assert err.strip().splitlines()[-1] == (
        "fluxhop: no answer from the Kubernetes API at https://fake.invalid:6443 within 5s "
        "(raise it with --request-timeout)"
    )
    assert cli_cluster.objects() == []
    assert "DELETE jobs/demo" in cli_cluster.seen("DELETE")


def test_request_timeout_must_be_positive_on_the_command_line(cli_cluster, kubeconfig, capsys):
    code, _out, err = cli(capsys, "list", "--kubeconfig", kubeconfig, "--request-timeout", "0")
    assert code == 2 and err.count("\n") == 1 and "--request-timeout" in err
