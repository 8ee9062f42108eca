#!/usr/bin/env bash
# The demo on the running one-node cluster (make cluster): the CRDs applied server-side,
# the chart installed, then e2e/kind/scenario.sh: an NsqCluster with topics and channels,
# a load from pods (published / acknowledged / delivered / lost / duplicates counted), a
# rolling upgrade and a scale-down under that load, and the counts checked. The same
# scenario runs on kind or any cluster with e2e/kind/ (README there).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HELM="${HELM:-$(command -v helm || true)}"
[[ -n "${HELM}" ]] || die "helm is needed: put it on PATH or set HELM (make cluster-demo finds one)"
export KUBECONFIG="${KUBECONFIG:-${KUBECONFIG_ADMIN}}"
export PATH="${BIN_DIR}:${PATH}"
export OPERATOR_NAMESPACE="${OPERATOR_NAMESPACE:-nsq-system}" RELEASE="${RELEASE:-nsq-operator}"
export NAMESPACE="${NAMESPACE:-nsq-demo}" IMAGE_REPOSITORY="${ROLLOUT_IMAGE_REPOSITORY}"
export IMAGE_TAG=e2e-1 UPGRADE_TAG=e2e-2

log "applying the CRDs and installing the chart (release ${RELEASE} in ${OPERATOR_NAMESPACE})"
kubectl apply --server-side --force-conflicts -f "${REPO_DIR}/crds/" >/dev/null
"${HELM}" upgrade --install "${RELEASE}" "${REPO_DIR}/charts/nsq-operator" --namespace "${OPERATOR_NAMESPACE}" \
  --create-namespace --set intervals.status=5 --set intervals.drift=10 --wait --timeout 5m >/dev/null
"${REPO_DIR}/e2e/kind/scenario.sh"
for load in "${ARTIFACTS_DIR:-${TMPDIR:-/tmp}/nsq-e2e-kind}"/load-*.log; do
  grep '^RESULT ' "${load}" | sed "s|^|$(basename "${load}" .log) |"
done
