"""What the pod sandbox needs to run a pod's containers (pure, given the
pod, its prepared volumes and a way to read ConfigMaps and Secrets).

The host filesystem stands in for every image: a container's root is this
machine's, its PATH the image default, and, with ``flux_prefix``, the
flux-core installed there appears on PATH, LD_LIBRARY_PATH and PYTHONPATH as
if the image contained it. ``command`` is required: there is no image
ENTRYPOINT to fall back on. Not simulated: liveness and startup probes,
and probes other than exec ones (``probes.py`` runs exec readiness probes),
lifecycle hooks, resource limits, capabilities, seccomp and
AppArmor, read-only root filesystems, ``stdin``/``tty`` containers, sidecar
(restartable init) containers, service links other than the ``kubernetes``
Service's.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.realk8s.components import KUBERNETES_SERVICE_IP
from tests.realk8s.kubelet.environment import IMAGE_PATH, EnvError, container_env, expand

__all__ = ["ConfigError", "base_env", "container_spec", "sandbox_spec"]

KUBERNETES_SERVICE = (KUBERNETES_SERVICE_IP, "443")  # the ClusterIP; no kube-proxy routes it here


class ConfigError(Exception):
    """CreateContainerConfigError: the container cannot be made as asked."""


def base_env(flux_prefix: Path | None, hostname: str) -> dict[str, str]:
    """What the image and runtime put in every container's environment."""
    host, port = KUBERNETES_SERVICE
    env = {
        "PATH": IMAGE_PATH,
        "HOSTNAME": hostname,
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
        "KUBERNETES_SERVICE_PORT_HTTPS": port,
        "KUBERNETES_PORT": f"tcp://{host}:{port}",
        "KUBERNETES_PORT_443_TCP": f"tcp://{host}:{port}",
        "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
        "KUBERNETES_PORT_443_TCP_PORT": port,
        "KUBERNETES_PORT_443_TCP_ADDR": host,
    }
    if flux_prefix is not None:
        sites = sorted(glob.glob(f"{flux_prefix}/lib/python3*/site-packages"))
        env.update(
            PATH=f"{flux_prefix}/bin:{IMAGE_PATH}",
            LD_LIBRARY_PATH=f"{flux_prefix}/lib",
            PYTHONPATH=":".join(sites),
        )
    return env


def _security(
    pod: dict[str, Any], container: dict[str, Any]
) -> tuple[int | None, int | None, list[int]]:
    pod_context = pod["spec"].get("securityContext") or {}
    merged = {**pod_context, **(container.get("securityContext") or {})}
    groups = list(pod_context.get("supplementalGroups") or [])
    if pod_context.get("fsGroup") is not None:
        groups.append(pod_context["fsGroup"])
    return merged.get("runAsUser"), merged.get("runAsGroup"), groups


def container_spec(
    container: dict[str, Any],
    *,
    init: bool,
    pod: dict[str, Any],
    volumes: dict[str, tuple[Path, bool]],
    lookup: Callable[[str, str, str | None], dict[str, str] | None],
    allocatable: dict[str, str],
    base: dict[str, str],
    directory: Path,
    created: Path,
    images: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    """The sandbox's description of one container; ``volumes`` maps a volume
    name to its path and whether it is mounted read-only; ``created`` is where
    the mount points it makes on the host are recorded; ``images`` maps an
    image to what it adds to the host filesystem (container path -> host
    path, mounted read-only): an image stand-in, such as a Flux view image's
    /opt/views made of an installed flux-core (``"*"``: what every image adds)."""
    name = container["name"]
    if not container.get("command"):
        raise ConfigError(
            f"container {name} has no command: the host filesystem stands in for "
            f"{container.get('image')!r} here, and it has no ENTRYPOINT"
        )
    try:
        env = container_env(container, pod, lookup, allocatable, base)
    except EnvError as error:
        raise ConfigError(str(error)) from None
    mounts = []
    for mount in container.get("volumeMounts") or []:
        if mount["name"] not in volumes:
            raise ConfigError(f"volumeMount {mount['name']} names no volume of the pod")
        path, read_only = volumes[mount["name"]]
        sub = mount.get("subPath") or expand(mount.get("subPathExpr") or "", env)
        source = Path(os.path.realpath(path / sub)) if sub else path
        if sub and not source.exists():
            source.mkdir(parents=True, exist_ok=True)  # the kubelet makes a missing subPath
        mounts.append(
            [
                str(source),
                mount["mountPath"].rstrip("/") or "/",
                read_only or bool(mount.get("readOnly")),
                source.is_file(),
            ]
        )
    images = images or {}
    stand_in = {**images.get("*", {}), **images.get(container.get("image", ""), {})}
    # what the image has there (the host's /opt/software, where the view's
    # links point) stands in for what the pod mounts over it: the view's
    # software copied into a volume, which the stand-in views leave empty
    mounts = [m for m in mounts if m[1] not in stand_in]
    for target, source in stand_in.items():
        mounts.append([source, target, True, Path(source).is_file()])
    uid, gid, groups = _security(pod, container)
    directory.mkdir(parents=True, exist_ok=True)
    private = [("tmp", "/tmp", 0o1777), ("var-tmp", "/var/tmp", 0o1777)]
    if not uid:
        private.append(("root", "/root", 0o700))  # an image's own (empty) home, not this machine's
    dirs = []
    for stem, target, mode in private:
        if target not in [m[1] for m in mounts]:
            mounts.append([str(directory / stem), target, False, False])
            dirs.append([str(directory / stem), mode])
    mounts.sort(key=lambda m: (m[1].count("/"), m[1]))  # parents before what is mounted inside them
    termination = directory / "termination-log"
    termination.touch()
    return {
        "name": name,
        "init": init,
        "argv": [expand(arg, env) for arg in container["command"] + (container.get("args") or [])],
        "env": env,
        "cwd": container.get("workingDir") or "/",
        "uid": uid,
        "gid": gid,
        "groups": groups,
        "mounts": mounts,
        "dirs": dirs,
        "log_dir": str(directory),
        "termination_log": str(termination),
        "termination_path": container.get("terminationMessagePath") or "/dev/termination-log",
        "own_pid_namespace": not pod["spec"].get("shareProcessNamespace"),
        "created": str(created),
    }


def sandbox_spec(
    pod: dict[str, Any],
    hostname: str,
    tmpfs: list[tuple[str, str]],
    init: list[dict[str, Any]],
    main: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "hostname": hostname,
        "restart_policy": pod["spec"].get("restartPolicy", "Always"),
        "tmpfs": tmpfs,
        "init": init,
        "main": main,
    }
