"""Pod volumes, as the kubelet's volume plugins make them.

``plan`` turns a pod's ``volumes`` into what the node prepares (pure, given
a way to read ConfigMaps and Secrets and to request tokens); ``materialize``
writes it. ConfigMap, Secret, downward API and projected volumes are written
the way the kubelet's AtomicWriter writes them: the files in a timestamped
directory, ``..data`` pointing at it, and each top-level name a symlink
through ``..data``; an ``fsGroup`` owns them and, as the kubelet's
SetVolumeOwnership does, gets read access (0440 added to each mode).
emptyDir is a directory (tmpfs for ``medium: Memory``, mounted by the pod
sandbox), hostPath the host's own path, and a persistentVolumeClaim the
path of the PersistentVolume bound to it (``hostPath`` or ``local``: the
volume is already on the node, as a Lustre mount or a local disk is; until
the claim is bound the pod waits, as the kubelet's volume manager waits).

Not simulated: updates of ConfigMap and Secret volumes while the pod runs,
attached or provisioned persistent volumes, CSI, ephemeral volumes, image
volumes.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.realk8s.kubelet.environment import EnvError, field_value, resource_value

__all__ = ["Volume", "VolumeError", "decode_config_map", "decode_secret", "materialize", "plan"]

DEFAULT_MODE = 0o644


class VolumeError(Exception):
    """A volume the kubelet cannot set up: the pod stays in ContainerCreating."""


@dataclass
class Volume:
    name: str
    kind: str  # emptyDir | files | hostPath
    files: list[tuple[str, bytes, int]] = field(default_factory=list)
    tmpfs: str | None = None  # emptyDir medium Memory: the size ("" = the kernel's default)
    host_path: str | None = None
    read_only: bool = False


Lookup = Callable[[str, str], dict[str, bytes] | None]
TokenRequest = Callable[[str, list[str], int], str]
ClaimPath = Callable[[str], str]  # a claim's bound volume's path on the node (or VolumeError)


def _items(
    data: dict[str, bytes], source: dict[str, Any], what: str, default_mode: int
) -> list[tuple[str, bytes, int]]:
    items = source.get("items")
    if not items:
        return [(key, value, default_mode) for key, value in sorted(data.items())]
    out = []
    for item in items:
        if item["key"] not in data:
            if source.get("optional"):
                continue
            raise VolumeError(f"{what}: configuration key {item['key']!r} not found")
        out.append((item["path"], data[item["key"]], item.get("mode", default_mode)))
    return out


def _object_files(
    kind: str, source: dict[str, Any], lookup: Lookup, default_mode: int
) -> list[tuple[str, bytes, int]]:
    name = source.get("name") or source.get("secretName") or ""
    data = lookup(kind, name)
    what = f"{kind.lower()} {name!r}"
    if data is None:
        if source.get("optional"):
            return []
        raise VolumeError(f'{kind.lower()} "{name}" not found')
    return _items(data, source, what, default_mode)


def _downward_files(
    items: list[dict[str, Any]], pod: dict[str, Any], allocatable: dict[str, str], default_mode: int
) -> list[tuple[str, bytes, int]]:
    out = []
    containers = {c["name"]: c for c in pod["spec"].get("containers", [])}
    for item in items:
        try:
            if "fieldRef" in item:
                value = field_value(item["fieldRef"]["fieldPath"], pod)
            else:
                ref = item["resourceFieldRef"]
                container = containers.get(ref.get("containerName", ""), {})
                value = resource_value(ref, container, allocatable)
        except EnvError as error:
            raise VolumeError(str(error)) from None
        out.append((item["path"], value.encode(), item.get("mode", default_mode)))
    return out


def _projected(
    volume: dict[str, Any],
    pod: dict[str, Any],
    lookup: Lookup,
    token: TokenRequest,
    allocatable: dict[str, str],
) -> list[tuple[str, bytes, int]]:
    projected = volume["projected"]
    mode = projected.get("defaultMode", DEFAULT_MODE)
    files: list[tuple[str, bytes, int]] = []
    for source in projected.get("sources") or []:
        if "configMap" in source:
            files += _object_files("ConfigMap", source["configMap"], lookup, mode)
        elif "secret" in source:
            files += _object_files("Secret", source["secret"], lookup, mode)
        elif "downwardAPI" in source:
            files += _downward_files(
                source["downwardAPI"].get("items") or [], pod, allocatable, mode
            )
        elif "serviceAccountToken" in source:
            ask = source["serviceAccountToken"]
            audiences = [ask["audience"]] if ask.get("audience") else []
            jwt = token(
                pod["spec"].get("serviceAccountName") or "default",
                audiences,
                ask.get("expirationSeconds", 3600),
            )
            files.append((ask["path"], jwt.encode(), mode))
        else:
            raise VolumeError(
                f"volume {volume['name']}: projected source {sorted(source)} is not simulated"
            )
    return files


def _no_claims(name: str) -> str:
    raise VolumeError(f"persistentVolumeClaim {name}: no claims on this node")


def plan(
    pod: dict[str, Any],
    lookup: Lookup,
    token: TokenRequest,
    allocatable: dict[str, str],
    claim_path: ClaimPath = _no_claims,
) -> list[Volume]:
    """What the node must prepare for each of the pod's volumes."""
    out = []
    for volume in pod["spec"].get("volumes") or []:
        name = volume["name"]
        if "emptyDir" in volume:
            empty = volume["emptyDir"] or {}
            tmpfs = empty.get("sizeLimit", "") if empty.get("medium") == "Memory" else None
            out.append(Volume(name, "emptyDir", tmpfs=tmpfs))
        elif "hostPath" in volume:
            out.append(Volume(name, "hostPath", host_path=volume["hostPath"]["path"]))
        elif "persistentVolumeClaim" in volume:
            source = volume["persistentVolumeClaim"]
            out.append(Volume(name, "hostPath", host_path=claim_path(source["claimName"]),
                              read_only=bool(source.get("readOnly"))))  # fmt: skip
        elif "configMap" in volume:
            source = volume["configMap"]
            files = _object_files(
                "ConfigMap", source, lookup, source.get("defaultMode", DEFAULT_MODE)
            )
            out.append(Volume(name, "files", files, read_only=True))
        elif "secret" in volume:
            source = volume["secret"]
            files = _object_files("Secret", source, lookup, source.get("defaultMode", DEFAULT_MODE))
            out.append(Volume(name, "files", files, read_only=True))
        elif "downwardAPI" in volume:
            source = volume["downwardAPI"]
            mode = source.get("defaultMode", DEFAULT_MODE)
            files = _downward_files(source.get("items") or [], pod, allocatable, mode)
            out.append(Volume(name, "files", files, read_only=True))
        elif "projected" in volume:
            files = _projected(volume, pod, lookup, token, allocatable)
            out.append(Volume(name, "files", files, read_only=True))
        else:
            kinds = sorted(set(volume) - {"name"})
            raise VolumeError(f"volume {name}: {kinds} is not simulated")
    return out


