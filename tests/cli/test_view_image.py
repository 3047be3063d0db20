"""--view-image chooses the Flux view; render's output names the view and
what it needs; a view that cannot serve the image is one warning line."""

from __future__ import annotations

import yaml

from fluxhop.cli import main
from tests.hostile.lines import one_line

ROCKY9 = "ghcr.io/converged-computing/flux-view-rocky:tag-9"


def render(capsys, *flags: str) -> tuple[int, str, str]:
    code = main(["run", "--dry-run", *flags, "--", "hostname"])
    out = capsys.readouterr()
    return code, out.out, out.err


def view_images(text: str) -> list[str]:
    """The view images the Job's pods take: mounted (an image volume, what
    render shows for flux.container.volume auto) or copied (an init container)."""
    pod = next(d for d in yaml.safe_load_all(text) if d and d["kind"] == "Job")["spec"]["template"][
        "spec"
    ]
    return [v["image"]["reference"] for v in pod["volumes"] if "image" in v] + [
        c["image"] for c in pod.get("initContainers", [])
    ]


def test_the_view_image_flag_chooses_the_view(capsys):
    code, out, err = render(capsys, "--image", "rockylinux:9", "--view-image", ROCKY9)
    assert code == 0 and view_images(out) == [ROCKY9] and "warning" not in err
    assert out.startswith(f"# Flux view {ROCKY9}: RHEL/Rocky 9 (glibc 2.34)")


def test_the_default_view_on_rocky_is_one_warning_naming_the_fix(capsys):
    code, out, err = render(capsys, "--image", "rockylinux:9")
    assert code == 0 and "flux-view-ubuntu:tag-noble" in view_images(out)[0]
    (line,) = err.splitlines()
    assert line.startswith("fluxhop: warning: the Flux view") and f"use the view {ROCKY9}" in line
    assert out.startswith(
        "# Flux view ghcr.io/converged-computing/flux-view-ubuntu:tag-noble: Ubuntu 24.04"
    )


def test_flux_in_the_image_has_no_view_and_no_note(capsys):
    code, out, err = render(capsys, "--image", "alpine:3.20", "--flux-in-image")
    assert code == 0 and view_images(out) == [] and out.startswith("---") and err == ""


def test_view_image_and_flux_in_image_together_is_one_line(capsys):
    args = [
        "run",
        "--dry-run",
        "--image",
        "x",
        "--view-image",
        ROCKY9,
        "--flux-in-image",
        "--",
        "true",
    ]
    code, err = one_line(capsys, *args)
    assert code == 2 and "--view-image and --flux-in-image" in err


def test_a_bad_view_image_names_the_flag(capsys):
    code, err = one_line(
        capsys, "run", "--dry-run", "--image", "x", "--view-image", "Bad:", "--", "true"
    )
    assert code == 2 and err.startswith("fluxhop: --view-image: 'Bad:'"), err


def test_view_image_with_a_file_is_refused(capsys, tmp_path):
    path = tmp_path / "mc.yaml"
    path.write_text("kind: MiniCluster\nmetadata: {name: a}\nspec: {containers: [{image: x}]}\n")
    code, err = one_line(capsys, "run", "--dry-run", "-f", str(path), "--view-image", ROCKY9)
    assert code == 2 and "--view-image" in err


def test_the_view_volume_flag_chooses_mounted_or_copied(capsys):
    for volume, mounted in (("image", True), ("copy", False), ("auto", True)):
        code, out, err = render(capsys, "--image", "ubuntu:noble", "--view-volume", volume)
        pod = next(d for d in yaml.safe_load_all(out) if d and d["kind"] == "Job")
        pod = pod["spec"]["template"]["spec"]
        assert code == 0 and err == "" and ("initContainers" not in pod) is mounted, (volume, pod)
        assert view_images(out) == ["ghcr.io/converged-computing/flux-view-ubuntu:tag-noble"]


def test_view_volume_and_flux_in_image_together_is_one_line(capsys):
    code, err = one_line(capsys, "run", "--dry-run", "--image", "x", "--view-volume", "image",
                         "--flux-in-image", "--", "true")  # fmt: skip
    assert code == 2 and "--view-volume and --flux-in-image" in err
