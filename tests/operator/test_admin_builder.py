"""spec.admin: nsqadmin's Deployment and Service, valid Kubernetes, asking every lookupd,
with flags that nsqadmin itself accepts."""
from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from pydantic import ValidationError

from nsq_operator.builders import build_cluster
from nsq_operator.builders.admin import build_admin_deployment, build_admin_service
from nsq_protocol.flags import build_options, parse_command_line
from nsqadmin.options import NsqadminOptions
from tests.operator.samples import cluster

ADMIN_SPEC: dict[str, Any] = {"replicas": 2, "serviceType": "LoadBalancer",
                              "resources": {"requests": {"cpu": "50m"}, "limits": {"memory": "128Mi"}}}


@pytest.mark.parametrize("version", ["1.28.0", "1.33.0"])
@pytest.mark.parametrize("admin", [{}, ADMIN_SPEC, {"enabled": False}], ids=["defaults", "everything-set", "disabled"])
def test_admin_manifests_are_valid_kubernetes(admin: dict[str, Any], version: str) -> None:
    demo = cluster(admin=admin, scheduling={"nodeSelector": {"pool": "web"}})
    for manifest in (build_admin_deployment(demo), build_admin_service(demo)):
        kubernetes_validate.validate(manifest, version, strict=True)


def test_nsqadmin_asks_every_lookupd_by_name_and_is_served_by_its_service() -> None:
    demo = cluster(lookupd={"replicas": 2})
    kinds = [(m["kind"], m["metadata"]["name"]) for m in build_cluster(demo)]
    assert ("Deployment", "demo-nsqadmin") in kinds and ("Service", "demo-nsqadmin") in kinds
    deployment, service = build_admin_deployment(demo), build_admin_service(demo)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["nsqadmin"]
    assert container["args"] == ["--http-address=0.0.0.0:4171",
                                 "--lookupd-http-address=demo-lookupd-0.demo-lookupd.ns1.svc:4161",
                                 "--lookupd-http-address=demo-lookupd-1.demo-lookupd.ns1.svc:4161"]
    assert deployment["spec"]["replicas"] == 1
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [{"name": "http", "port": 4171, "targetPort": "http", "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/ping", "port": "http"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    options = build_options(NsqadminOptions, parse_command_line(container["args"], NsqadminOptions))
    assert options.nsqlookupd_http_addresses == ["demo-lookupd-0.demo-lookupd.ns1.svc:4161",
                                                 "demo-lookupd-1.demo-lookupd.ns1.svc:4161"]


def test_admin_knobs() -> None:
    demo = cluster(admin=ADMIN_SPEC)
    deployment, service = build_admin_deployment(demo), build_admin_service(demo)
    assert deployment["spec"]["replicas"] == 2 and service["spec"]["type"] == "LoadBalancer"
    assert deployment["spec"]["template"]["spec"]["containers"][0]["resources"] == ADMIN_SPEC["resources"]
    assert build_admin_deployment(cluster(admin={"enabled": False, "replicas": 3}))["spec"]["replicas"] == 0
    for bad in ({"replicas": 11}, {"serviceType": "ExternalName"}, {"enabled": "sometimes"}, {"port": 1}):
        with pytest.raises(ValidationError):
            cluster(admin=bad)
