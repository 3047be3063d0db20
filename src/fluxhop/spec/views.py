"""Flux view images and the application images each can serve.

The view's init container copies a built Flux into the pod; the application
container then runs those binaries with its own C library. They start only
where the application image's glibc is at least the one the view was built
against (else ``version `GLIBC_2.38' not found``), and a musl image (Alpine)
runs none. The upstream defaults disagree - the Flux Operator's is Ubuntu
24.04 since its PR #258, the Trainer plugin's Ubuntu 22.04, the old one Rocky
9 - and nothing checked the pair, so fluxhop reads what an image reference
says of its distribution (``ubuntu:22.04``, ``rockylinux:9``,
``nvidia/cuda:12.4.1-devel-ubuntu22.04``) and warns when the view cannot
serve it, naming the view that can. An image that says nothing is left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["OS", "VIEWS", "app_os", "view_os", "view_problem"]


@dataclass(frozen=True)
class OS:
    """A distribution release and the glibc it ships (None: musl)."""

    family: str  # ubuntu, rhel (Rocky, Alma, UBI, CentOS), debian, alpine
    version: str
    glibc: tuple[int, int] | None
    name: str  # as a person writes it

    def __str__(self) -> str:
        libc = f"glibc {self.glibc[0]}.{self.glibc[1]}" if self.glibc else "musl"
        return f"{self.name} ({libc})"


def _os(family: str, version: str, glibc: tuple[int, int] | None, name: str) -> OS:
    return OS(family, version, glibc, name)


RELEASES = {
    ("ubuntu", "20.04"): _os("ubuntu", "20.04", (2, 31), "Ubuntu 20.04"),
    ("ubuntu", "22.04"): _os("ubuntu", "22.04", (2, 35), "Ubuntu 22.04"),
    ("ubuntu", "24.04"): _os("ubuntu", "24.04", (2, 39), "Ubuntu 24.04"),
    ("rhel", "7"): _os("rhel", "7", (2, 17), "RHEL/CentOS 7"),
    ("rhel", "8"): _os("rhel", "8", (2, 28), "RHEL/Rocky 8"),
    ("rhel", "9"): _os("rhel", "9", (2, 34), "RHEL/Rocky 9"),
    ("rhel", "10"): _os("rhel", "10", (2, 39), "RHEL/Rocky 10"),
    ("debian", "11"): _os("debian", "11", (2, 31), "Debian 11"),
    ("debian", "12"): _os("debian", "12", (2, 36), "Debian 12"),
    ("debian", "13"): _os("debian", "13", (2, 41), "Debian 13"),
}
ALPINE = _os("alpine", "", None, "Alpine")
_CODENAMES = {
    "focal": ("ubuntu", "20.04"),
    "jammy": ("ubuntu", "22.04"),
    "noble": ("ubuntu", "24.04"),
    "bullseye": ("debian", "11"),
    "bookworm": ("debian", "12"),
    "trixie": ("debian", "13"),
}

_VIEW = "ghcr.io/converged-computing/flux-view-"
# the Flux Operator's list of view images (api/v1alpha2/minicluster_types.go)
VIEWS: dict[str, OS] = {
    f"{_VIEW}ubuntu:tag-noble": RELEASES[("ubuntu", "24.04")],
    f"{_VIEW}ubuntu:tag-jammy": RELEASES[("ubuntu", "22.04")],
    f"{_VIEW}ubuntu:tag-focal": RELEASES[("ubuntu", "20.04")],
    f"{_VIEW}ubuntu:arm-jammy": RELEASES[("ubuntu", "22.04")],
    f"{_VIEW}ubuntu:arm-focal": RELEASES[("ubuntu", "20.04")],
    f"{_VIEW}rocky:tag-9": RELEASES[("rhel", "9")],
    f"{_VIEW}rocky:tag-8": RELEASES[("rhel", "8")],
    f"{_VIEW}rocky:arm-9": RELEASES[("rhel", "9")],
    f"{_VIEW}rocky:arm-8": RELEASES[("rhel", "8")],
}

_RHEL_NAMES = r"(?:rocky(?:linux)?|alma(?:linux)?|ubi|centos|rhel|el|redhat)"
# (pattern over "repository:tag", lower case) -> (family, version group)
_READ = [
    (re.compile(r"(?:^|/)ubuntu:(\d\d\.\d\d)"), "ubuntu"),
    (re.compile(r"ubuntu[-_]?(\d\d)\.?(\d\d)(?!\d)"), "ubuntu"),
    (re.compile(r"(?:^|/)(?:rockylinux|almalinux|centos|rhel):(\d+)"), "rhel"),
    (re.compile(rf"(?<![a-z0-9]){_RHEL_NAMES}[-_/:]?(?:stream)?(\d+)(?![\d.]*\d{{3}})"), "rhel"),
    (re.compile(r"(?:^|/)debian:(\d+)"), "debian"),
    (re.compile(r"debian[-_]?(\d+)(?!\d)"), "debian"),
]


def _release(family: str, version: str) -> OS | None:
    if family == "rhel":
        version = version.split(".")[0]
    return RELEASES.get((family, version))


def app_os(image: str) -> OS | None:
    """The distribution an image reference names, if it names a known one."""
    reference = image.lower().split("@")[0]
    repository = reference.rsplit("/", 1)[-1]
    if repository.startswith("alpine") or "-alpine" in reference or ":alpine" in reference:
        return ALPINE
    for codename, key in _CODENAMES.items():
        if re.search(rf"(?<![a-z]){codename}(?![a-z])", reference):
            return RELEASES[key]
    for pattern, family in _READ:
        match = pattern.search(reference)
        if match:
            version = ".".join(match.groups()) if family == "ubuntu" else match.group(1)
            found = _release(family, version)
            if found:
                return found
    return None


def view_os(view_image: str) -> OS | None:
    """The distribution a Flux view image was built on, if it is a known one."""
    return VIEWS.get(view_image)


def _best_view(app: OS) -> str | None:
    """The newest view the app's glibc can run, of its own family if there is one."""
    fits = [
        (view.family == app.family, view.glibc, image)
        for image, view in VIEWS.items()
        if "arm-" not in image and app.glibc and view.glibc and view.glibc <= app.glibc
    ]
    return max(fits)[2] if fits else None


def view_problem(view_image: str, app_image: str) -> str | None:
    """Why the Flux view cannot serve the application image, when both say
    what they are: the app's libc is musl, or its glibc is older than the
    view's, or it is another distribution. None when they match or either
    image says nothing."""
    view, app = view_os(view_image), app_os(app_image)
    if view is None or app is None:
        return None
    if app.family == view.family and app.glibc and view.glibc and app.glibc >= view.glibc:
        return None
    best = _best_view(app)
    fix = f"use the view {best} (--view-image, spec.flux.container.image or FLUX_VIEW_IMAGE)" if best else (
        "use an image with Flux installed (--flux-in-image, spec.flux.container.disable)"
    )  # fmt: skip
    if app.glibc is None:
        why = "its musl C library cannot run the view's glibc binaries"
    elif view.glibc and app.glibc < view.glibc:
        why = "its glibc is older than the view's, so flux will not start"
    else:
        why = "the view is built for another distribution"
    return f"the Flux view {view_image} is {view}; the image {app_image} is {app}: {why}; {fix}"
