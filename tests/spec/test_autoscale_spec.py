"""spec.autoscale: its bounds are minSize and maxSize, and a bad value is one
line naming the field (nothing is created from a spec that fails here)."""

from __future__ import annotations

import pytest

from fluxhop.errors import SpecError
from fluxhop.spec import MiniCluster
from fluxhop.spec.autoscale import DEFAULT_DELAY
from tests.documents import minicluster_doc


def spec_of(**spec: object) -> MiniCluster:
    return MiniCluster.from_dict(
        minicluster_doc("grow", containers=[{"image": "x", "command": "y"}], **spec)
    )


def test_asked_for_with_its_bounds_and_default_delay():
    spec = spec_of(size=1, maxSize=4, autoscale={})
    assert spec.spec.autoscale is not None
    assert spec.spec.autoscale.scale_down_delay_seconds == DEFAULT_DELAY
    assert spec_of(size=1).spec.autoscale is None


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"autoscale": {"scaleDownDelaySeconds": -1}, "maxSize": 4},
         "spec.autoscale.scaleDownDelaySeconds: Input should be greater than or equal to 0"),
        ({"autoscale": {"scaleDownDelaySeconds": "5m"}, "maxSize": 4},
         "spec.autoscale.scaleDownDelaySeconds"),
        ({"size": 4, "minSize": 5, "maxSize": 4, "autoscale": {}},
         "minSize 5 is larger than maxSize 4"),
        ({"autoscale": {}}, "autoscale needs maxSize"),
        ({"autoscale": {"delay": 3}, "maxSize": 4}, "spec.autoscale.delay"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_naming_the_field(spec, says):
    with pytest.raises(SpecError) as error:
        spec_of(**spec)
    assert says in str(error.value) and "\n" not in str(error.value), str(error.value)
