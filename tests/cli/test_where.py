"""One way to reach a local MiniCluster (cli/where.py).

Every verb that takes --local finds a MiniCluster that exists only on this
machine without --local when there is no Kubernetes configuration; --local
still forces this machine; a kubeconfig that exists means Kubernetes, never
a silent switch to this machine; and neither is one line that says both.

Without Flux: the local MiniCluster is the store's own record with sleeping
process groups as its "brokers", and its rank 0's run/env.sh names a
stand-in flux that records what it is asked and answers like flux. With a
real flux-core: the whole lifecycle without --local.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import ClassVar

import pytest

from fluxhop.cli import main, where
from fluxhop.cluster.config import resolve
from fluxhop.errors import KubeconfigError
from fluxhop.local.store import RECORD, LocalStore, Record
from tests.cluster.fixtures import write_kubeconfig
from tests.processes import default_signals
from tests.realflux import flux_prefix, missing_flux

JOBID = "fBukQL"  # f58(123456789)

# What flux is asked beside rank 0, and what it answers (jobs, status, submit,
# attach), as the real one would for an idle one-broker instance.
STAND_IN = """#!/bin/sh
printf '%s\\n' "$*" >> "{record}"
case "$1" in
    submit) echo {jobid} ;;
    jobs) echo '{{"jobs": []}}' ;;
    resource) if [ "$2" = status ]; then echo "online 1 0 demo-0"; else echo "free 1 4 0 0 demo-0"; fi ;;
    queue) echo "0 alloc, 0 running jobs" ;;
    job) echo attached; exit 5 ;;
esac
"""


class Here:
    """A local MiniCluster ``demo`` that only exists on this machine."""

    def __init__(self, root: Path, state: Path) -> None:
        self.state = state
        self.directory = state / "demo"
        flux_root = self.directory / "rank-0"
        (flux_root / "run").mkdir(parents=True)
        self.record = root / "flux-calls"
        flux = root / "stand-in-flux"  # not named flux: nothing finds it on PATH
        flux.write_text(STAND_IN.format(record=self.record, jobid=JOBID))
        flux.chmod(0o755)
        (flux_root / "run" / "env.sh").write_text(f"flux_bin={flux}\n")
        (self.directory / "output.log").write_text("line 1\nline 2\n")
        self.brokers = [
            subprocess.Popen(["sleep", "300"], start_new_session=True, preexec_fn=default_signals)
            for _ in range(2)
        ]
        record = Record(
            name="demo",
            size=2,
            interactive=True,
            uri="local:///nonexistent",
            flux_root=str(flux_root),
            pgids=[b.pid for b in self.brokers],
            created=time.time(),
            directory=str(self.directory),
        )
        (self.directory / RECORD).write_text(json.dumps(asdict(record)))

    def calls(self) -> list[str]:
        return self.record.read_text().splitlines() if self.record.exists() else []

    def close(self) -> None:
        for broker in self.brokers:
            broker.kill()
            broker.wait(timeout=30)


@pytest.fixture
def state(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "state"
    monkeypatch.setenv("FLUXHOP_STATE_DIR", str(directory))
    return directory


@pytest.fixture
def here(tmp_path, state):
    made = Here(tmp_path, state)
    yield made
    made.close()


@pytest.fixture(params=["KUBECONFIG-names-a-missing-file", "no-~/.kube/config"])
def no_kube(request, tmp_path, monkeypatch):
    """No Kubernetes configuration anywhere kubectl looks."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    if request.param.startswith("KUBECONFIG"):
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent" / "config"))
    else:
        monkeypatch.delenv("KUBECONFIG", raising=False)


