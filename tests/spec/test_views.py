"""The Flux view image against the application image: what an image
reference says of its distribution, and the one-line warning (with the view
that fits) when the view cannot serve it."""

from __future__ import annotations

import warnings

import pytest

from fluxhop.errors import FluxhopWarning
from fluxhop.spec import MiniCluster
from fluxhop.spec.views import VIEWS, app_os, view_problem
from tests.documents import minicluster_doc

NOBLE = "ghcr.io/converged-computing/flux-view-ubuntu:tag-noble"
JAMMY = "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"
ROCKY9 = "ghcr.io/converged-computing/flux-view-rocky:tag-9"
ROCKY8 = "ghcr.io/converged-computing/flux-view-rocky:tag-8"


@pytest.mark.parametrize(
    ("image", "named"),
    [
        ("ubuntu:22.04", "Ubuntu 22.04"), ("ubuntu:jammy", "Ubuntu 22.04"),
        ("docker.io/library/ubuntu:24.04", "Ubuntu 24.04"),
        ("nvidia/cuda:12.4.1-devel-ubuntu22.04", "Ubuntu 22.04"),
        ("ghcr.io/converged-computing/flux-slingshot:ubuntu2404", "Ubuntu 24.04"),
        ("rockylinux:9", "RHEL/Rocky 9"), ("rockylinux/rockylinux:9.3", "RHEL/Rocky 9"),
        ("almalinux:8", "RHEL/Rocky 8"), ("registry.access.redhat.com/ubi9/ubi:latest", "RHEL/Rocky 9"),
        ("quay.io/centos/centos:stream9", "RHEL/Rocky 9"), ("centos:7", "RHEL/CentOS 7"),
        ("debian:bookworm", "Debian 12"), ("debian:11-slim", "Debian 11"),
        ("alpine:3.20", "Alpine"), ("python:3.12-alpine", "Alpine"),
        ("ubuntu", None), ("ghcr.io/converged-computing/metric-lammps:latest", None),
        ("nvcr.io/nvidia/pytorch:24.05-py3", None), ("x/model9:1", None), ("foo:v12.1", None),
    ],
)  # fmt: skip
def test_what_an_image_reference_says(image, named):
    found = app_os(image)
    assert (found.name if found else None) == named


@pytest.mark.parametrize(
    ("view", "image", "words"),
    [
        (NOBLE, "ubuntu:22.04", f"glibc is older than the view's, so flux will not start; use the view {JAMMY}"),
        (NOBLE, "rockylinux:9", f"use the view {ROCKY9}"),
        (NOBLE, "almalinux:8", f"use the view {ROCKY8}"),
        (NOBLE, "debian:bookworm", f"use the view {JAMMY}"),
        (NOBLE, "alpine:3.20", "musl C library cannot run the view's glibc binaries; use an image with Flux installed"),
        (NOBLE, "centos:7", "use an image with Flux installed"),
        (ROCKY9, "ubuntu:24.04", "the view is built for another distribution; use the view " + NOBLE),
    ],
)  # fmt: skip
def test_a_view_that_cannot_serve_the_image(view, image, words):
    problem = view_problem(view, image)
    assert problem is not None and words in problem and view in problem and image in problem


@pytest.mark.parametrize(
    ("view", "image"),
    [(NOBLE, "ubuntu:24.04"), (JAMMY, "ubuntu:24.04"), (ROCKY9, "rockylinux:9"),
     (ROCKY8, "rockylinux:9"), (NOBLE, "ghcr.io/org/app:latest"), ("my/view:1", "ubuntu:20.04")],
)  # fmt: skip
def test_a_view_that_serves_it_or_an_image_that_says_nothing(view, image):
    assert view_problem(view, image) is None


def test_every_listed_view_has_a_glibc():
    assert all(os.glibc for os in VIEWS.values())


def spec(**flux) -> MiniCluster:
    doc = minicluster_doc("v", containers=[{"image": "rockylinux:9", "command": "hostname"}])
    doc["spec"]["flux"] = flux
    return MiniCluster.from_dict(doc)


def test_the_spec_warns_for_the_default_view_on_rocky():
    with pytest.warns(FluxhopWarning, match=f"use the view {ROCKY9}"):
        spec()


@pytest.mark.parametrize(
    "flux", [{"container": {"image": ROCKY9}}, {"container": {"disable": True}}]
)
def test_no_warning_with_the_right_view_or_flux_in_the_image(flux):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FluxhopWarning)
        assert spec(**flux).name == "v"
