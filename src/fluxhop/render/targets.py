"""What a MiniCluster is created as: its target."""

from __future__ import annotations

from enum import StrEnum

from fluxhop.errors import SpecError

__all__ = ["Target"]


class Target(StrEnum):
    """The workload a MiniCluster becomes (its *root* object)."""

    JOB = "job"  # an Indexed Job: runs on any cluster
    JOBSET = "jobset"  # a JobSet: needs the JobSet controller
    MINICLUSTER = "minicluster"  # the Flux Operator's own resource

    @classmethod
    def parse(cls, value: str) -> Target:
        """``value`` as a Target; a one-line error names the choices."""
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(t.value for t in cls)
            raise SpecError(f"target {value!r} is not one of {choices}") from None

    @property
    def kind(self) -> str:
        """The kind of the root object."""
        return {"job": "Job", "jobset": "JobSet", "minicluster": "MiniCluster"}[self.value]
