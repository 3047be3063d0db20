"""kopf's record of what it last handled on a MiniCluster, as a digest.

kopf decides from this record whether a resource changed since it last ran
the handlers, and keeps the whole spec in it by default: in an annotation,
which holds 256 KiB at most. A MiniCluster with a long command could not be
recorded, and kopf tried again forever ("metadata.annotations: Too long").
fluxhop's handler reconciles from the resource itself, never from kopf's
diff, so kopf needs to know only whether the spec changed: the record is a
digest of what kopf would have kept. An older operator's record (the spec
itself) is still read as kopf reads it.

It is kept on this operator's own resources only. kopf writes it even on a
resource every handler's filter leaves out; one another controller keeps is
copied as it is (Kueue's MultiKueue copies it to a worker, whose operator
would take the record for its own and see an update, not a creation).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import kopf

from fluxhop.operator.resource import managed_elsewhere

__all__ = ["DIGEST", "OwnDiffBase", "digest"]

DIGEST = "sha256:"  # how a record that is a digest starts (kopf's own is JSON)


def digest(essence: Any) -> str:
    text = json.dumps(essence, sort_keys=True, separators=(",", ":"))
    return DIGEST + hashlib.sha256(text.encode()).hexdigest()


class OwnDiffBase(kopf.AnnotationsDiffBaseStorage):
    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        if managed_elsewhere(dict(body)):
            return
        for key in self.make_keys(self.key, body=body):
            patch.metadata.annotations[key] = digest(essence)
        self._store_marker(prefix=self.prefix, patch=patch, body=body)

    def fetch(self, *, body: Any) -> Any:
        """What kopf last handled: the resource as it is now where the digest
        matches it (no change), else nothing of it (a change, every field)."""
        for key in self.make_keys(self.key, body=body):
            stored = body.metadata.annotations.get(key)
            if stored is None:
                continue
            if not stored.startswith(DIGEST):
                return super().fetch(body=body)
            now = self.build(body=body)
            return now if digest(now) == stored.strip() else {}
        return None
