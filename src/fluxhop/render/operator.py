"""Target ``minicluster``: the Flux Operator's own custom resource.

For clusters that run the Flux Operator: the operator builds the pods, the
scripts and the certificate itself (its certificate lives in a ConfigMap,
its defect, so the ``job`` target is the safer default). Operator features
that fluxhop's own pods lack (batch, services, ...) are passed on, so they
still work there; legacy v1alpha1 fields that the API server would prune and
fluxhop-only fields are left out. Commands go back to the operator's string
form, quoted so its shell splits them into the same words.
"""

from __future__ import annotations

import itertools
import shlex
import warnings
from typing import Any

from fluxhop.errors import FluxhopWarning, SpecError, shown
from fluxhop.render.objects import common_labels
from fluxhop.spec.kueue import QUEUE_LABEL, queue_of
from fluxhop.spec.minicluster import API_VERSION, MiniCluster
from fluxhop.spec.pod import EXTENSIONS as POD_EXTENSIONS
from fluxhop.spec.rules import image_problem

__all__ = ["minicluster_resource"]


def _put(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    node: Any = doc
    for part, following in itertools.pairwise(path):
        if isinstance(node, list):
            node = node[part]
            continue
        if part not in node:
            node[part] = [] if isinstance(following, int) else {}
        node = node[part]
    node[path[-1]] = value


_EXTENSION = "it is a fluxhop extension the Flux Operator does not know"
# Fields of the spec the Flux Operator's resource never gets, and why.
_LEFT_OUT = {
    # a secret key belongs in a Secret only, never in a resource anyone who may
    # read MiniClusters can read
    ("flux", "curveCert"): "its secret key would be readable there; the Flux Operator "
    "generates its own certificate",
    ("flux", "networkDevice"): _EXTENSION,
    **{("pod", field): _EXTENSION for field in POD_EXTENSIONS},
}


def _leave_out(body: dict[str, Any]) -> None:
    for toleration in (body.get("pod") or {}).get("tolerations") or []:
        if toleration.pop("tolerationSeconds", None) is not None:
            warnings.warn(
                "spec.pod.tolerations[].tolerationSeconds is not copied into the MiniCluster "
                "resource: the Flux Operator's CRD has no such field",
                FluxhopWarning,
                stacklevel=3,
            )
    for section, why in (("metrics", "serves no metrics from the instance"),
                         ("autoscale", "does not size a MiniCluster to its queue"),
                         ("health", "runs no health checks"),
                         ("leadState", "keeps no state of rank 0 across its loss"),
                         ("suspend", "holds no MiniCluster")):  # fmt: skip
        if body.pop(section, None) is not None:
            warnings.warn(
                f"spec.{section} is not copied into the MiniCluster resource: {_EXTENSION} (the "
                f"Flux Operator {why})",
                FluxhopWarning,
                stacklevel=3,
            )
    for index, container in enumerate(body.get("containers") or []):
        if container.pop("hostPorts", None) is not None:
            warnings.warn(
                f"spec.containers[{index}].hostPorts is not copied into the MiniCluster "
                f"resource: {_EXTENSION}",
                FluxhopWarning,
                stacklevel=3,
            )
    flux = body.get("flux") or {}
    view = flux.get("container") or {}
    if view.pop("volume", None) is not None:
        warnings.warn(
            "spec.flux.container.volume is not copied into the MiniCluster resource: "
            f"{_EXTENSION} (the Flux Operator always copies the view in an init container)",
            FluxhopWarning,
            stacklevel=3,
        )
        if not view:
            del flux["container"]
    for (section, field), why in _LEFT_OUT.items():
        part = body.get(section) or {}
        if part.pop(field, None) is not None:
            warnings.warn(
                f"spec.{section}.{field} is not copied into the MiniCluster resource: {why}",
                FluxhopWarning,
                stacklevel=3,
            )
        if section in body and not part:
            del body[section]


def _queue(spec: MiniCluster, body: dict[str, Any]) -> None:
    """The queue label goes where the Flux Operator copies labels onto its
    Job, ``spec.jobLabels``: Kueue manages no MiniCluster resource, but it
    queues that Job (its webhook suspends it as it is made, and admits it
    with the quota), as tests/realk8s/test_two_operators_examples.py shows.
    A label on the MiniCluster's metadata alone reaches no Job there."""
    queue = queue_of(spec)
    if queue:
        body.setdefault("jobLabels", {})[QUEUE_LABEL] = queue


def _document(spec: MiniCluster) -> dict[str, Any]:
    doc = spec.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
    doc.setdefault("spec", {})["size"] = spec.spec.size  # explicit even when it is the default
    for path, value in spec.operator_extras:
        _put(doc, path, value)
    return doc


def _job_shape(spec: MiniCluster, body: dict[str, Any]) -> None:
    """The same job as fluxhop's own pods run, in the operator's terms.

    The CRD defaults ``tasks`` to 1 (one task in all), so the task count is
    always written. The operator runs ``-N size -n tasks`` + optionFlags, so
    ``--exclusive`` there gives the job every core and GPU of its nodes, as
    fluxhop's rule does (render.bundle.flux_run_args). With fewer tasks than
    nodes the operator passes no ``-N``, and Flux refuses ``--exclusive``
    without it: that case is said in one line when the pods have GPUs.
    """
    body_spec = spec.spec
    body["tasks"] = body_spec.ntasks
    if body_spec.tasks == 0:
        return  # the operator's "-N size" alone: exclusive by Flux's own rule
    if body_spec.ntasks < body_spec.size:
        if body_spec.flux_container.resources.gpus():
            warnings.warn(
                f"spec.tasks {body_spec.ntasks} is fewer than spec.size {body_spec.size}: the "
                "Flux Operator then runs flux run without -N, so tasks may not see the pods' "
                "GPUs; set tasks >= size or use --target job",
                FluxhopWarning,
                stacklevel=3,
            )
        return
    flux = body.setdefault("flux", {})
    words = shlex.split(flux.get("optionFlags", ""))
    if "--exclusive" not in words and "-x" not in words:
        flux["optionFlags"] = shlex.join(["--exclusive", *words])


def _scheduling(spec: MiniCluster, body: dict[str, Any]) -> None:
    """The queue policy fluxhop's own pods run with, written out: the
    operator's default, fcfs, fails the jobs fluxhop keeps waiting for
    brokers not up (MiniClusterSpec.queue_policy says why)."""
    policy = spec.spec.queue_policy
    if policy is not None:
        _put(body, ("flux", "scheduler", "queuePolicy"), policy)


def _check_services(body: dict[str, Any]) -> None:
    """The services fluxhop passes on unread (spec.services) still get the
    checks the API server and the kubelet would make of them: a list of
    containers, each image a reference a runtime can pull, each command a
    string or a list of strings."""
    services = body.get("services")
    if services is None:  # null, which the API server prunes too
        body.pop("services", None)
        return
    if not isinstance(services, list):
        raise SpecError("spec.services must be a list of containers")
    for index, service in enumerate(services):
        where = f"spec.services[{index}]"
        if not isinstance(service, dict):
            raise SpecError(f"{where} must be a mapping (a container)")
        image = service.get("image")
        if image is not None:
            if not isinstance(image, str):
                raise SpecError(f"{where}.image must be a string, not {shown(image)}")
            problem = image_problem(image)
            if problem:
                raise SpecError(f"{where}.image: {shown(image)} {problem}")
        command = service.get("command")
        if command is not None and not (
            isinstance(command, str)
            or (isinstance(command, list) and all(isinstance(word, str) for word in command))
        ):
            raise SpecError(f"{where}.command must be a string or a list of strings")


def minicluster_resource(spec: MiniCluster) -> dict[str, Any]:
    body: dict[str, Any] = _document(spec)["spec"]
    _check_services(body)
    for group in ("containers", "services"):
        for container in body.get(group) or []:
            if isinstance(container.get("command"), list):
                container["command"] = shlex.join(container["command"])
    _leave_out(body)
    _queue(spec, body)
    _job_shape(spec, body)
    _scheduling(spec, body)
    meta: dict[str, Any] = {
        "name": spec.name,
        "namespace": spec.namespace,
        "labels": common_labels(spec),
    }
    if spec.metadata.annotations:
        meta["annotations"] = dict(spec.metadata.annotations)
    return {"apiVersion": API_VERSION, "kind": "MiniCluster", "metadata": meta, "spec": body}
