"""OCI images written without a daemon, and pushed to a registry.

A layer is a gzip'd tar; an image is its layers, a config and a manifest
(the OCI image spec, v1.1). The root filesystems come from mmdebstrap as
tar streams and the files the build adds from trees on this machine, so a
layer is written straight from a tar here. This is written by hand, not
with umoci or skopeo, because both want an OCI layout on disk first and
root-owned unpacked trees to repack, where a layer here is one pass over a
tar stream; the push is the registry API's four requests (distribution's
``/v2/`` API: HEAD a blob, POST and PUT an upload, PUT the manifest).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx2 as httpx

__all__ = ["MANIFEST_TYPE", "Blobs", "Image", "Layer", "push", "tree_entries"]

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
CHUNK = 1 << 20


@dataclass(frozen=True)
class Layer:
    digest: str  # of the gzip'd blob, as the manifest names it
    diff_id: str  # of the tar, as the config's rootfs names it
    size: int


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through to ``out``."""

    def __init__(self, out: IO[bytes] | None) -> None:
        self.out = out
        self.hash = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.hash.update(view)
        self.size += len(view)
        if self.out is not None:
            self.out.write(view)
        return len(view)


class Blobs:
    """A directory of blobs named by digest (an OCI layout's blobs/sha256)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def path(self, digest: str) -> Path:
        return self.directory / digest.removeprefix("sha256:")

    def put_bytes(self, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        path = self.path(digest)
        if not path.exists():
            partial = path.with_suffix(".partial")
            partial.write_bytes(data)
            os.replace(partial, path)
        return digest

    def layer(self, write_tar: Any) -> Layer:
        """A layer from ``write_tar(stream)``, which writes an uncompressed tar."""
        partial = self.directory / f".layer-{os.getpid()}.partial"
        with partial.open("wb") as raw:
            blob = _Hashing(raw)
            with gzip.GzipFile(fileobj=blob, mode="wb", mtime=0, compresslevel=1) as zipped:
                tar = _Hashing(zipped)  # type: ignore[arg-type]
                write_tar(tar)
        digest = "sha256:" + blob.hash.hexdigest()
        os.replace(partial, self.path(digest))
        return Layer(digest, "sha256:" + tar.hash.hexdigest(), blob.size)

    def layer_from_tar(self, path: Path) -> Layer:
        def copy(out: IO[bytes]) -> None:
            with path.open("rb") as source:
                while chunk := source.read(CHUNK):
                    out.write(chunk)

        return self.layer(copy)

    def layer_from_entries(self, entries: Iterable[tuple[str, Path | str | None]]) -> Layer:
        """A layer of (path in the image, what it is): a file or directory
        on this machine (copied, owned by root), a link target (``str``), or
        None for a directory of its own."""

        def write(out: IO[bytes]) -> None:
            with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for name, source in entries:
                    tar.addfile(*_member(name.lstrip("/"), source))

        return self.layer(write)


def _member(name: str, source: Path | str | None) -> tuple[tarfile.TarInfo, IO[bytes] | None]:
    info = tarfile.TarInfo(name)
    info.mtime = 0
    info.uname = info.gname = "root"
    if source is None:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        return info, None
    if isinstance(source, str):
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, source, 0o777
        return info, None
    stat = source.lstat()
    info.mode = stat.st_mode & 0o7777
    if source.is_symlink():
        info.type, info.linkname = tarfile.SYMTYPE, os.readlink(source)
        return info, None
    if source.is_dir():
        info.type = tarfile.DIRTYPE
        return info, None
    info.size = stat.st_size
    return info, source.open("rb")


def tree_entries(source: Path, target: str) -> list[tuple[str, Path | str | None]]:
    """Every directory, file and link under ``source``, placed under
    ``target`` in the image, in a stable order (parents first)."""
    out: list[tuple[str, Path | str | None]] = [(target, source)]
    for path in sorted(source.rglob("*")):
        out.append((f"{target}/{path.relative_to(source)}", path))
    return out


@dataclass(frozen=True)
class Image:
    """An image's manifest, its config and its layers, in ``blobs``."""

    manifest: bytes
    layers: tuple[Layer, ...]
    config_digest: str

    @classmethod
    def make(cls, blobs: Blobs, layers: list[Layer], config: dict[str, Any]) -> Image:
        document = {
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        }
        config_bytes = json.dumps(document, sort_keys=True).encode()
        config_digest = blobs.put_bytes(config_bytes)
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {
                "mediaType": CONFIG_TYPE,
                "digest": config_digest,
                "size": len(config_bytes),
            },
            "layers": [
                {"mediaType": LAYER_TYPE, "digest": layer.digest, "size": layer.size}
                for layer in layers
            ],
        }
        return cls(json.dumps(manifest, sort_keys=True).encode(), tuple(layers), config_digest)


def push(registry: str, name: str, image: Image, blobs: Blobs) -> None:
    """Push ``image`` as ``name`` (``repository:tag``) to the registry at
    ``registry`` (``http://host:port``): each blob it lacks, then the manifest."""
    repository, _, tag = name.rpartition(":")
    with httpx.Client(base_url=registry, timeout=120) as client:
        digests = [image.config_digest, *(layer.digest for layer in image.layers)]
        for digest in digests:
            if client.head(f"/v2/{repository}/blobs/{digest}").status_code == 200:
                continue
            started = client.post(f"/v2/{repository}/blobs/uploads/")
            started.raise_for_status()
            location = started.headers["location"]
            separator = "&" if "?" in location else "?"
            with blobs.path(digest).open("rb") as body:
                done = client.put(
                    f"{location}{separator}digest={digest}",
                    content=body.read(),
                    headers={"content-type": "application/octet-stream"},
                )
            done.raise_for_status()
        client.put(
            f"/v2/{repository}/manifests/{tag}",
            content=image.manifest,
            headers={"content-type": MANIFEST_TYPE},
        ).raise_for_status()