def materialize(volume: Volume, directory: Path, fs_group: int | None) -> Path:
    """Write ``volume`` under ``directory``; returns the path to mount."""
    if volume.kind == "hostPath":
        assert volume.host_path is not None
        return Path(volume.host_path)
    directory.mkdir(parents=True, exist_ok=True)
    if volume.kind == "emptyDir":
        directory.chmod(0o777)  # as the kubelet makes it; the sandbox mounts tmpfs for Memory
        if fs_group is not None:
            os.chown(directory, -1, fs_group)
        return directory
    stamp = directory / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{os.getpid()}"
    stamp.mkdir(mode=0o755)
    for rel, data, mode in volume.files:
        path = stamp / rel
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        path.write_bytes(data)
        if fs_group is not None:
            os.chown(path, -1, fs_group)
            mode |= 0o440
        path.chmod(mode)
    (directory / "..data").symlink_to(stamp.name)
    for top in sorted({rel.split("/")[0] for rel, _, _ in volume.files}):
        (directory / top).symlink_to(f"..data/{top}")
    directory.chmod(0o755)
    return directory


def decode_secret(obj: dict[str, Any]) -> dict[str, bytes]:
    """A Secret's data as bytes (``data`` is base64, as the API returns it)."""
    return {key: base64.b64decode(value) for key, value in (obj.get("data") or {}).items()}


def decode_config_map(obj: dict[str, Any]) -> dict[str, bytes]:
    data = {key: value.encode() for key, value in (obj.get("data") or {}).items()}
    data.update({key: base64.b64decode(v) for key, v in (obj.get("binaryData") or {}).items()})
    return data
