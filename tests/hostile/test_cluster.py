"""Hostile cluster input: NAMEs that would walk API paths, broken kubeconfigs,
and an API server that answers garbage, plain text, nothing, or errors. Each
is one line; a refused NAME sends no request; nothing is left on the server."""

from __future__ import annotations

import base64

import pytest
import yaml

from tests.cluster.fixtures import SERVER
from tests.hostile.lines import one_line, one_line_after_warnings

NAMES = ["..", "../x", "A", "", "a/b", "x" * 300, "a b", "-x", "a.b", "%2e%2e", "a\nb"]
VERBS = {
    "get": [],
    "logs": [],
    "delete": [],
    "scale": ["--size", "2"],
    "shell": [],
    "proxy": ["true"],
}


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("name", NAMES, ids=repr)
def test_a_hostile_name_sends_nothing(cli_cluster, kubeconfig, capsys, verb, name):
    args = [verb, "--kubeconfig", str(kubeconfig), name, *VERBS[verb]]
    if verb == "proxy":
        args = [verb, "--kubeconfig", str(kubeconfig), name, "--", *VERBS[verb]]
    code, err = one_line(capsys, *args)
    # a name that starts with '-' reads as an option, as with kubectl
    assert code == 2 and ("NAME" in err or "No such option" in err), err
    assert cli_cluster.requests == []


def user_config(user: dict, cluster: dict | None = None, **top) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [{"name": "k", "cluster": cluster or {"server": SERVER}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        **top,
    }


KUBECONFIGS: list[tuple[str, object, str]] = [
    ("empty", "", "kubeconfig"),
    ("list", "- a\n", "kubeconfig"),
    ("scalar", "hello\n", "kubeconfig"),
    ("not-yaml", "a: [", "not valid YAML"),
    ("laughs", None, "expands to more than"),
    ("no-current-context", {**user_config({"token": "t"}), "current-context": ""}, "current-context"),
    ("unknown-context", {**user_config({"token": "t"}), "current-context": "nope"}, "'nope'"),
    ("context-without-name", {**user_config({"token": "t"}), "contexts": [{"context": {"cluster": "k", "user": "u"}}]}, "context"),
    ("contexts-scalar", {**user_config({"token": "t"}), "contexts": 5}, "contexts"),
    ("context-missing-cluster", {**user_config({"token": "t"}), "contexts": [{"name": "c", "context": {"cluster": "nope", "user": "u"}}]}, "'c'"),
    ("cluster-without-server", user_config({"token": "t"}, cluster={"insecure-skip-tls-verify": True}), "server"),
    ("server-not-a-url", user_config({"token": "t"}, cluster={"server": "not a url"}), "server"),
    ("missing-client-cert", user_config({"client-certificate": "/nonexistent.crt", "client-key": "/nonexistent.key"}), "/nonexistent.crt"),
    ("bad-base64-ca", user_config({"token": "t"}, cluster={"server": SERVER, "certificate-authority-data": "%%%not base64"}), "certificate-authority-data"),
    ("bad-base64-cert", user_config({"client-certificate-data": "%%%", "client-key-data": "%%%"}), "client-certificate-data"),
    ("garbage-ca", user_config({"token": "t"}, cluster={"server": SERVER, "certificate-authority-data": base64.b64encode(b"not a cert").decode()}), "certificate"),
    ("missing-ca-file", user_config({"token": "t"}, cluster={"server": SERVER, "certificate-authority": "/nonexistent-ca.crt"}), "/nonexistent-ca.crt"),
    ("missing-token-file", user_config({"tokenFile": "/nonexistent-token"}), "/nonexistent-token"),
    ("exec-v1", user_config({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "false"}}), "exec api version"),
    ("exec-fails", user_config({"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "false"}}), "context c"),
    ("exec-missing", user_config({"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "/no/such/plugin"}}), "/no/such/plugin"),
    ("exec-garbage", user_config({"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "echo", "args": ["not json"]}}), "context c"),
    ("user-scalar", {**user_config({"token": "t"}), "users": [{"name": "u", "user": 5}]}, "'c'"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "config", "words"), KUBECONFIGS, ids=[k[0] for k in KUBECONFIGS])
def test_a_broken_kubeconfig_is_one_line(tmp_path, capsys, case, config, words):
    from tests.test_documents import LAUGHS

    path = tmp_path / "kubeconfig"
    text = (
        LAUGHS if config is None else config if isinstance(config, str) else yaml.safe_dump(config)
    )
    path.write_text(text)
    code, err = one_line(capsys, "list", "--kubeconfig", str(path), "--request-timeout", "5")
    assert code in (1, 2) and words in err, err


FAULTS: list[tuple[str, tuple, str]] = [
    ("garbage-200-get", ("GET", "/jobs/demo", 0, 1, "garbage"), "not JSON"),
    ("garbage-200-apply", ("PATCH", "/jobs/demo", 0, 1, "garbage"), "not JSON"),
    ("text-404-apply", ("PATCH", "/jobs/demo", 404, 1, "text"), "not found"),
    ("hang-get", ("GET", "/jobs/demo", 0, 100, "hang"), "no answer"),
    ("hang-apply", ("PATCH", "/jobs/demo", 0, 100, "hang"), "no answer"),
    ("lost-apply", ("PATCH", "/jobs/demo", 0, 100, "lost"), "no answer"),
    ("lost-configmap", ("PATCH", "/configmaps/", 0, 100, "lost"), "no answer"),
    ("500-forever", ("PATCH", "/jobs/demo", 500, 100, "error"), "500"),
    ("403-secret", ("PATCH", "/secrets/", 403, 1, "error"), "you may not patch secrets"),
    ("409-apply", ("PATCH", "/jobs/demo", 409, 1, "error"), "conflict"),
    ("401", ("GET", "/jobs/", 401, 1, "error"), "401"),
    ("422-service", ("PATCH", "/services/", 422, 1, "error"), "422"),
    ("garbage-secret", ("PATCH", "/secrets/", 0, 1, "garbage"), "not JSON"),
    ("text-404-jobset", ("GET", "/jobsets/", 404, 10, "text"), "JobSet API (jobset.x-k8s.io) is not installed"),
    # the API server's own answer for a group it does not serve: text/plain "404 page not found"
    ("text-404-minicluster", ("GET", "/miniclusters/", 404, 10, "text"), "install fluxhop's operator"),
    ("bare-404-jobset", ("GET", "/jobsets/", 404, 10, "bare"), "JobSet API (jobset.x-k8s.io) is not installed"),
    ("bare-500-apply", ("PATCH", "/jobs/demo", 500, 100, "bare"), "500"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "fault", "words"), FAULTS, ids=[f[0] for f in FAULTS])
def test_a_misbehaving_api_server_leaves_nothing(
    cli_cluster, kubeconfig, capsys, case, fault, words
):
    method, path, status, times, mode = fault
    cli_cluster.fail(method, path, status, times=times, mode=mode)
    target = next((["--target", kind] for kind in ("jobset", "minicluster") if kind in case), [])
    code, err = one_line_after_warnings(
        capsys, "create", "--kubeconfig", str(kubeconfig), "--name", "demo", "-N", "2",
        "--image", "ubuntu", "--request-timeout", "5", *target,
    )  # fmt: skip
    assert code == 1 and words in err, err
    cli_cluster.faults.clear()
    assert cli_cluster.objects() == []