@pytest.fixture(params=["KUBECONFIG", "~/.kube/config"])
def kube(request, tmp_path, monkeypatch, cli_cluster):
    """A kubeconfig where kubectl looks (the fake API server behind it), and
    a kubectl on PATH for the verbs that exec into rank 0."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    if request.param == "KUBECONFIG":
        monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig")))
    else:
        monkeypatch.delenv("KUBECONFIG", raising=False)
        write_kubeconfig(home / ".kube" / "config")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text("#!/bin/sh\nexit 99\n")  # never reached: demo is not on the cluster
    kubectl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return cli_cluster


def cli(capfd, *args):
    code = main([str(a) for a in args])
    out = capfd.readouterr()
    return code, out.out, out.err


# verb -> (its words after the verb, with NAME where the name goes)
VERBS: dict[str, list[str]] = {
    "get": ["demo", "-o", "json"],
    "list": [],
    "logs": ["demo"],
    "submit": ["demo", "--", "hostname"],
    "jobs": ["demo", "-o", "json"],
    "status": ["demo", "-o", "json"],
    "cancel": ["demo", JOBID],
    "attach": ["demo", JOBID],
    "delete": ["demo"],
}


def args_of(verb: str, *, local: bool = False) -> list[str]:
    return [verb, *(["--local"] if local else []), *VERBS[verb]]


def assert_acted_here(verb: str, code: int, out: str, err: str, here: Here) -> None:
    """What each verb does to (or says of) the local MiniCluster demo."""
    expected = {
        "submit": "submit -- hostname",
        "jobs": "jobs --json",
        "status": "resource status",
        "cancel": f"cancel {JOBID}",
        "attach": f"job attach {JOBID}",
    }
    if verb == "attach":
        assert (code, out) == (5, "attached\n"), err  # the job's exit code and output
    else:
        assert code == 0, err
    if verb in expected:
        assert here.calls() and here.calls()[0].startswith(expected[verb]), here.calls()
    else:
        assert here.calls() == []
    if verb == "get":
        status = json.loads(out)
        assert (status["name"], status["target"], status["state"]) == ("demo", "local", "Running")
    elif verb == "list":
        assert out.splitlines()[1].split()[:4] == ["demo", "local", "2", "Running"]
    elif verb == "logs":
        assert out == "line 1\nline 2\n"
    elif verb == "submit":
        assert out == f"{JOBID}\n"
    elif verb == "jobs":
        assert json.loads(out) == []
    elif verb == "status":
        assert json.loads(out)["brokers"] == {"up": 1, "down": 0}
    elif verb == "delete":
        assert err == "minicluster/demo deleted\n"
        assert not here.directory.exists()
        for broker in here.brokers:
            broker.wait(timeout=30)  # delete ended every group
    if verb != "delete":
        assert here.directory.is_dir()


# --- without a Kubernetes configuration -----------------------------------------------------


@pytest.mark.parametrize("verb", VERBS)
def test_a_local_only_minicluster_is_found_without_local(no_kube, here, capfd, verb):
    code, out, err = cli(capfd, *args_of(verb))
    assert_acted_here(verb, code, out, err, here)


@pytest.mark.parametrize("verb", VERBS)
def test_local_still_forces_this_machine_without_a_kubeconfig(no_kube, here, capfd, verb):
    code, out, err = cli(capfd, *args_of(verb, local=True))
    assert_acted_here(verb, code, out, err, here)


NEITHER = (
    "fluxhop: no Kubernetes configuration and no local MiniCluster demo: set KUBECONFIG "
    "(or pass --kubeconfig), or start it here with fluxhop create --local --name demo\n"
)


@pytest.mark.parametrize("verb", VERBS)
def test_neither_a_kubeconfig_nor_a_local_minicluster_is_one_line(no_kube, state, capfd, verb):
    code, out, err = cli(capfd, *args_of(verb))
    assert code == 1 and out == ""
    if verb == "list":
        assert err == (
            "fluxhop: no Kubernetes configuration and no local MiniClusters: set KUBECONFIG "
            "(or pass --kubeconfig), or start one here with fluxhop create --local\n"
        )
    else:
        assert err == NEITHER


def test_another_local_name_is_not_taken_for_the_one_asked(no_kube, here, capfd):
    code, _out, err = cli(capfd, "get", "other")
    assert code == 1 and err == NEITHER.replace("demo", "other")
    assert cli(capfd, "delete", "other", "--ignore-not-found")[0] == 1  # unknown, not absent
    assert here.directory.is_dir()


@pytest.mark.parametrize("verb", ["run", "create"])
def test_run_and_create_without_a_kubeconfig_or_flux_is_one_line(
    no_kube, state, tmp_path, monkeypatch, capfd, verb
):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no flux, no kubectl
    args = [verb, "--name", "demo", "-N", "2", "--image", "x"]
    code, out, err = cli(capfd, *args, *(["--", "true"] if verb == "run" else []))
    assert code == 1 and out == ""
    assert err == (
        "fluxhop: no Kubernetes configuration and no flux on PATH to run on this machine: "
        "set KUBECONFIG (or pass --kubeconfig), or install flux-core 0.82+ for --local\n"
    )


def test_create_without_a_kubeconfig_starts_it_here(no_kube, state, monkeypatch, capfd):
    """The same rule as run: flux on PATH, no kubeconfig: this machine, said
    on stderr (the store's create is a stand-in here; test_store.py runs it
    with a real flux)."""
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: f"/stand-in/{name}")
    created = []

    def create(store, spec):
        created.append(spec.name)
        return Record(spec.name, spec.spec.size, True, "local:///x", "/x", [], 0.0, "/x")

    monkeypatch.setattr(LocalStore, "create", create)
    args = ["create", "--name", "play", "-N", "2", "--image", "x", "--queue", "q"]
    code, _out, err = cli(capfd, *args)
    assert code == 0, err
    assert created == ["play"]
    assert err.splitlines() == [
        "fluxhop: no Kubernetes configuration; running on this machine with the flux on PATH "
        "(--local)",
        "fluxhop: --local runs no pods: --queue does not apply",
        "minicluster/play created (local, 2 brokers): fluxhop submit --local play -- CMD, or "
        "flux proxy local:///x; fluxhop delete --local play when done",
    ]


# --- with a kubeconfig ----------------------------------------------------------------------


@pytest.mark.parametrize("verb", VERBS)
def test_local_forces_this_machine_even_with_a_kubeconfig(kube, here, capfd, verb):
    code, out, err = cli(capfd, *args_of(verb, local=True))
    assert_acted_here(verb, code, out, err, here)
    assert kube.requests == []  # Kubernetes was never asked


@pytest.mark.parametrize("verb", VERBS)
def test_a_kubeconfig_means_kubernetes_never_a_silent_fallback(kube, here, capfd, verb):
    code, out, err = cli(capfd, *args_of(verb))
    if verb == "list":
        assert (code, out, err) == (0, "", "No MiniClusters found.\n")
    else:
        assert (code, out) == (1, "")
        assert err == "fluxhop: MiniCluster demo not found in namespace default\n"
    assert kube.requests  # asked Kubernetes
    assert here.calls() == [] and here.directory.is_dir()  # left the local one alone


def no_current_context(text: str) -> str:
    return text.replace("current-context: fake\n", "current-context: ''\n")


@pytest.mark.parametrize(
    ("words", "broken", "says"),
    [
        (["--kubeconfig", "/nonexistent/config"], None, "--kubeconfig /nonexistent/config: no such file"),
        (["--context", "other"], None, "no Kubernetes configuration: pass|KUBECONFIG names no existing file"),
        ([], no_current_context, "sets no current-context"),
        ([], lambda text: "a: [", "not valid YAML"),
    ],
    ids=["--kubeconfig-missing", "--context-given", "no-current-context", "not-yaml"],
)  # fmt: skip
@pytest.mark.parametrize("verb", ["get", "submit", "delete", "list"])
def test_a_kubeconfig_asked_for_or_broken_says_why_never_falls_back(
    no_kube, here, tmp_path, monkeypatch, capfd, verb, words, broken, says
):
    if broken is not None:  # KUBECONFIG names a file that exists but cannot be used
        path = write_kubeconfig(tmp_path / "broken")
        path.write_text(broken(path.read_text()))
        monkeypatch.setenv("KUBECONFIG", str(path))
    code, out, err = cli(capfd, verb, *words, *VERBS[verb])
    assert code == 1 and out == "", err
    assert re.search(says, err) and err.count("\n") == 1, err
    assert here.calls() == [] and here.directory.is_dir()


# --- the decision itself ----------------------------------------------------------------------


def configurations(tmp_path: Path) -> dict[str, dict[str, str]]:
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    with_config = tmp_path / "home2"
    (with_config / ".kube").mkdir(parents=True)
    write_kubeconfig(with_config / ".kube" / "config")
    config = write_kubeconfig(tmp_path / "config")
    missing = str(tmp_path / "missing")
    return {
        "nothing": {"HOME": str(home)},
        "home-config": {"HOME": str(with_config)},
        "KUBECONFIG": {"HOME": str(home), "KUBECONFIG": str(config)},
        "KUBECONFIG-missing": {"HOME": str(with_config), "KUBECONFIG": missing},
        "KUBECONFIG-one-of-two": {"HOME": str(home), "KUBECONFIG": f"{missing}:{config}"},
        "KUBECONFIG-empty": {"HOME": str(with_config), "KUBECONFIG": ""},
    }


def test_kube_configured_agrees_with_the_resolver(tmp_path):
    """where.py asks "is there any configuration" the way cluster/config.py
    looks for one: absent for it exactly when the resolver says it is."""
    for case, env in configurations(tmp_path).items():
        try:
            resolve(env=env)
            found = True
        except KubeconfigError as err:
            assert "no Kubernetes configuration" in str(err) or "no existing file" in str(err)
            found = False
        assert where.kube_configured(env) is found, case


def test_kube_configured_in_a_pod(tmp_path, monkeypatch):
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("t")
    monkeypatch.setattr(where, "SERVICE_ACCOUNT", account)
    home = {"HOME": str(tmp_path)}
    assert where.kube_configured({**home, "KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert not where.kube_configured(home)


class StandInStore:
    """The local store's lookup, for the decision's control flow."""

    names: ClassVar[set[str]] = set()
    asked: ClassVar[list[str]] = []

    def find(self, name):
        self.asked.append(name)
        return object() if name in self.names else None

    def list(self):
        self.asked.append("*")
        return sorted(self.names)


@pytest.fixture
def store(monkeypatch):
    monkeypatch.setattr(where, "LocalStore", StandInStore)
    StandInStore.names, StandInStore.asked = set(), []
    return StandInStore


def test_the_decision(no_kube, store, monkeypatch):
    assert where.reach(None, None, None, local=True, name="demo") is None
    assert store.asked == []  # --local: not even looked up
    with pytest.raises(KubeconfigError, match="and no local MiniCluster demo"):
        where.reach(None, None, None, local=False, name="demo")
    store.names = {"demo"}
    assert where.reach(None, None, None, local=False, name="demo") is None
    assert where.reach(None, None, None, local=False) is None  # list: there are some
    assert store.asked == ["demo", "demo", "*"]
    with pytest.raises(KubeconfigError, match="no such file"):  # asked for: never here
        where.reach("/nonexistent", None, None, local=False, name="demo")
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    with pytest.raises(KubeconfigError, match="no flux on PATH"):
        where.reach(None, None, None, local=False, new=True)
    assert store.asked == ["demo", "demo", "*"]


def test_the_decision_with_a_kubeconfig(kube, store):
    store.names = {"demo"}
    ops = where.reach(None, None, None, local=False, name="demo")
    assert ops is not None and ops.kube.namespace == "default"
    assert store.asked == []  # the local store is not even looked at


# --- with a real flux-core ------------------------------------------------------------------


@pytest.fixture
def short_state(monkeypatch):
    """A state directory under a short path: broker socket paths are limited."""
    directory = Path(tempfile.mkdtemp(prefix="fh-", dir="/tmp"))
    monkeypatch.setenv("FLUXHOP_STATE_DIR", str(directory))
    yield directory
    for record in LocalStore(directory).list():  # a failed test's brokers are stopped too
        LocalStore(directory).delete(record.name)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.flux
@pytest.mark.skipif(missing_flux() is not None, reason=missing_flux() or "")
def test_the_local_lifecycle_without_local(no_kube, short_state, monkeypatch, capfd):
    monkeypatch.setenv("PATH", f"{flux_prefix()}/bin{os.pathsep}{os.environ['PATH']}")
    code, _, err = cli(capfd, "create", "-N", "2", "--name", "nolocal", "--image", "x")
    assert code == 0, err
    assert "running on this machine" in err and "created (local, 2 brokers)" in err
    # -N 2: the job waits for both brokers (create returns once rank 0 takes jobs)
    watch = ["--watch", "-N", "2", "--", "sh", "-c", "echo hi; exit 4"]
    code, out, err = cli(capfd, "submit", "nolocal", *watch)
    assert code == 4 and out.endswith("hi\nhi\n"), err
    code, out, err = cli(capfd, "jobs", "nolocal", "-a", "-o", "json")
    assert code == 0 and [job["returncode"] for job in json.loads(out)] == [4], err
    code, out, _ = cli(capfd, "status", "nolocal", "-o", "json")
    assert json.loads(out)["brokers"] == {"up": 2, "down": 0}
    code, out, _ = cli(capfd, "list")
    assert out.splitlines()[1].split()[:4] == ["nolocal", "local", "2", "Running"]
    pgids = LocalStore().require("nolocal").pgids
    code, _, err = cli(capfd, "delete", "nolocal")
    assert code == 0, err
    assert not (short_state / "nolocal").exists()
    assert not [pid for pid in pgids if running(pid)]


def running(pid: int) -> bool:
    """Alive and not a zombie (this test process may be the unreaping parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
