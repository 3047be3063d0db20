"""The CURVE secret key lives only in a Secret: a ``flux.curveCert`` in a file
reaches the Secret of the job and JobSet targets and nothing else, is never
copied into a Flux Operator MiniCluster resource, and the loaded model hides it
wherever it is shown."""

from __future__ import annotations

import base64
import json

import pytest

from fluxhop.errors import FluxhopWarning
from fluxhop.flux.curve import CurveCert
from fluxhop.render import render
from fluxhop.render.output import dump_json, dump_yaml
from fluxhop.spec import MiniCluster
from tests.documents import minicluster_doc

CERT = CurveCert.generate("pinned")


@pytest.fixture
def pinned() -> MiniCluster:
    flux = {"curveCert": CERT.to_zpl()}
    doc = minicluster_doc("pinned", flux=flux, containers=[{"image": "x", "command": "app"}])
    return MiniCluster.from_dict(doc)


def test_the_model_hides_the_key_wherever_it_is_shown(pinned):
    shown = [repr(pinned), str(pinned), pinned.model_dump_json(), json.dumps(pinned.to_dict())]
    shown.append(repr(pinned.spec.flux))
    for text in shown:
        assert CERT.secret_key not in text
    assert "**********" in pinned.model_dump_json()


@pytest.mark.parametrize("target", ["job", "jobset"])
def test_the_pinned_key_is_in_the_secret_and_nowhere_else(pinned, target):
    objects = render(pinned, target)
    secrets = [o for o in objects if o["kind"] == "Secret"]
    others = [o for o in objects if o["kind"] != "Secret"]
    (secret,) = secrets
    assert CurveCert.from_zpl(base64.b64decode(secret["data"]["curve.cert"]).decode()) == CERT
    for text in (dump_yaml(others), dump_json(others)):
        assert CERT.secret_key not in text
    # the Secret's data is base64: the key does not appear as text there either
    assert CERT.secret_key not in dump_yaml(objects)


def test_the_flux_operator_resource_never_carries_the_key(pinned):
    with pytest.warns(FluxhopWarning, match="curveCert is not copied") as record:
        objects = render(pinned, "minicluster")
    assert len(record) == 1
    text = dump_yaml(objects) + dump_json(objects)
    assert CERT.secret_key not in text and "curveCert" not in text
