"""The Flux Operator's v1alpha1 fields and what each became in v1alpha2.

Old files and old documentation still use them, so a user who writes one gets
the v1alpha2 spelling in the same line, not a list of valid keys. Fields of
the container are errors: ignoring them would silently change what runs (a
``preCommand`` that never runs, volumes that are not mounted). Top-level ones
are dropped with a warning, as the v1alpha2 API server prunes them, so that
the operator's own examples (several keep a top-level ``volumes``) still load.
"""

from __future__ import annotations

__all__ = ["COMMANDS", "CONTAINER", "SPEC"]

_AS_ROOT = (
    "was removed: Flux runs as the container's user; run the container as root "
    "(securityContext) or set spec.pod.securityContext.runAsUser"
)

CONTAINER: dict[str, str] = {
    "existingVolumes": "became volumes (NAME: {path, claimName | configMapName | secretName "
    "| hostPath | emptyDir})",
    "preCommand": "became commands.pre",
    "fluxUser": "was removed: Flux runs as the container's user; "
    "set spec.pod.securityContext.runAsUser",
    "cores": "was removed: set resources.limits.cpu (or requests.cpu); R is written from it",
    "diagnostics": "was removed: set spec.logging.debug: true or spec.flux.logLevel",
    "runFluxAsRoot": _AS_ROOT,
    "fluxOptionFlags": "became spec.flux.optionFlags",
    "fluxLogLevel": "became spec.flux.logLevel",
}

COMMANDS: dict[str, str] = {
    "runFluxAsRoot": _AS_ROOT,
}

SPEC: dict[str, str] = {
    "volumes": "v1alpha2 makes no volumes: create the PersistentVolumeClaim yourself and name "
    "it in containers[].volumes (claimName)",
    "users": "v1alpha2 MiniClusters are single-user (the container's user)",
    "fluxRestful": "v1alpha2 has no RESTful server; use flux proxy (fluxhop proxy)",
    "cores": "in v1alpha2 set containers[].resources.limits.cpu",
    "fluxUser": "in v1alpha2 Flux runs as the container's user (spec.pod.securityContext)",
    "preCommand": "in v1alpha2 it is containers[].commands.pre",
    "diagnostics": "in v1alpha2 set spec.logging.debug: true",
}
