"""Spec in, Kubernetes objects out: pure and deterministic (no I/O; the same
spec and certificate give the same bytes).

Targets:

* ``job`` (default): Indexed Job, headless Service, ConfigMap, Secret and a
  NetworkPolicy - plain objects that work on any cluster;
* ``jobset``: the same pods in a JobSet;
* ``minicluster``: the Flux Operator's MiniCluster resource.
"""

from __future__ import annotations

from typing import Any

from fluxhop.arguments import checked
from fluxhop.errors import SpecError, shown
from fluxhop.flux.curve import CurveCert
from fluxhop.render.bundle import DEFAULT_PATHS, Bundle, Layout, build_bundle
from fluxhop.render.job import indexed_job
from fluxhop.render.jobset import host_prefix, jobset
from fluxhop.render.objects import (
    config_map,
    curve_secret,
    headless_service,
    lead_state_claim,
    network_policy,
)
from fluxhop.render.operator import minicluster_resource
from fluxhop.render.scripts import PodPaths
from fluxhop.render.targets import Target
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.spec.rules import dns_subdomain_problem

__all__ = ["TARGETS", "Target", "bundle_for", "check_cluster_domain", "pod_host_prefix", "render"]

TARGETS: tuple[str, ...] = tuple(t.value for t in Target)


def _cert(spec: MiniCluster, cert: CurveCert | None) -> CurveCert:
    if cert is not None:
        return cert
    if spec.spec.flux.curve_cert:
        return CurveCert.from_zpl(spec.spec.flux.curve_cert.get_secret_value())
    return CurveCert.generate(spec.name)


def pod_host_prefix(name: str, target: Target | str) -> str:
    """What the pods' host names of MiniCluster ``name`` start with, before
    the rank: ``<name>-`` (an Indexed Job's, or the Flux Operator's), or the
    JobSet's ``<name>-<replicated job>-0-``."""
    return host_prefix(name) if Target.parse(target) is Target.JOBSET else f"{name}-"


def check_cluster_domain(cluster_domain: str) -> None:
    """A cluster domain a pod's host name can end in, or one line why not."""
    problem = dns_subdomain_problem(cluster_domain)
    if problem:
        raise SpecError(f"cluster_domain {shown(cluster_domain)} {problem} (e.g. cluster.local)")


@checked
def bundle_for(
    spec: MiniCluster,
    target: Target | str = Target.JOB,
    *,
    cert: CurveCert | None = None,
    cluster_domain: str = "cluster.local",
    paths: PodPaths = DEFAULT_PATHS,
    cores_per_node: int | None = None,
) -> Bundle:
    """The Flux bootstrap bundle for the pods ``target`` creates (see
    :func:`build_bundle` for ``paths`` and ``cores_per_node``)."""
    target = Target.parse(target)
    check_cluster_domain(cluster_domain)
    prefix = pod_host_prefix(spec.name, target)
    longest = f"{prefix}{spec.spec.max_nodes - 1}"
    if len(longest) > 63:
        raise SpecError(
            f"metadata.name {spec.name!r} is too long for target {target}: pod host name "
            f"{longest!r} would exceed 63 characters; use a shorter name"
        )
    layout = Layout(prefix, spec.headless_name, spec.namespace, cluster_domain)
    return build_bundle(spec, layout, _cert(spec, cert), paths=paths, cores_per_node=cores_per_node)


@checked
def render(
    spec: MiniCluster,
    target: Target | str = Target.JOB,
    *,
    cert: CurveCert | None = None,
    cluster_domain: str = "cluster.local",
) -> list[dict[str, Any]]:
    """Render ``spec`` for ``target``, in an order ``kubectl apply`` can use.

    ``cert`` pins the CURVE certificate (a fresh one is generated otherwise,
    unless the spec carries ``flux.curveCert``).
    """
    target = Target.parse(target)
    if target is Target.MINICLUSTER:
        return [minicluster_resource(spec)]
    if spec.spec.managed_elsewhere:
        raise SpecError(
            f"spec.managedBy {spec.spec.managed_by} hands the MiniCluster resource to another "
            "controller, and a Job or JobSet of fluxhop's is no resource to hand: apply the "
            "MiniCluster resource to a cluster that runs fluxhop operator (kubectl apply -f)"
        )
    bundle = bundle_for(spec, target, cert=cert, cluster_domain=cluster_domain)
    objects = [config_map(spec, bundle), curve_secret(spec, bundle)]
    claim = lead_state_claim(spec)
    if claim is not None:
        objects.append(claim)
    if target is Target.JOB:
        objects += [headless_service(spec), network_policy(spec), indexed_job(spec, bundle)]
    else:
        objects += [network_policy(spec), jobset(spec, bundle)]
    return objects
