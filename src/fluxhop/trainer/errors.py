"""The Kubeflow Trainer front door's error."""

from __future__ import annotations

from fluxhop.errors import InputError

__all__ = ["TrainerError"]


class TrainerError(InputError):
    """A TrainJob or runtime fluxhop cannot turn into a Flux JobSet."""
