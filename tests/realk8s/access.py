"""How clients reach a LocalCluster (cluster.py), which it is a base of:
kubeconfigs (by files, or all inline for MultiKueue's Secret), credentials
for the tests' API client, the admin's client, ServiceAccount tokens."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from tests.realk8s.api import Api, Credentials
from tests.realk8s.pki import CA, KeyPair

__all__ = ["Access"]


class Access:
    admin_pair: KeyPair
    ca: CA
    name: str
    server: str
    workdir: Path

    def kubeconfig(
        self, name: str, *, pair: KeyPair | None = None, token: str | None = None
    ) -> Path:
        user: dict[str, str] = {}
        if pair is not None:
            user = {"client-certificate": str(pair.cert), "client-key": str(pair.key)}
        if token is not None:
            user = {"token": token}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "fluxhop-test",
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca.cert)},
                }
            ],
            "users": [{"name": name, "user": user}],
            "contexts": [
                {
                    "name": name,
                    "context": {"cluster": "fluxhop-test", "user": name, "namespace": "default"},
                }
            ],
            "current-context": name,
        }
        path = self.workdir / "kubeconfigs" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def kubeconfig_text(self, name: str, token: str) -> str:
        """A kubeconfig with everything in it (the CA inline, a token): what
        Kueue's MultiKueue takes from a Secret, which refuses file paths."""
        ca = base64.b64encode(self.ca.cert.read_bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": self.name, "cluster": {"server": self.server,
                                                         "certificate-authority-data": ca}}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": self.name, "user": name}}],
            "current-context": name,
        }  # fmt: skip
        return yaml.safe_dump(config)

    def credentials(self, pair: KeyPair | None = None, token: str | None = None) -> Credentials:
        pair = pair or self.admin_pair
        if token is not None:
            return Credentials(self.server, self.ca.cert, token=token)
        return Credentials(self.server, self.ca.cert, pair.cert, pair.key)

    def admin(self) -> Api:
        return Api(self.credentials())

    def token(self, namespace: str, account: str, seconds: int = 3600) -> str:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        with self.admin() as api:
            path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"
            return str(api.create(path, body)["status"]["token"])
