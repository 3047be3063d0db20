"""No output of any command, in any format, on stdout or stderr, holds the
CURVE secret key as text: it is only ever inside a Secret's (base64) data."""

from __future__ import annotations

import base64
import json

import pytest
import yaml

from fluxhop.cli import main
from fluxhop.flux.curve import CurveCert
from tests.documents import minicluster_doc
from tests.trainer.conftest import EXAMPLES

CERT = CurveCert.generate("scan")


@pytest.fixture
def pinned(tmp_path):
    doc = minicluster_doc(
        "scan",
        size=2,
        flux={"curveCert": CERT.to_zpl()},
        containers=[{"image": "x", "command": "app"}],
    )
    path = tmp_path / "pinned.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def output_of(capsys, *args: str) -> str:
    main(list(args))
    captured = capsys.readouterr()
    return captured.out + captured.err


def assert_no_key(text: str) -> None:
    assert CERT.secret_key not in text


@pytest.mark.parametrize("target", ["job", "jobset", "minicluster"])
@pytest.mark.parametrize("output", ["yaml", "json"])
def test_render_in_every_target_and_format(capsys, pinned, target, output):
    text = output_of(capsys, "render", "-f", pinned, "--target", target, "-o", output)
    assert "kind:" in text or '"kind"' in text
    assert_no_key(text)
    if target != "minicluster":  # the key is there, base64, in the Secret alone
        docs = json.loads(text)["items"] if output == "json" else list(yaml.safe_load_all(text))
        (secret,) = [d for d in docs if d and d["kind"] == "Secret"]
        assert CERT.secret_key in base64.b64decode(secret["data"]["curve.cert"]).decode()


def test_run_dry_run(capsys, pinned):
    assert_no_key(output_of(capsys, "run", "--dry-run", "-f", pinned))


def test_cluster_verbs(cli_cluster, kubeconfig, capsys, pinned):
    config = ["--kubeconfig", str(kubeconfig)]
    texts = [output_of(capsys, "create", "-f", pinned, *config)]
    for output in ("yaml", "json", "wide"):
        texts.append(output_of(capsys, "get", "scan", "-o", output, *config))
    for output in ("json", "wide"):
        texts.append(output_of(capsys, "list", "-o", output, *config))
    texts.append(output_of(capsys, "logs", "scan", *config))
    texts.append(output_of(capsys, "delete", "scan", *config))
    for text in texts:
        assert_no_key(text)
    assert any("scan" in text for text in texts)


def test_trainer_render_shows_its_fresh_key_only_in_the_secret(capsys):
    job = str(EXAMPLES / "examples__flux__lammps-train-job.yaml")
    runtime = str(EXAMPLES / "examples__flux__flux-runtime.yaml")
    text = output_of(capsys, "trainer", "render", "-f", job, "--runtime", runtime, "-o", "json")
    docs = json.loads(text)["items"]
    (secret,) = [d for d in docs if d["kind"] == "Secret"]
    key = CurveCert.from_zpl(base64.b64decode(secret["data"]["curve.cert"]).decode()).secret_key
    assert key not in text
