"""Rabbit MPI: a Flux job's ``rabbit.mpi.*`` attributes become a MiniCluster
on the job's Near Node Flash "rabbit" storage nodes (``fluxhop hop``,
``flux hop``, and the DWS setup/teardown hooks in :mod:`fluxhop.rabbit.hooks`).
"""

from __future__ import annotations

from fluxhop.rabbit.errors import RabbitError
from fluxhop.rabbit.request import DEFAULT_IMAGE, RabbitRequest
from fluxhop.rabbit.workflow import Workflow

__all__ = ["DEFAULT_IMAGE", "RabbitError", "RabbitRequest", "Workflow"]
