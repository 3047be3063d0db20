"""A Debian 12 layer from apt's own configured sources (mmdebstrap, as root:
no daemon, no mirror's host written anywhere): the root filesystem every
image here starts from."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

from tests.realk8s.images.oci import Blobs, Layer

__all__ = ["SUITE", "debian_layer"]

SUITE = "bookworm"


def debian_layer(blobs: Blobs, scratch: Path, name: str, packages: Iterable[str],
                 hooks: Iterable[str] = ()) -> Layer:  # fmt: skip
    """Debian 12 (minbase) with ``packages``; ``hooks`` are mmdebstrap
    customize hooks ($1: the root). Reproducible: SOURCE_DATE_EPOCH=0."""
    tar = scratch / f"{name}.tar"
    subprocess.run(
        [
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            "--mode=root",
            f"--include={','.join(packages)}",
            *[f"--customize-hook={hook}" for hook in hooks],
            "--customize-hook=rm -rf $1/var/cache/apt/* $1/var/lib/apt/lists/*",
            SUITE,
            str(tar),
        ],
        check=True,
        env={**os.environ, "SOURCE_DATE_EPOCH": "0"},
    )
    try:
        return blobs.layer_from_tar(tar)
    finally:
        tar.unlink()
