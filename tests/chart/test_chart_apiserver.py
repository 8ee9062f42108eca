"""What `helm install` sends with the example cluster on passes a real kube-apiserver's
checks of CRDs and custom resources (crdcheck: structural schema, defaulting, pruning,
validation, CEL), judged by the CRDs the chart itself ships."""
from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tests.apiserver_checks import ABSENT, check, tool
from tests.chart.render import Helm
from tests.chart.values import CUSTOM

pytestmark = pytest.mark.skipif(tool() is None, reason=ABSENT)

DEFAULT_EXAMPLE: dict[str, Any] = {"exampleCluster": {"enabled": True, "topics": [{"name": "orders", "channels": ["billing"]}]}}


@pytest.mark.parametrize("values", [DEFAULT_EXAMPLE, CUSTOM], ids=["default-example", "custom"])
def test_the_rendered_chart_is_accepted(helm: Helm, values: dict[str, Any], tmp_path: Any) -> None:
    objects = helm.template(copy.deepcopy(values), include_crds=True)
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    ours = [o for o in objects if o["apiVersion"].startswith("nsq.dev/")]
    assert len(crds) == 3 and {o["kind"] for o in ours} == {"NsqCluster", "NsqTopic", "NsqChannel"}
    shipped = tmp_path / "chart-crds.yaml"
    shipped.write_text(yaml.safe_dump_all(crds))
    assert check(ours, crds=[shipped]) == []
