"""spec.managedBy on the real cluster: fluxhop's CRD (deploy/) refuses a
change of it once the resource exists, and ``fluxhop operator`` leaves a
resource another controller keeps alone while it runs one of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.realk8s.api import Api, ApiError
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.outcomes import MINICLUSTERS
from tests.realk8s.placing import placed_minicluster
from tests.realk8s.test_operator import Operator, deployed, until  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("needs_flux")
THEIRS = "kueue.x-k8s.io/multikueue"


def minicluster(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
            "metadata": {"name": name},
            "spec": {"size": 1, "flux": {"container": {"disable": True}},
                     "containers": [{"image": "host", "command": "true"}], **spec}}  # fmt: skip


def refused(admin: Api, path: str, patch: dict[str, Any]) -> str:
    with pytest.raises(ApiError) as caught:
        admin.patch(path, patch, kind="merge")
    return str(caught.value)


def test_another_controllers_minicluster_is_left_alone_and_its_manager_kept(
    cluster: LocalCluster,
    admin: Api,
    namespace: str,
    deployed: Path,  # noqa: F811
    tmp_path: Path,
):
    path = MINICLUSTERS.format(namespace)
    admin.create(path, minicluster("theirs", managedBy=THEIRS))
    admin.create(path, placed_minicluster(cluster, minicluster("ours")))
    operator = Operator(cluster, deployed, namespace, tmp_path / "operator.log")
    try:
        # the operator has reconciled its own to the end: it has seen both
        until("ours Succeeded", operator, lambda: any(
            c["type"] == "Succeeded" and c["status"] == "True"
            for c in (admin.get(f"{path}/ours").get("status") or {}).get("conditions") or []))  # fmt: skip
        jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
        assert admin.find(f"{jobs}/theirs") is None
        theirs = admin.get(f"{path}/theirs")
        assert "status" not in theirs or not theirs["status"], theirs.get("status")
        annotations = theirs["metadata"].get("annotations") or {}
        assert not [key for key in annotations if key.startswith("fluxhop.io/")], annotations
    finally:
        operator.stop()
    # immutable once the resource exists: changed, removed, or added
    assert "spec.managedBy is immutable" in refused(admin, f"{path}/theirs",
                                                    {"spec": {"managedBy": "other.io/x"}})  # fmt: skip
    assert "spec.managedBy is immutable" in refused(admin, f"{path}/theirs",
                                                    {"spec": {"managedBy": None}})  # fmt: skip
    assert "spec.managedBy is immutable" in refused(admin, f"{path}/ours",
                                                    {"spec": {"managedBy": THEIRS}})  # fmt: skip
