"""Kubeflow Trainer: a TrainJob whose runtime has a ``flux`` ML policy becomes
the JobSet (plus ConfigMap and Secret) the Trainer's Flux plugin would build,
without the plugin's defects (see :mod:`fluxhop.trainer.build`)."""

from __future__ import annotations

from fluxhop.trainer.build import build
from fluxhop.trainer.errors import TrainerError

__all__ = ["TrainerError", "build"]
