"""One pod on the node, from the scheduler's binding to the kubelet's last word.

A ``PodWorker`` thread per pod, as the kubelet has: it prepares the volumes
and the network, starts the pod sandbox, turns what the sandbox reports into
status patches (and into the files the kubelet's HTTPS server reads for
logs and exec), and when the pod is deleted stops it within its grace
period (SIGTERM, then SIGKILL), writes the terminal phase and confirms the
deletion (DELETE with grace period 0 and the pod's UID as precondition), as
a real kubelet does; the Job controller's finalizer is left to the Job
controller. Until it can be set up, a pod waits in ContainerCreating (a
ConfigMap not there yet, the Node authorizer not yet knowing the pod) or
CreateContainerConfigError, and the worker tries again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2 as httpx

from tests.realk8s.api import ApiError
from tests.realk8s.kubelet import volumes as vol
from tests.realk8s.kubelet.containers import ConfigError, base_env, container_spec, sandbox_spec
from tests.realk8s.kubelet.network import hosts_file, pod_hostname, resolv_conf
from tests.realk8s.kubelet.probes import ReadinessProber
from tests.realk8s.kubelet.status import Container, now, pod_status

if TYPE_CHECKING:
    from tests.realk8s.kubelet.node import Kubelet

__all__ = ["PodWorker", "host_pid"]

RETRY = 1.0  # seconds between set-up attempts of a pod that cannot start yet
STATUS_ATTEMPTS = 90  # about 3 minutes of an API server that does not answer
SANDBOX = Path(__file__).with_name("sandbox.py")
CREATED = "created-paths"  # the mount points the node's containers made on the host  # run as a script: the standard library only


def host_pid(root: int, pod_pid: int) -> int | None:
    """The host PID of the process whose PID in the pod's namespace is
    ``pod_pid``, searched among the descendants of the sandbox ``root``."""
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/status") as f:
                ns = next((line.split()[1:] for line in f if line.startswith("NSpid:")), [])
            if len(ns) > 1 and int(ns[1]) == pod_pid:
                return pid
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    todo += [int(child) for child in f.read().split()]
        except (OSError, ValueError):
            continue
    return None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data))
    os.replace(temporary, path)


class PodWorker(threading.Thread):
    def __init__(self, kubelet: Kubelet, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        super().__init__(name=f"pod {meta['namespace']}/{meta['name']}", daemon=True)
        self.kubelet = kubelet
        self.pod = pod
        self.uid: str = meta["uid"]
        self.namespace: str = meta["namespace"]
        self.name: str = meta["name"]
        self.path = f"/api/v1/namespaces/{self.namespace}/pods/{self.name}"
        self.directory = kubelet.root / "pods" / f"{self.namespace}_{self.name}"
        self.lock = threading.RLock()
        self.containers: dict[str, Container] = {}
        # what a container waits for before it starts, as the kubelet says it
        first = "PodInitializing" if pod["spec"].get("initContainers") else "ContainerCreating"
        for key, init in (("initContainers", True), ("containers", False)):
            for c in pod["spec"].get(key) or []:
                self.containers[c["name"]] = Container(
                    c["name"], c.get("image", ""), init=init, reason=first,
                    probed=not init and "exec" in (c.get("readinessProbe") or {}),
                )  # fmt: skip
        self.probers: dict[str, ReadinessProber] = {}
        self.ip = ""
        self.slot: int | None = None
        self.sandbox: subprocess.Popen[bytes] | None = None
        self.sandbox_pid: int | None = None
        self.host_pids: dict[str, int] = {}
        self.specs: dict[str, dict[str, Any]] = {}
        self.start_time = now()
        self.deleting = threading.Event()  # deletionTimestamp seen
        self.gone = threading.Event()  # the pod is no longer in the API
        self.finished = threading.Event()
        self.final_patched = False  # the terminal status is sent (under self.lock)

    # --- what the watch tells us ------------------------------------------------
    def update(self, pod: dict[str, Any]) -> None:
        with self.lock:
            self.pod = pod
            deleted = bool(pod["metadata"].get("deletionTimestamp")) and not self.deleting.is_set()
            if deleted:
                self.deleting.set()
            ended = self.final_patched  # then _finish has not seen the deletion: confirm it here
        if deleted and ended:
            threading.Thread(target=self._confirm_deletion, daemon=True).start()
        elif deleted:
            grace = pod["metadata"].get("deletionGracePeriodSeconds", 30)
            threading.Thread(target=self._stop, args=(grace,), daemon=True).start()

    def removed(self) -> None:
        """The pod is gone from the API (a forced deletion): stop it now (on a
        thread of its own: the node's watch goes on meanwhile)."""
        self.gone.set()
        self.deleting.set()
        threading.Thread(target=self._stop, args=(0,), daemon=True).start()

    # --- setting up -----------------------------------------------------------------
    def _lookup_object(self, kind: str, name: str) -> dict[str, bytes] | None:
        resource = "configmaps" if kind == "ConfigMap" else "secrets"
        obj = self.kubelet.api.find(f"/api/v1/namespaces/{self.namespace}/{resource}/{name}")
        if obj is None:
            return None
        return vol.decode_config_map(obj) if kind == "ConfigMap" else vol.decode_secret(obj)

    def _claim_path(self, name: str) -> str:
        """The path of the PersistentVolume bound to claim ``name`` (what the
        Node authorizer lets a kubelet read: its pods' claims and their volumes)."""
        claim = self.kubelet.api.find(
            f"/api/v1/namespaces/{self.namespace}/persistentvolumeclaims/{name}"
        )
        if claim is None:
            raise vol.VolumeError(f"persistentvolumeclaim {name!r} not found")
        bound = (claim.get("spec") or {}).get("volumeName")
        if (claim.get("status") or {}).get("phase") != "Bound" or not bound:
            raise vol.VolumeError(f"persistentvolumeclaim {name!r} is not bound yet")
        source = self.kubelet.api.get(f"/api/v1/persistentvolumes/{bound}")["spec"]
        path = (source.get("hostPath") or source.get("local") or {}).get("path")
        if not path:
            raise vol.VolumeError(
                f"persistentvolume {bound}: only hostPath and local are simulated"
            )
        return str(path)

    def _lookup_env(self, kind: str, name: str, _key: str | None) -> dict[str, str] | None:
        data = self._lookup_object(kind, name)
        return None if data is None else {k: v.decode(errors="replace") for k, v in data.items()}

    def _token(self, account: str, audiences: list[str], seconds: int) -> str:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": audiences or None,
                "expirationSeconds": seconds,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": self.name,
                    "uid": self.uid,
                },
            },
        }
        path = f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{account}/token"
        return str(self.kubelet.api.create(path, body)["status"]["token"])

    def _prepare(self) -> dict[str, Any]:
        """Volumes and container specs; raises what keeps the pod waiting."""
        pod, allocatable = self.pod, self.kubelet.allocatable
        planned = vol.plan(pod, self._lookup_object, self._token, allocatable, self._claim_path)
        fs_group = (pod["spec"].get("securityContext") or {}).get("fsGroup")
        shutil.rmtree(self.directory / "volumes", ignore_errors=True)
        paths, tmpfs = {}, []
        for volume in planned:
            path = vol.materialize(volume, self.directory / "volumes" / volume.name, fs_group)
            paths[volume.name] = (path, volume.read_only)
            if volume.tmpfs is not None:
                tmpfs.append((str(path), volume.tmpfs))
        hostname, fqdn = pod_hostname(pod, self.kubelet.cluster_domain)
        uts = fqdn if pod["spec"].get("setHostnameAsFQDN") else hostname
        base = base_env(self.kubelet.flux_prefix, uts)
        status_pod = {
            **pod,
            "status": {
                **(pod.get("status") or {}),
                "podIP": self.ip,
                "podIPs": [{"ip": self.ip}],
                "hostIP": self.kubelet.host_ip,
                "hostIPs": [{"ip": self.kubelet.host_ip}],
            },
        }
        specs = {}
        for key, init in (("initContainers", True), ("containers", False)):
            specs[key] = [
                container_spec(
                    c,
                    init=init,
                    pod=status_pod,
                    volumes=paths,
                    lookup=self._lookup_env,
                    allocatable=allocatable,
                    base=base,
                    directory=self.directory / c["name"],
                    created=self.kubelet.root / CREATED,
                    images=self.kubelet.config.images,
                )
                for c in pod["spec"].get(key) or []
            ]
        for spec in specs["initContainers"] + specs["containers"]:
            self.specs[spec["name"]] = spec
        return sandbox_spec(pod, uts, tmpfs, specs["initContainers"], specs["containers"])

    def _waiting(self, reason: str, message: str) -> None:
        with self.lock:
            for c in self.containers.values():
                if c.state == "waiting":
                    c.reason, c.message = reason, message
        self.patch_status()

    def _set_up(self) -> dict[str, Any] | None:
        """Retry until the pod can start, or it is deleted (then None)."""
        while not self.deleting.is_set():
            try:
                if self.slot is None:
                    self.slot, self.ip = self.kubelet.network.create()
                    domain = self.kubelet.cluster_domain
                    self.kubelet.network.write_files(
                        self.slot,
                        {
                            "hosts": hosts_file(self.pod, self.ip, domain),
                            "resolv.conf": resolv_conf(self.pod, self.kubelet.dns, domain),
                        },
                    )
                return self._prepare()
            except (vol.VolumeError, ApiError) as error:
                self._waiting("ContainerCreating", str(error))
            except ConfigError as error:
                self._waiting("CreateContainerConfigError", str(error))
            self.deleting.wait(RETRY)
        return None

    # --- running ----------------------------------------------------------------------
    def run(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self.patch_status()
            spec = self._set_up()
            if spec is not None:
                self._launch(spec)
                self._follow()
        except Exception as error:  # a kubelet bug must not pass silently
            print(
                f"kubelet {self.kubelet.node}: pod {self.name}: {error!r}",
                file=sys.stderr,
                flush=True,
            )
            raise
        finally:
            if self.slot is not None:
                self.kubelet.network.destroy(self.slot)
            self.finished.set()
            self._finish()

    def _launch(self, spec: dict[str, Any]) -> None:
        spec_path = self.directory / "sandbox.json"
        spec_path.write_text(json.dumps(spec))
        netns = self.kubelet.network.netns(self.slot or 0)
        argv = [
            "ip",
            "netns",
            "exec",
            netns,
            "unshare",
            "--uts",
            "--ipc",
            "--pid",
            "--mount",
            "--fork",
            "--kill-child",
            "--mount-proc",
            "--",
            sys.executable,
            str(SANDBOX),
            str(spec_path),
        ]
        with open(self.directory / "sandbox.log", "ab") as log:
            self.sandbox = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        self.patch_status()

    def _follow(self) -> None:
        assert self.sandbox is not None and self.sandbox.stdout is not None
        for line in self.sandbox.stdout:
            event = json.loads(line)
            self._on(event)
        self.sandbox.wait()

    def _on(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "done":
            return
        name = event["name"]
        with self.lock:
            c = self.containers[name]
            directory = self.directory / name
            if kind == "started":
                if self.sandbox_pid is None and self.sandbox is not None:
                    self.sandbox_pid = _child_of(self.sandbox.pid)
                found = (
                    host_pid(self.sandbox_pid or self.sandbox.pid, event["pid"])
                    if self.sandbox
                    else None
                )
                if found:
                    self.host_pids[name] = found
                if c.restart_count or event["restarts"]:
                    c.last_state = {"terminated": c.api()["state"].get("terminated", {})}
                c.state, c.reason, c.message = "running", "", ""
                c.restart_count = event["restarts"]
                c.container_id = f"fluxhop-sim://{self.uid}-{name}-{event['restarts']}"
                c.started_at = event["at"][:19] + "Z"
                self._state_file(c, directory, running=True)
                if c.probed:
                    self._probe(c)
            elif kind == "exited":
                c.state, c.exit_code, c.signal = "terminated", event["code"], event["signal"]
                c.reason, c.finished_at = event["reason"], event["at"][:19] + "Z"
                c.message = event["message"] or self._termination_message(name, c)
                self.host_pids.pop(name, None)
                self._state_file(c, directory, running=False)
        self.patch_status()

    def _probe(self, c: Container) -> None:
        """A started container is not ready until its readinessProbe passes;
        its prober starts with it (and goes on across restarts)."""
        c.probe_ready = False
        prober = self.probers.get(c.name)
        if prober is not None:
            prober.ready = False
            return
        spec = next(x for x in self.pod["spec"]["containers"] if x["name"] == c.name)

        def running() -> int | None:
            with self.lock:
                return self.host_pids.get(c.name) if c.state == "running" else None

        def report(ready: bool) -> None:
            with self.lock:
                c.probe_ready = ready
            self.patch_status()

        prober = ReadinessProber(
            f"{self.name}/{c.name}", spec["readinessProbe"], self.specs[c.name],
            running, report, self.finished,
        )  # fmt: skip
        self.probers[c.name] = prober
        prober.start()

    def _termination_message(self, name: str, c: Container) -> str:
        spec = next(
            (
                x
                for x in [
                    *(self.pod["spec"].get("initContainers") or []),
                    *self.pod["spec"]["containers"],
                ]
                if x["name"] == name
            ),
            {},
        )
        path = self.directory / name / "termination-log"
        text = path.read_text(errors="replace")[:4096] if path.exists() else ""
        if (
            not text
            and c.exit_code
            and spec.get("terminationMessagePolicy") == "FallbackToLogsOnError"
        ):
            log = self.directory / name / f"{c.restart_count}.log"
            lines = log.read_text(errors="replace").splitlines()[-80:] if log.exists() else []
            text = "\n".join(line.split(" ", 3)[-1] for line in lines)[-2048:]
        return text

    def _state_file(self, c: Container, directory: Path, *, running: bool) -> None:
        spec = self.specs[c.name]
        previous = directory / f"{c.restart_count - 1}.log" if c.restart_count else None
        _write_json(
            directory / "state.json",
            {
                "id": c.container_id,
                "running": running,
                "pid": self.host_pids.get(c.name, 0),
                "env": [f"{k}={v}" for k, v in spec["env"].items()],
                "cwd": spec["cwd"],
                "uid": spec["uid"],
                "gid": spec["gid"],
                "log": str(directory / f"{c.restart_count}.log"),
                "previousLog": str(previous) if previous else "",
            },
        )

    # --- stopping ----------------------------------------------------------------------
    def _stop(self, grace: int) -> None:
        """SIGTERM to the containers, SIGKILL once ``grace`` seconds are up.
        A pod still being set up has no sandbox yet: wait for it (or for the
        set-up to give up, which it does once the pod is deleting)."""
        deadline = time.monotonic() + grace
        while not self.finished.is_set():
            with self.lock:
                if self.sandbox is not None and self.sandbox_pid is None:
                    self.sandbox_pid = _child_of(self.sandbox.pid)
                if self.sandbox_pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(
                            self.sandbox_pid, signal.SIGTERM
                        )  # no restarts; it passes SIGTERM on
                    break
            if self.finished.wait(0.05) or time.monotonic() > deadline:
                break
        if self.finished.wait(max(0.0, deadline - time.monotonic())):
            return
        with self.lock:  # exits are reported under this lock: no pid here has been reaped
            for pid in self.host_pids.values():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if not self.finished.wait(10) and self.sandbox is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.sandbox.pid, signal.SIGKILL)  # --kill-child takes the pod with it

    def _finish(self) -> None:
        """The terminal status, and for a deleted pod the confirmation of its
        deletion (here, or by update() when the deletion comes after)."""
        with self.lock:
            for c in self.containers.values():
                if c.state == "running":  # its end went unreported: the kubelet cannot know it
                    c.reason, c.state, c.exit_code, c.finished_at = (
                        "ContainerStatusUnknown",
                        "terminated",
                        137,
                        now(),
                    )
        if self.gone.is_set():
            self._forget()
            return
        self.patch_status(final=True)
        with self.lock:
            self.final_patched = True
            confirm = self.deleting.is_set()
        if confirm:
            self._confirm_deletion()

    def _confirm_deletion(self) -> None:
        """The kubelet's last word on a deleted pod: DELETE with grace period 0
        (the pod's UID as precondition); the API server then removes it."""
        with contextlib.suppress(ApiError):
            self.kubelet.api.delete(
                self.path, {"gracePeriodSeconds": 0, "preconditions": {"uid": self.uid}}
            )
        self._forget()

    def _forget(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
        self.kubelet.forget(self.uid)

    def patch_status(self, final: bool = False) -> None:
        """Send the status as it is now; while the API server cannot be reached
        (restarting), try again, as the kubelet's status manager does."""
        delay = 0.2
        for _ in range(STATUS_ATTEMPTS):
            with self.lock:
                status = pod_status(
                    self.pod,
                    list(self.containers.values()),
                    pod_ip=self.ip,
                    host_ip=self.kubelet.host_ip,
                    start_time=self.start_time,
                    sandbox_ready=self.sandbox is not None and not final,
                )
                if final and status["phase"] not in ("Succeeded", "Failed"):
                    status["phase"] = "Failed"  # a pod that ends before it ran: terminal anyway
                try:
                    self.pod = self.kubelet.api.patch(self.path + "/status", {"status": status})
                    return
                except ApiError as error:
                    if error.status == 404:
                        return  # the pod is gone
                    if error.status < 500 and error.status != 429:
                        print(
                            f"kubelet: status of {self.name}: {error}", file=sys.stderr, flush=True
                        )
                        return
                except httpx.TransportError:
                    pass
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
        print(
            f"kubelet: status of {self.name}: the API server did not answer",
            file=sys.stderr,
            flush=True,
        )


def _child_of(pid: int) -> int | None:
    """The sandbox: the one child of ``unshare --fork``."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = f.read().split()
    except OSError:
        return None
    return int(children[0]) if children else None
