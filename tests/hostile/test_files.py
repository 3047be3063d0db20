"""Hostile MiniCluster files and documents, through `fluxhop render -f` and the
Python API: each is one line naming the field, exit 2, no traceback, no
internal error; the API never sends a request for a document it refuses."""

from __future__ import annotations

import json

import pytest

from fluxhop import Client
from fluxhop.errors import FluxhopError
from tests.hostile.corpus import TEXTS, mutations
from tests.hostile.lines import one_line

MUTATIONS = mutations()


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("case", "doc", "words"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_a_hostile_file_is_one_line(case, doc, words, tmp_path, capsys):
    path = tmp_path / "minicluster.yaml"
    path.write_text(json.dumps(doc))
    code, err = one_line(capsys, "render", "-f", str(path))
    assert code == 2, err
    assert words in err, err


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("case", "doc", "words"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_a_hostile_document_given_to_the_python_api(case, doc, words, fake, kubeconfig):
    client = Client(kubeconfig=str(kubeconfig), transport=fake.transport())
    with pytest.raises(FluxhopError) as info:
        client.create(doc)
    message = str(info.value)
    assert "\n" not in message and words in message, message
    assert fake.requests == []  # refused before anything was sent


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("case", "data", "words"), TEXTS, ids=[t[0] for t in TEXTS])
def test_a_hostile_text_is_one_line(case, data, words, tmp_path, capsys):
    path = tmp_path / "input.yaml"
    path.write_bytes(data)
    code, err = one_line(capsys, "render", "-f", str(path))
    assert code == 2 and words in err, err
