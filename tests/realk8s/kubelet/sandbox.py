"""The pod sandbox: PID 1 of one pod, running its containers.

The kubelet starts it as ``ip netns exec <pod netns> unshare --uts --ipc
--pid --mount --fork --kill-child --mount-proc -- python -m
tests.realk8s.kubelet.sandbox SPEC``, so it owns the pod's network, UTS, IPC,
PID and mount namespaces: ``ip netns exec`` puts the pod's /etc/hosts and
/etc/resolv.conf in place, and whatever runs in the pod ends when it does.

It sets the host name, mounts the pod's /dev/shm and the tmpfs of memory
emptyDirs, runs the init containers one after another, then the containers
together, restarts them as ``restartPolicy`` says (with the kubelet's
doubling back-off), and relays each container's stdout and stderr into its
log file in the CRI format containerd writes (``<RFC3339Nano> stdout|stderr
F|P <text>``). Each container gets its own mount namespace (the volume mounts,
private /tmp and /var/tmp, a /dev of its own with the pod's /dev/shm and the
termination-message file) and, unless the pod shares its process namespace,
its own PID namespace whose PID 1 is the container's process, so that the
container ends with it, as under a real runtime.

It tells the kubelet what happens on stdout, one JSON object a line:
``{"event": "started", "name", "pid", "restarts", "at"}`` (``pid`` in the
pod's PID namespace), ``{"event": "exited", "name", "code", "signal",
"reason", "message", "at"}``, and ``{"event": "done"}`` last. SIGTERM (the
pod is being deleted) stops restarts and is passed to every running
container; the kubelet sends SIGKILL to what is left when the grace period
ends. Single-threaded (one selector loop), because it forks.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import pwd
import selectors
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any

LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWPID = 0x20000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
PARTIAL = 16 * 1024  # a longer line is split into P(artial) records, as containerd does
BACKOFF_START, BACKOFF_MAX = 1.0, 10.0  # the kubelet's is 10 s doubling to 5 min; shorter here


def _mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    def b(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    if LIBC.mount(b(source), b(target), b(fstype), flags, b(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source or fstype} on {target}: {os.strerror(err)}")


def _timestamp() -> str:
    ns = time.time_ns()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9)) + f".{ns % 10**9:09d}Z"


def _emit(event: dict[str, Any]) -> None:
    # the kubelet may be gone: the pod runs on, as under a real runtime
    with contextlib.suppress(OSError):
        os.write(1, (json.dumps({**event, "at": _timestamp()}) + "\n").encode())


# ---------------------------------------------------------------- inside a container (after fork)
def _container_mounts(c: dict[str, Any]) -> None:
    """Runs in the container's new mount namespace, before exec."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    # open every source first: a later mount may hide it (a /tmp source, /dev)
    sources = [os.open(m[0], os.O_PATH) for m in c["mounts"]]
    devices = [os.open(f"/dev/{d}", os.O_PATH) for d in DEVICES]
    shm = os.open("/dev/shm", os.O_PATH)
    termination = os.open(c["termination_log"], os.O_PATH)
    _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=65536k")
    for name, fd in zip(DEVICES, devices, strict=True):
        open(f"/dev/{name}", "x").close()
        _mount(f"/proc/self/fd/{fd}", f"/dev/{name}", None, MS_BIND, None)
    for name in ("pts", "shm", "mqueue"):
        os.mkdir(f"/dev/{name}")
    _mount(
        "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"
    )
    os.symlink("pts/ptmx", "/dev/ptmx")
    _mount(f"/proc/self/fd/{shm}", "/dev/shm", None, MS_BIND, None)
    for link, to in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(to, f"/dev/{link}")
    for (_, target, read_only, is_file), fd in zip(c["mounts"], sources, strict=True):
        if not os.path.lexists(target):  # a mount point the image lacks (or inside another mount)
            _make_mount_point(target, is_file, c["created"])
        _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC, None)
        if read_only:
            _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
    path = c["termination_path"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path):
        open(path, "a").close()
    _mount(f"/proc/self/fd/{termination}", path, None, MS_BIND, None)
    for fd in [*sources, *devices, shm, termination]:
        os.close(fd)


def _make_mount_point(target: str, is_file: bool, record: str) -> None:
    """Create a missing mount point and the directories above it. The host
    filesystem stands in for the image, so what is made here is made on the
    host: each path is recorded (``record``) for the test cluster to remove."""
    missing = [target]
    while not os.path.lexists(os.path.dirname(missing[-1])):
        missing.append(os.path.dirname(missing[-1]))
    with open(record, "a") as f:
        for path in reversed(missing):
            try:
                open(path, "x").close() if is_file and path == target else os.mkdir(path)
            except FileExistsError:  # another container of the node made it meanwhile
                continue
            f.write(path + "\n")


