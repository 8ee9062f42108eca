"""Every manifest of operator/examples is what its API server accepts: the nsq.dev objects
pass crdcheck (the apiserver's own validation, against the generated CRDs) and the
models, the built-in kinds Kubernetes' OpenAPI, cert-manager's and KEDA's kinds their
projects' CRDs; the example auth server's secrets grant what its comments say, as nsqd
reads the grants."""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from nsq_operator.builders import build_cluster
from nsq_operator.models import NsqChannelSpec, NsqCluster, NsqTopicSpec
from nsqd.auth import parse_auth_response
from tests import custom_kinds

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "operator" / "examples"
CRDCHECK = ROOT.parent / "shared" / "k8s-crdcheck" / "crdcheck"
NSQ_SPECS = {"NsqTopic": NsqTopicSpec, "NsqChannel": NsqChannelSpec}


def documents() -> list[tuple[str, dict[str, Any]]]:
    return [(path.name, doc) for path in sorted(EXAMPLES.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def test_the_examples_pass_crdcheck(tmp_path: Path) -> None:
    """(crdcheck knows the nsq.dev CRDs only: the other groups' objects are checked below.)"""
    tool = str(CRDCHECK) if CRDCHECK.exists() else shutil.which("crdcheck")
    if tool is None:
        pytest.skip("crdcheck (../shared/k8s-crdcheck) is not on this machine")
    nsq = [doc for _, doc in documents() if doc["apiVersion"].startswith("nsq.dev/")]
    objects = tmp_path / "nsq-objects.yaml"
    objects.write_text(yaml.safe_dump_all(nsq))
    done = subprocess.run([tool, *map(str, sorted((ROOT / "crds").glob("*.yaml"))), str(objects)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith(f"{len(nsq)} objects, 0 errors"), done.stdout


@pytest.mark.parametrize("name, doc", documents(), ids=lambda v: v if isinstance(v, str) else v["kind"])
def test_each_example_object_is_valid_for_its_api(name: str, doc: dict[str, Any]) -> None:
    if doc["kind"] == "NsqCluster":
        built = NsqCluster.from_body({**doc, "metadata": {"namespace": "default", **doc["metadata"], "uid": "u"}})
        for manifest in build_cluster(built):
            if custom_kinds.is_custom(manifest):
                custom_kinds.validate(manifest)
            else:
                kubernetes_validate.validate(manifest, "1.33.0", strict=True)
    elif doc["kind"] in NSQ_SPECS:
        NSQ_SPECS[doc["kind"]].model_validate(doc["spec"])
    elif custom_kinds.is_custom(doc):
        custom_kinds.validate(doc)
    else:
        kubernetes_validate.validate(doc, "1.33.0", strict=True)


def _auth_server() -> Any:
    spec = importlib.util.spec_from_file_location("example_auth_server", EXAMPLES / "auth_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_auth_secrets_grant_what_they_say(tmp_path: Path) -> None:
    server = _auth_server()
    secret = next(doc for name, doc in documents() if name == "auth-server.yaml" and doc["kind"] == "Secret")
    path = tmp_path / "secrets.json"
    path.write_text(secret["stringData"]["secrets.json"])
    secrets = server.load_secrets(path)

    def grants(secret: str, tls: bool = True) -> Any:
        status, body = server.answer(secrets, {"secret": secret, "tls": "true" if tls else "false"}, 3600, True)
        return parse_auth_response(json.loads(json.dumps(body))) if status == 200 else status
    shop, billing = grants("change-me-shop"), grants("change-me-billing")
    assert shop.allows("orders", "") and not shop.allows("orders", "billing") and not shop.allows("clicks", "")
    assert billing.allows("orders", "billing") and not billing.allows("orders", "") \
        and not billing.allows("orders", "archive")
    assert grants("guess") == 403 and grants("change-me-shop", tls=False) == 403
