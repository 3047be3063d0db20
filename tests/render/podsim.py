"""A pod, simulated: the real generated scripts run in bash, with the pod's
ConfigMap and Secret laid out as the kubelet would mount them, and a stand-in
``flux`` on PATH that records how it was called.

The stand-in controls the flow only (it runs `flux run`'s command, exits like
a broker would); it proves nothing about whether Flux accepts our files.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.processes import default_signals

FAKE_FLUX = textwrap.dedent(
    r'''
    #!/usr/bin/env python3
    """Stand-in flux: records argv and the environment bits we care about."""
    import json, os, signal, sys, time

    def record(**extra):
        entry = {"argv": sys.argv[1:], "pid": os.getpid(), "env": {
            k: os.environ.get(k)
            for k in ("SHLVL", "FROM_PRE", "FLUX_RC_EXTRA", "PATH", "FLUX_URI", "PMI_RANK",
                      "FLUXION_RESOURCE_OPTIONS", "FLUX_SHELL_RC_PATH")}}
        entry.update(extra)
        with open(os.environ["FLUX_RECORD"], "a") as log:
            log.write(json.dumps(entry) + "\n")

    def program_after_options(args):
        """flux start stops at the first non-option: that is the initial program."""
        for i, arg in enumerate(args):
            if not arg.startswith("-"):
                return args[i:]
        return []

    def next_broker_exit():
        """Exit codes for successive program-less brokers, e.g. "1,1,0"."""
        plan = os.environ.get("FAKE_BROKER_EXITS", "0").split(",")
        counter = os.environ["FLUX_RECORD"] + ".brokers"
        n = int(open(counter).read()) if os.path.exists(counter) else 0
        open(counter, "w").write(str(n + 1))
        return int(plan[min(n, len(plan) - 1)])

    def option(args, name):
        prefix = f"-S{name}="
        return next((a[len(prefix):] for a in args if a.startswith(prefix)), None)

    def joined_instance(args, program):
        """FAKE_JOIN_DIR set: behave like brokers of one instance. Each
        broker makes its local-N socket and joins (a file per host); rank 0
        runs its program once FAKE_SIZE have joined, then marks the instance
        done, and the others leave when it is done."""
        join = os.environ["FAKE_JOIN_DIR"]
        host = option(args, "hostname") or os.uname().nodename
        rank = int(host.rsplit("-", 1)[1])
        rundir = option(args, "rundir")
        if rundir:
            open(os.path.join(rundir, f"local-{rank}"), "w").close()
        if host == os.environ.get("FAKE_FAIL_HOST"):
            print(os.environ.get("FAKE_FAIL_MESSAGE", "broker: fatal error"), file=sys.stderr)
            sys.exit(1)
        if host == os.environ.get("FAKE_NO_JOIN"):
            print(f"broker on {host}: still trying to reach its parent", file=sys.stderr)
            time.sleep(600)
        open(os.path.join(join, host), "w").close()
        done = os.path.join(join, "done")
        if program:
            size = int(os.environ["FAKE_SIZE"])
            while len([f for f in os.listdir(join) if f != "done"]) < size:
                time.sleep(0.02)
            import subprocess
            code = subprocess.call(program)
            open(done, "w").close()
            sys.exit(code)
        if rank == 0:  # an interactive instance: up until it is stopped
            signal.signal(signal.SIGTERM, lambda *a: (record(event="SIGTERM"), sys.exit(0)))
            time.sleep(600)
        while not os.path.exists(done):
            time.sleep(0.02)
        sys.exit(0)

    cmd = sys.argv[1]
    args = sys.argv[2:]
    if cmd == "version":
        print(f"commands:    \t\t{os.environ.get('FAKE_FLUX_VERSION', '0.83.0')}")
        print("libflux-core:\t\t0.83.0")
        sys.exit(0)
    if cmd == "start":
        record()
        if os.environ.get("FAKE_BROKER_LOG"):  # what a real broker prints at log-stderr-level 6
            print("<6>broker.info[0]: quorum-full: quorum->run 0.3s", file=sys.stderr)
            print("<4>broker.warning[0]: a warning worth seeing", file=sys.stderr, flush=True)
        program = program_after_options(args)
        if os.environ.get("FAKE_JOIN_DIR"):
            joined_instance(args, program)
        if program:
            os.execvp(program[0], program)
        if os.environ.get("FAKE_BROKER_SLEEP"):
            if os.environ.get("FAKE_BROKER_TERM_HANGS"):
                # a follower whose rank 0 is gone too: flux-core 0.88's broker
                # then takes ~20 s on SIGTERM, waiting for a parent that is gone
                signal.signal(signal.SIGTERM, lambda *a: record(event="SIGTERM"))
            else:
                signal.signal(signal.SIGTERM, lambda *a: (record(event="SIGTERM"), sys.exit(143)))
            record(event="listening")  # the handler is in place: a test may signal now
            time.sleep(float(os.environ["FAKE_BROKER_SLEEP"]))
        sys.exit(next_broker_exit())
    if cmd == "run":
        record()
        i = 0
        with_value = {"-N", "-n", "-c", "-g", "-o", "-S", "-t", "--nodes", "--ntasks"}
        while i < len(args) and args[i].startswith("-"):
            i += 2 if args[i] in with_value else 1
        os.execvp(args[i], args[i:])
    if cmd == "R":
        record()
        gate = os.environ.get("FAKE_R_GATE")
        while gate and not os.path.exists(gate):  # hold the script here until the test opens it
            time.sleep(0.02)
        print(json.dumps({"version": 1, "execution": {"R_lite": [], "fake": args}}))
        sys.exit(0)
    if cmd == "python":  # the wait for the RUN state (local/instance.py): up already
        record()
        sys.exit(0)
    if cmd == "proxy":  # as flux proxy does: the words joined, run by $SHELL -c
        record()
        shell = os.environ.get("SHELL", "/bin/sh")
        os.execvp(shell, [shell, "-c", " ".join(args[1:])] if args[1:] else [shell])
    sys.exit(f"fake flux: unsupported command {cmd}")
    '''
).lstrip()


@dataclass
class Pod:
    """One simulated pod of a rendered MiniCluster."""

    root: Path
    objects: list[dict[str, Any]]
    rank: int
    hostname: str
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.config_dir = self.root / "config"
        self.curve_dir = self.root / "curve"
        self.flux_root = self.root / "flux"
        self.bin = self.root / "bin"
        self.record = self.root / "flux-calls.jsonl"
        config = next(o for o in self.objects if o["kind"] == "ConfigMap")
        secret = next(o for o in self.objects if o["kind"] == "Secret")
        volume = next(
            v
            for v in self._pod()["volumes"]
            if v.get("configMap", {}).get("name") == config["metadata"]["name"]
        )
        # fluxhop's pods lay files out with items; Kubeflow Trainer's are flat
        flat = [{"key": key, "path": key} for key in config["data"]]
        for item in volume["configMap"].get("items") or flat:
            path = self.config_dir / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(config["data"][item["key"]])
            path.chmod(0o444)
        self.curve_dir.mkdir(parents=True, exist_ok=True)
        cert = self.curve_dir / "curve.cert"
        cert.write_bytes(base64.b64decode(secret["data"]["curve.cert"]))
        cert.chmod(0o400)
        # what the flux-view init container leaves behind: a Flux in view/bin
        (self.flux_root / "view" / "bin").mkdir(parents=True, exist_ok=True)
        flux = self.flux_root / "view" / "bin" / "flux"
        flux.write_text(FAKE_FLUX)
        flux.chmod(0o755)
        self.bin.mkdir(exist_ok=True)
        hostname = self.bin / "hostname"
        hostname.write_text(f"#!/bin/sh\necho {self.hostname}\n")
        hostname.chmod(0o755)

    def _pod(self) -> dict[str, Any]:
        kinds = {o["kind"]: o for o in self.objects}
        if "Job" in kinds:
            return kinds["Job"]["spec"]["template"]["spec"]
        jobs = kinds["JobSet"]["spec"]["replicatedJobs"]
        node = next(job for job in jobs if job["name"] == "node")
        return node["template"]["spec"]["template"]["spec"]

    def container_argv(self) -> list[str]:
        """command + args of the Flux container, with the kubelet's $$ -> $ applied."""
        container = next(
            c
            for c in self._pod()["containers"]
            if c.get("command", [""])[-1].endswith("entrypoint.sh")
        )
        argv = [*container["command"], *container.get("args", [])]
        return [word.replace("$$", "$") for word in argv]

    def environment(self) -> dict[str, str]:
        env = {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "HOME": str(self.root),
            "JOB_COMPLETION_INDEX": str(self.rank),
            "FLUXHOP_CONFIG_DIR": str(self.config_dir),
            "FLUXHOP_CURVE_DIR": str(self.curve_dir),
            "FLUXHOP_FLUX_ROOT": str(self.flux_root),
            "FLUX_RECORD": str(self.record),
        }
        env.update(self.env)
        return env

    def _argv(self) -> list[str]:
        argv = self.container_argv()
        # the container runs /etc/fluxhop/config/entrypoint.sh: use our copy
        argv[1] = str(self.config_dir / Path(argv[1]).name)
        return argv

    def run(
        self, timeout: float = 60, user: str | None = None, prefix: tuple[str, ...] = ()
    ) -> subprocess.CompletedProcess[str]:
        """Run the pod's container to its end; ``prefix`` wraps it (e.g. taskset)."""
        argv = [*prefix, *self._argv()]
        if user:
            argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
        return subprocess.run(
            argv, env=self.environment(), capture_output=True, text=True, timeout=timeout
        )

    def start(self) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self._argv(),
            env=self.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=default_signals,  # bash cannot trap a signal ignored at its start
        )

    def calls(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    @staticmethod
    def terminate(process: subprocess.Popen[str]) -> None:
        os.kill(process.pid, signal.SIGTERM)