def _become(c: dict[str, Any]) -> dict[str, str]:
    env = dict(c["env"])
    uid, gid = c["uid"], c["gid"]
    if uid is not None or gid is not None or c["groups"]:
        os.setgroups(c["groups"])
        os.setgid(gid if gid is not None else 0)
    if uid is not None:
        os.setuid(uid)
    if "HOME" not in env:
        try:
            env["HOME"] = pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:
            env["HOME"] = "/"
    return env


def _exec(c: dict[str, Any], report: int) -> None:
    """The container's process: becomes ``argv`` or reports why it could not."""
    try:
        if c["own_pid_namespace"]:
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        env = _become(c)
        os.chdir(c["cwd"])
        os.execvpe(c["argv"][0], c["argv"], env)
    except OSError as error:
        reason = error.strerror or str(error)
        if error.errno == errno.ENOENT and error.filename is None:
            reason = f'exec: "{c["argv"][0]}": executable file not found in $PATH'
        os.write(report, reason.encode()[:4000])
    except BaseException as error:  # anything at all: the container must not run sandbox code
        os.write(report, repr(error).encode()[:4000])
    os._exit(128)


def _child(c: dict[str, Any], stdout: int, stderr: int, report: int, pid_pipe: int) -> None:
    """Runs in the forked child; never returns."""
    try:
        os.setsid()
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        flags = CLONE_NEWNS | (CLONE_NEWPID if c["own_pid_namespace"] else 0)
        if LIBC.unshare(flags) != 0:
            raise OSError(ctypes.get_errno(), "unshare")
        _container_mounts(c)
        if not c["own_pid_namespace"]:
            os.write(pid_pipe, str(os.getpid()).encode())
            _exec(c, report)
        pid = os.fork()  # the container's PID 1
        if pid == 0:
            _exec(c, report)
        os.write(pid_pipe, str(pid).encode())
        os.close(report)
        while True:
            _, status = os.waitpid(pid, 0)
            if os.WIFEXITED(status):
                os._exit(os.WEXITSTATUS(status))
            if os.WIFSIGNALED(status):
                os._exit(128 + os.WTERMSIG(status))
    except BaseException as error:
        try:
            os.write(report, f"container setup: {error!r}".encode()[:4000])
        finally:
            os._exit(128)


# ---------------------------------------------------------------- the sandbox itself
@dataclass
class Running:
    spec: dict[str, Any]
    pid: int  # the direct child (the container's PID 1, or its parent in the pod namespace)
    target: int  # the container's PID 1, to signal
    log: Any
    report: int
    streams: dict[int, str] = field(default_factory=dict)  # fd -> stdout | stderr
    pending: dict[str, bytes] = field(default_factory=dict)  # stream -> an unfinished line


def _write(run: Running, stream: str, line: bytes, tag: str) -> None:
    while len(line) > PARTIAL:
        run.log.write(f"{_timestamp()} {stream} P ".encode() + line[:PARTIAL] + b"\n")
        line = line[PARTIAL:]
    run.log.write(f"{_timestamp()} {stream} {tag} ".encode() + line + b"\n")


def _record(run: Running, stream: str, data: bytes, final: bool) -> None:
    """Log the complete lines of ``data``; hold back an unfinished last line
    (whole records of it once it is long) unless the stream has ended."""
    *lines, tail = (run.pending.pop(stream, b"") + data).split(b"\n")
    for line in lines:
        _write(run, stream, line, "F")
    if final and tail:
        _write(run, stream, tail, "F")
    elif tail:
        while len(tail) >= PARTIAL:
            _write(run, stream, tail[:PARTIAL], "P")
            tail = tail[PARTIAL:]
        if tail:
            run.pending[stream] = tail
    run.log.flush()


