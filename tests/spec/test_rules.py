"""Kubernetes' own rules (spec/rules.py): image references as the container
runtimes parse them, container resource names as the API server checks them."""

from __future__ import annotations

import pytest

from fluxhop.spec.rules import image_problem, resource_name_problem

HEX = "0123456789abcdef"


@pytest.mark.parametrize(
    "image",
    [
        "ubuntu",
        "ubuntu:noble",
        "ghcr.io/org/app:v1.2",
        "localhost:5000/a/b_c__d-e:tag",
        f"ubuntu@sha256:{HEX * 4}",
        f"ubuntu:noble@sha256:{HEX * 4}",
        f"registry.io/x@sha384:{HEX * 6}",
        f"x@sha512:{HEX * 8}",
        "a" * 255,
        "h.io/" + "a" * 250,
    ],
)
def test_good_references(image):
    assert image_problem(image) is None


@pytest.mark.parametrize(
    ("image", "words"),
    [
        ("ubuntu@sha256:abc", "sha256 digest of 3 hex digits; sha256 has exactly 64"),
        (f"ubuntu@sha256:{HEX * 2}0", "33 hex digits"),
        (f"ubuntu@sha256:{HEX * 8}", "128 hex digits; sha256 has exactly 64"),
        (f"ubuntu@sha512:{HEX * 4}", "sha512 has exactly 128"),
        (f"ubuntu@sha384:{HEX * 4}", "sha384 has exactly 96"),
        (f"ubuntu@sha256:{HEX.upper() * 4}", "lower case"),
        (f"ubuntu@md5:{HEX * 2}", "algorithm 'md5'"),
        (f"ubuntu@sha256+b64:{HEX * 4}", "algorithm 'sha256+b64'"),
        ("ubuntu@sha256:", "is not an image reference"),
        ("ubuntu@sha256:xyz", "is not an image reference"),
        ("a" * 256, "repository name of 256 characters; at most 255"),
        ("h.io/" + "a" * 251, "repository name of 256 characters"),
        ("Ubuntu", "is not an image reference"),
        ("a b", "without spaces"),
    ],
)
def test_bad_references(image, words):
    assert words in (image_problem(image) or ""), image_problem(image)


def test_a_tag_does_not_count_toward_the_name():
    assert image_problem("a" * 255 + ":" + "t" * 128) is None


@pytest.mark.parametrize(
    ("name", "accepted"),
    [
        ("cpu", True),
        ("hugepages-1Gi", True),
        ("nvidia.com/gpu", True),
        ("kubernetes.io/x", True),
        ("storage", False),  # a volume's resource, not a container's
        ("gpu", False),
        ("1", False),
        ("requests.example.com/x", False),  # quota's prefix
        ("a" * 244 + ".com/x", False),  # fits a label key, not behind requests.
    ],
)
def test_container_resource_names(name, accepted):
    """The API server's rule (tests/realk8s/test_apply.py holds it to the real one)."""
    assert (resource_name_problem(name) is None) is accepted
