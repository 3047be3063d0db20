"""Kubeconfig resolution, the way kubectl does it."""

from __future__ import annotations

import pytest
import yaml

from fluxhop.cluster import config as config_module
from fluxhop.cluster.config import resolve
from fluxhop.errors import KubeconfigError


def kubeconfig(path, contexts, current=None, server="https://a:6443"):
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": f"cluster-{name}", "cluster": {"server": server}} for name, _ in contexts
        ],
        "users": [{"name": f"user-{name}", "user": {"token": "t"}} for name, _ in contexts],
        "contexts": [
            {
                "name": name,
                "context": {
                    "cluster": f"cluster-{name}",
                    "user": f"user-{name}",
                    **({"namespace": ns} if ns else {}),
                },
            }
            for name, ns in contexts
        ],
    }
    if current:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))
    return path


def test_flag_wins_and_namespace_comes_from_the_context(tmp_path):
    path = kubeconfig(tmp_path / "one", [("dev", "team")], current="dev")
    resolved = resolve(str(path), env={"KUBECONFIG": "/nonexistent"})
    assert (resolved.context, resolved.namespace, resolved.server) == (
        "dev",
        "team",
        "https://a:6443",
    )
    assert resolve(str(path), namespace="other", env={}).namespace == "other"


def test_kubeconfig_colon_list_is_merged_first_wins(tmp_path):
    first = kubeconfig(tmp_path / "first", [("shared", "from-first")], server="https://first:6443")
    second = kubeconfig(
        tmp_path / "second",
        [("shared", "from-second"), ("extra", None)],
        current="extra",
        server="https://second:6443",
    )
    resolved = resolve(env={"KUBECONFIG": f"{first}:{tmp_path / 'missing'}:{second}"})
    assert resolved.context == "extra"  # first file that sets current-context
    assert resolved.namespace == "default"
    shared = resolve(context="shared", env={"KUBECONFIG": f"{first}:{second}"})
    assert (shared.namespace, shared.server) == ("from-first", "https://first:6443")


def test_home_kube_config(tmp_path):
    (tmp_path / ".kube").mkdir()
    kubeconfig(tmp_path / ".kube" / "config", [("home", "h")], current="home")
    assert resolve(env={"HOME": str(tmp_path)}).namespace == "h"


@pytest.fixture
def in_a_pod(tmp_path, monkeypatch) -> dict[str, str]:
    """A pod's service account (namespace pods-ns) and its environment."""
    account = tmp_path / "sa"
    account.mkdir()
    (account / "token").write_text("token")
    (account / "namespace").write_text("pods-ns\n")
    (account / "ca.crt").write_text("")
    monkeypatch.setattr(config_module, "SERVICE_ACCOUNT", account)
    env = {"KUBERNETES_SERVICE_HOST": "198.18.128.1", "KUBERNETES_SERVICE_PORT": "443"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def test_in_cluster_fallback(tmp_path, in_a_pod):
    resolved = resolve(env={**in_a_pod, "HOME": str(tmp_path / "nohome")})
    assert resolved.namespace == "pods-ns"
    assert resolved.source == "in-cluster service account"


def _no_passwd_entry(uid: int) -> None:
    raise KeyError(f"getpwuid(): uid not found: {uid}")


@pytest.mark.parametrize("home", ["~", None])
def test_in_cluster_as_a_uid_without_a_home(in_a_pod, monkeypatch, home):
    """A pod's user is often a uid the image does not name (deploy/ runs the
    operator as 65532): no $HOME, no passwd entry; the service account is
    found, where ``~`` made fluxhop stop with "getpwuid(): uid not found"."""
    monkeypatch.setattr("pwd.getpwuid", _no_passwd_entry)
    monkeypatch.delenv("HOME", raising=False)
    env = {**in_a_pod, **({"HOME": home} if home else {})}
    assert config_module.default_kubeconfig(env) is None
    assert resolve(env=env).source == "in-cluster service account"
    assert config_module.expanded("~/x") == config_module.Path("~/x")


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda p: {"HOME": str(p / "nohome")}, "no Kubernetes configuration"),
        (
            lambda p: {"KUBECONFIG": str(p / "a") + ":" + str(p / "b")},
            "KUBECONFIG names no existing file",
        ),
    ],
)
def test_missing_configuration_is_one_line(tmp_path, setup, message):
    with pytest.raises(KubeconfigError) as info:
        resolve(env=setup(tmp_path))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_unknown_context_lists_the_known_ones(tmp_path):
    path = kubeconfig(tmp_path / "c", [("a", None), ("b", None)], current="a")
    with pytest.raises(KubeconfigError, match=r"context 'zzz' is not in .* \(contexts: a, b\)"):
        resolve(str(path), context="zzz", env={})
    nocurrent = kubeconfig(tmp_path / "d", [("a", None)])
    with pytest.raises(KubeconfigError, match="--context"):
        resolve(str(nocurrent), env={})
    with pytest.raises(KubeconfigError, match="no such file"):
        resolve(str(tmp_path / "absent"), env={})
