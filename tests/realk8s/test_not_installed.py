"""An API the cluster does not serve, as the real API server says it (issue
#34 item 3): requests for a group are sent, through a transport that
renames it, to a group the API server has never heard of (it answers
``404 page not found`` as text/plain) or to a resource that a served group
does not have (a JSON Status 404). Every verb and target names what is
missing and how to install it, in one line; the verbs that look at every
kind of MiniCluster (list) go on with the ones the cluster has."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from lightkube.config.client_adapter import verify_cluster

from fluxhop.cli import main
from fluxhop.cluster.api import Kube
from fluxhop.cluster.config import resolve
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster

ABSENT = "absent.fluxhop.test"
GROUPS = {"minicluster": "flux-framework.org/v1alpha2", "jobset": "jobset.x-k8s.io/v1alpha2"}
# where a group's requests go: a group nobody serves (text), batch/v1 (JSON)
ANSWERS = {"text": f"{ABSENT}/v1", "json": "batch/v1"}


class Renamed(httpx2.BaseTransport):
    """The real transport, with one API group/version's paths sent elsewhere."""

    def __init__(self, inner: httpx2.BaseTransport, group: str, to: str) -> None:
        self.inner, self.group, self.to = inner, group, to

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path.replace(f"/apis/{self.group}/", f"/apis/{self.to}/")
        request.url = request.url.copy_with(path=path)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def absent(cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Make a group absent for every Kube the CLI connects: absent(group)."""
    original = Kube.connect.__func__  # type: ignore[attr-defined]

    def make(group: str, answer: str = "text") -> None:
        def connect(cls: type[Kube], kubeconfig: str | None = None, context: str | None = None,
                    namespace: str | None = None, **options: Any) -> Kube:  # fmt: skip
            config = resolve(kubeconfig, context, namespace).config
            assert config.user is not None
            verify = verify_cluster(config.cluster, config.user, config.abs_file)
            inner = httpx2.HTTPTransport(verify=verify)
            options["transport"] = Renamed(inner, group, ANSWERS[answer])
            return original(cls, kubeconfig, context, namespace, **options)  # type: ignore[no-any-return]

        monkeypatch.setattr(Kube, "connect", classmethod(connect))

    monkeypatch.setenv("KUBECONFIG", str(cluster.admin_kubeconfig))
    yield make


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(("answer", "kind"), [("text", "text/plain"), ("json", "application/json")])
def test_the_real_api_server_answers_what_it_does_not_serve(admin: Api, answer: str, kind: str):
    """What the cases below stand on: the two forms of its 404."""
    found = admin.http.get(f"/apis/{ANSWERS[answer]}/namespaces/default/miniclusters")
    assert found.status_code == 404
    assert found.headers["content-type"].startswith(kind), found.headers


VERBS = {
    "create": ["create", "--name", "absent", "--image", "ubuntu", "--", "true"],
    "run": ["run", "--name", "absent", "--image", "ubuntu", "--", "true"],
    "get": ["get", "absent"],
    "delete": ["delete", "absent"],
    "scale": ["scale", "absent", "--size", "2"],
}


@pytest.mark.parametrize("answer", ANSWERS)
@pytest.mark.parametrize("target", GROUPS)
@pytest.mark.parametrize("verb", VERBS)
def test_a_missing_crd_is_named_on_every_verb(absent: Any, namespace: str, capsys: Any,
                                              target: str, verb: str, answer: str):  # fmt: skip
    absent(GROUPS[target], answer)
    args = [*VERBS[verb], "--namespace", namespace]
    if verb in ("create", "run"):
        args = [args[0], "--target", target, *args[1:]]
    code, _, err = _cli(capsys, *args)
    if verb in ("get", "delete", "scale"):  # nothing of that name: said as for any kind
        assert code != 0 and "not found" in err and "JSON" not in err, err
        return
    assert code != 0 and err.count("\n") == 1, err
    assert "is not installed" in err and "JSON" not in err, err
    assert ("kubectl apply -k deploy/" in err) == (target == "minicluster"), err


def test_list_goes_on_without_the_minicluster_crd(absent: Any, namespace: str, capsys: Any):
    absent(GROUPS["minicluster"])
    code, out, err = _cli(capsys, "list", "--namespace", namespace)
    assert (code, out, err) == (0, "", "No MiniClusters found.\n"), err


def test_the_transport_reaches_the_real_server(cluster: LocalCluster, namespace: str, capsys: Any,
                                               monkeypatch: pytest.MonkeyPatch):  # fmt: skip
    """Without the renaming the same verbs work (the 404s above are the group's)."""
    monkeypatch.setenv("KUBECONFIG", str(cluster.admin_kubeconfig))
    code, _, err = _cli(capsys, "list", "--namespace", namespace)
    assert code == 0, err
