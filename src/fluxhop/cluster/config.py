"""Kubernetes configuration found the way kubectl finds it.

Order: ``--kubeconfig``; else every file of ``KUBECONFIG`` (a ``:`` list,
merged: for clusters, users and contexts the first file that names one wins,
and so does the first ``current-context``); else ``~/.kube/config``; else the
pod's service account (in-cluster). lightkube's own ``KubeConfig.from_env``
tries in-cluster first and reads a single file, so fluxhop resolves the
configuration itself and hands lightkube the result.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightkube.config.kubeconfig import KubeConfig, SingleConfig

from fluxhop.documents import load_all, read_input
from fluxhop.errors import InputError, KubeconfigError

__all__ = ["ResolvedConfig", "default_kubeconfig", "expanded", "resolve"]

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class ResolvedConfig:
    config: SingleConfig
    context: str | None
    namespace: str
    source: str

    @property
    def server(self) -> str:
        return str(self.config.cluster.server)


def _load(path: Path) -> dict[str, Any]:
    try:
        documents = load_all(read_input(str(path), "kubeconfig"), f"kubeconfig {path}")
    except InputError as err:
        raise KubeconfigError(str(err)) from None
    data = documents[0] if documents else {}
    if not isinstance(data, dict):
        raise KubeconfigError(f"kubeconfig {path} is not a kubeconfig mapping")
    return data


def _merge(documents: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    for section in ("clusters", "users", "contexts"):
        seen: dict[str, Any] = {}
        for doc in documents:
            items = doc.get(section) or []
            if not isinstance(items, list):
                raise KubeconfigError(f"kubeconfig {section} must be a list, not {items!r:.40}")
            for index, item in enumerate(items):
                if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                    raise KubeconfigError(
                        f"kubeconfig {section}[{index}] has no name; every entry needs one"
                    )
                seen.setdefault(item["name"], item)
        merged[section] = list(seen.values())
    for doc in documents:
        if doc.get("current-context"):
            merged["current-context"] = doc["current-context"]
            break
    return merged


def _entry(merged: dict[str, Any], section: str, name: Any, what: str) -> dict[str, Any]:
    for item in merged[section]:
        if item["name"] == name:
            body = item.get(section[:-1])
            if not isinstance(body, dict):
                raise KubeconfigError(f"kubeconfig {what} {name!r} has no {section[:-1]} mapping")
            return body
    raise KubeconfigError(f"kubeconfig {what} {name!r} is not among its {section}")


def _check_context(merged: dict[str, Any], chosen: str, base: Path) -> None:
    """What lightkube would otherwise fail on with a bare exception: missing
    entries and files, data that is not base64, a server that is no URL."""
    context = _entry(merged, "contexts", chosen, "context")
    where = f"context {chosen!r}"
    cluster = _entry(merged, "clusters", context.get("cluster"), f"{where}: cluster")
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        raise KubeconfigError(
            f"kubeconfig {where}: cluster {context.get('cluster')!r} has no http(s) server URL "
            f"(server: {server!r})"
        )
    user = (
        _entry(merged, "users", context.get("user"), f"{where}: user")
        if context.get("user")
        else {}
    )
    for section, body in (("cluster", cluster), ("user", user)):
        for key in ("certificate-authority", "client-certificate", "client-key", "tokenFile"):
            if key in body:
                path = Path(str(body[key])).expanduser()
                path = path if path.is_absolute() else base / path
                if not path.is_file():
                    raise KubeconfigError(
                        f"kubeconfig {where}: {section} {key} {path} does not exist"
                    )
        for key in ("certificate-authority-data", "client-certificate-data", "client-key-data"):
            if key in body:
                try:
                    base64.b64decode(str(body[key]), validate=True)
                except (binascii.Error, ValueError):
                    raise KubeconfigError(
                        f"kubeconfig {where}: {section} {key} is not valid base64"
                    ) from None


def expanded(path: str) -> Path:
    """``path`` with a leading ``~`` made the home directory, where there is
    one: a container's user often has neither $HOME nor a passwd entry (a
    uid the image does not name), and then ``~`` stays as written."""
    try:
        return Path(path).expanduser()
    except (RuntimeError, KeyError):  # pathlib raises either, by Python release
        return Path(path)


def default_kubeconfig(env: Mapping[str, str]) -> Path | None:
    """``~/.kube/config``, where a home directory is known ($HOME, else the
    user's passwd entry); None for a user without one."""
    home = expanded(env.get("HOME") or "~")
    return None if str(home).startswith("~") else home / ".kube" / "config"


def _files(kubeconfig: str | None, env: Mapping[str, str]) -> list[Path] | None:
    if kubeconfig:
        path = expanded(kubeconfig)
        if not path.is_file():
            raise KubeconfigError(f"--kubeconfig {kubeconfig}: no such file")
        return [path]
    if env.get("KUBECONFIG"):
        paths = [expanded(p) for p in env["KUBECONFIG"].split(os.pathsep) if p]
        existing = [p for p in paths if p.is_file()]
        if not existing:
            raise KubeconfigError(f"KUBECONFIG names no existing file ({env['KUBECONFIG']})")
        return existing
    home = default_kubeconfig(env)
    if home is not None and home.is_file():
        return [home]
    return None


def resolve(
    kubeconfig: str | None = None,
    context: str | None = None,
    namespace: str | None = None,
    env: Mapping[str, str] | None = None,
) -> ResolvedConfig:
    """Find the cluster, credentials and namespace to use, as kubectl would."""
    env = os.environ if env is None else env
    files = _files(kubeconfig, env)
    if files is None:
        if env.get("KUBERNETES_SERVICE_HOST") and (SERVICE_ACCOUNT / "token").is_file():
            config = KubeConfig.from_service_account(str(SERVICE_ACCOUNT)).get()
            ns_file = SERVICE_ACCOUNT / "namespace"
            own = ns_file.read_text().strip() if ns_file.is_file() else "default"
            return ResolvedConfig(config, None, namespace or own, "in-cluster service account")
        raise KubeconfigError(
            "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, create "
            "~/.kube/config, or run inside a cluster (or use --dry-run)"
        )
    merged = _merge([_load(path) for path in files])
    names = [c.get("name") for c in merged["contexts"]]
    chosen = context or merged.get("current-context")
    if not chosen:
        raise KubeconfigError(
            f"{files[0]} sets no current-context; pass --context (one of: {', '.join(map(str, names)) or 'none'})"
        )
    if chosen not in names:
        raise KubeconfigError(
            f"context {chosen!r} is not in {', '.join(map(str, files))} (contexts: {', '.join(map(str, names)) or 'none'})"
        )
    _check_context(merged, chosen, files[0].parent)
    try:
        single = KubeConfig.from_dict(merged, fname=str(files[0])).get(context_name=chosen)
    except Exception as err:  # lightkube raises ConfigError/KeyError on broken files
        raise KubeconfigError(f"kubeconfig context {chosen!r} is unusable: {err}") from None
    if single is None:
        raise KubeconfigError(f"kubeconfig context {chosen!r} is unusable")
    context_ns = single.context.namespace if single.context else None
    return ResolvedConfig(single, chosen, namespace or context_ns or "default", str(files[0]))