class Sandbox:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.selector = selectors.DefaultSelector()
        self.wakeup = -1
        self.running: dict[int, Running] = {}
        self.stopping = False
        self.restarts: dict[str, int] = {}
        self.backoff: dict[str, float] = {}
        self.due: dict[str, float] = {}  # container -> when to restart it
        self.codes: dict[str, int] = {}  # container -> its last exit code

    def _read(self, fd: int, run: Running) -> None:
        stream = run.streams[fd]
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            raise
        except OSError:
            data = b""
        _record(run, stream, data, final=not data)
        if not data:
            self.selector.unregister(fd)
            os.close(fd)
            del run.streams[fd]

    def start(self, c: dict[str, Any]) -> None:
        restarts = self.restarts.get(c["name"], 0)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        report_r, report_w = os.pipe2(os.O_CLOEXEC)
        pid_r, pid_w = os.pipe2(os.O_CLOEXEC)
        for path, mode in c["dirs"]:
            os.makedirs(path, exist_ok=True)
            os.chmod(path, mode)
        pid = os.fork()
        if pid == 0:
            _child(c, out_w, err_w, report_w, pid_w)
        for fd in (out_w, err_w, report_w, pid_w):
            os.close(fd)
        target = int(os.read(pid_r, 32) or pid)
        os.close(pid_r)
        log = open(os.path.join(c["log_dir"], f"{restarts}.log"), "ab")  # noqa: SIM115
        run = Running(c, pid, target, log, report_r)
        for fd, stream in ((out_r, "stdout"), (err_r, "stderr")):
            run.streams[fd] = stream
            self.selector.register(fd, selectors.EVENT_READ, run)
        self.running[pid] = run
        _emit({"event": "started", "name": c["name"], "pid": target, "restarts": restarts})

    def _exited(self, run: Running, status: int) -> None:
        code, sig = os.waitstatus_to_exitcode(status), 0
        if code < 0:  # the direct child itself was killed (shared PID namespace)
            sig, code = -code, 128 - code
        if not run.spec["own_pid_namespace"]:  # its processes end with it, as in a container
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pid, signal.SIGKILL)
        for fd in list(run.streams):  # what is left in the pipes belongs to this run
            os.set_blocking(fd, False)  # a process that escaped must not hold the pod up
            while fd in run.streams:
                try:
                    self._read(fd, run)
                except BlockingIOError:
                    _record(run, run.streams[fd], b"", final=True)
                    self.selector.unregister(fd)
                    os.close(fd)
                    del run.streams[fd]
        problem = os.read(run.report, 4096).decode(errors="replace")
        os.close(run.report)
        run.log.close()
        name = run.spec["name"]
        reason = "StartError" if problem else "Completed" if code == 0 else "Error"
        _emit(
            {
                "event": "exited",
                "name": name,
                "code": code,
                "signal": sig,
                "reason": reason,
                "message": problem,
            }
        )
        self.codes[name] = code
        if self._restarts(run.spec, code) and not self.stopping:
            self.restarts[name] = self.restarts.get(name, 0) + 1
            delay = self.backoff.get(name, BACKOFF_START)
            self.backoff[name] = min(delay * 2, BACKOFF_MAX)
            self.due[name] = time.monotonic() + delay

    def _restarts(self, c: dict[str, Any], code: int) -> bool:
        policy = self.spec["restart_policy"]
        if c["init"]:  # init containers run to completion, retried on failure
            return code != 0 and policy != "Never"
        return policy == "Always" or (policy == "OnFailure" and code != 0)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            run = self.running.pop(pid, None)
            if run is not None:  # else an orphan the pod's PID 1 inherited
                self._exited(run, status)

    def _settle(self) -> None:
        """Serve pipes, signals and restarts until nothing runs or is due."""
        while self.running or self.due:
            timeout = None
            if self.due:
                timeout = max(0.0, min(self.due.values()) - time.monotonic())
            for key, _ in self.selector.select(timeout):
                if key.fd == self.wakeup:
                    os.read(self.wakeup, 4096)
                else:
                    self._read(key.fd, key.data)
            self._reap()
            if self.stopping:
                self.due.clear()
            for name, when in list(self.due.items()):
                if when <= time.monotonic():
                    del self.due[name]
                    every = [*self.spec["init"], *self.spec["main"]]
                    self.start(next(c for c in every if c["name"] == name))

    def stop(self, *_: Any) -> None:
        self.stopping = True
        for run in self.running.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(run.target, signal.SIGTERM)

    def run(self) -> int:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.wakeup = wake_r
        self.selector.register(wake_r, selectors.EVENT_READ)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        socket.sethostname(self.spec["hostname"])
        _mount("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=65536k")
        for path, size in self.spec["tmpfs"]:
            options = "mode=1777" + (f",size={size}" if size else "")
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, options)
        for c in self.spec["init"]:
            if self.stopping:
                break
            self.start(c)
            self._settle()  # restarts on failure unless restartPolicy is Never
            if self.codes.get(c["name"]) != 0:
                break
        else:
            if not self.stopping:
                for c in self.spec["main"]:
                    self.start(c)
                self._settle()
        _emit({"event": "done"})
        return 0


def main() -> int:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    return Sandbox(spec).run()


if __name__ == "__main__":
    sys.exit(main())
