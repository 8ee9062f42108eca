#!/usr/bin/env bash
# A user's upgrade, on the running one-node cluster (make cluster): the previous release's
# CRDs and chart (PREVIOUS_RELEASE_REF in versions.env) installed with its image, an
# NsqCluster with topics and channels under load from pods; then, as CHANGELOG.md says to
# upgrade, this checkout's CRDs applied server-side and `helm upgrade` to its chart (the new
# operator takes over the running cluster), then the cluster's image moved on, rolled pod by
# pod. Checked: 0 acknowledged messages lost, nothing left Terminating.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export KUBECONFIG="${KUBECONFIG:-${KUBECONFIG_ADMIN}}"
export PATH="${BIN_DIR}:${PATH}"
export OPERATOR_NAMESPACE="${OPERATOR_NAMESPACE:-nsq-upgrade-ops}" RELEASE="${RELEASE:-nsq}"
export NAMESPACE="${NAMESPACE:-nsq-upgrade}" IMAGE_REPOSITORY="${PREVIOUS_IMAGE%:*}"
export IMAGE_TAG="${PREVIOUS_IMAGE##*:}" UPGRADE_TAG=e2e-2
HELM="${HELM:-$(command -v helm || true)}"
[[ -n "${HELM}" ]] || die "helm is needed: put it on PATH or set HELM"
UPGRADED_IMAGE="${ROLLOUT_IMAGE_REPOSITORY}:${UPGRADE_TAG}"
# shellcheck source=../kind/lib.sh
source "${REPO_DIR}/e2e/kind/lib.sh"
# shellcheck source=../kind/checks.sh
source "${REPO_DIR}/e2e/kind/checks.sh"

previous="$(mktemp -d)"
trap 'rm -rf "${previous}"' EXIT
git -C "${REPO_DIR}" cat-file -e "${PREVIOUS_RELEASE_REF}^{commit}" 2>/dev/null \
  || die "commit ${PREVIOUS_RELEASE_REF} (the previous release) is not in this clone: fetch the whole history"
git -C "${REPO_DIR}" archive "${PREVIOUS_RELEASE_REF}" crds charts/nsq-operator | tar -x -C "${previous}"
operator_settings=(--namespace "${OPERATOR_NAMESPACE}" --set-json "watchNamespaces=[\"${NAMESPACE}\"]"
  --set intervals.status=5 --set intervals.drift=10 --wait --timeout 5m)
mkdir -p "${ARTIFACTS_DIR}"

log "the previous release (${PREVIOUS_RELEASE_REF:0:12}): its CRDs, its chart, its image ${PREVIOUS_IMAGE}"
kubectl apply --server-side --force-conflicts -f "${previous}/crds/" >/dev/null
kubectl create namespace "${NAMESPACE}" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace "${NAMESPACE}" --overwrite pod-security.kubernetes.io/enforce=restricted >/dev/null
"${HELM}" install "${RELEASE}" "${previous}/charts/nsq-operator" --create-namespace "${operator_settings[@]}" \
  --set "image.repository=${PREVIOUS_IMAGE%:*}" --set "image.tag=${PREVIOUS_IMAGE##*:}" >/dev/null
render cluster.yaml | kubectl apply -f - >/dev/null
wait_until "${READY_TIMEOUT}" "cluster Ready under the previous release" cluster_settled_on "${PREVIOUS_IMAGE}" 3
for channel in orders-billing orders-archive clicks-billing clicks-archive; do
  k wait --for condition=Ready --timeout 120s "nsqchannel/${channel}" >/dev/null
done

start_load load-release-upgrade
sleep "${LOAD_WARMUP}"  # load before the change, by design: not a synchronisation
log "upgrading: this checkout's CRDs first, then its chart"
kubectl apply --server-side --force-conflicts -f "${REPO_DIR}/crds/" >/dev/null
for crd in nsqclusters nsqtopics nsqchannels; do
  kubectl wait --for condition=Established --timeout 60s "crd/${crd}.nsq.dev" >/dev/null
done
"${HELM}" upgrade "${RELEASE}" "${REPO_DIR}/charts/nsq-operator" "${operator_settings[@]}" >/dev/null
operator_image="$(kubectl -n "${OPERATOR_NAMESPACE}" get deployment -o jsonpath='{.items[0].spec.template.spec.containers[0].image}')"
[[ "${operator_image}" == "$(project_image_name)" ]] || die "the upgraded operator runs ${operator_image}"
wait_until "${ROLL_TIMEOUT}" "the new operator settled the cluster" cluster_settled_on "${PREVIOUS_IMAGE}" 3

log "the cluster's image moved to this release's, rolled under the same load"
k patch nsqcluster "${CLUSTER_NAME}" --type merge --patch "{\"spec\": {\"image\": \"${UPGRADED_IMAGE}\"}}" >/dev/null
wait_until "${ROLL_TIMEOUT}" "every pod runs ${UPGRADED_IMAGE}" cluster_settled_on "${UPGRADED_IMAGE}" 3
sleep "${LOAD_COOLDOWN}"  # load after the change: producers and consumers are back on every nsqd
stop_load load-release-upgrade

terminating="$(kubectl get nsqclusters,nsqtopics,nsqchannels,statefulsets,pods,pvc -n "${NAMESPACE}" \
  -o jsonpath='{range .items[?(@.metadata.deletionTimestamp)]}{.kind}/{.metadata.name} {end}')"
[[ -z "${terminating}" ]] || die "left Terminating after the upgrade: ${terminating}"
log "nothing Terminating after the upgrade"

log "deleting the cluster and the release"
k delete nsqchannels,nsqtopics --all --wait --timeout 120s >/dev/null
k delete nsqcluster "${CLUSTER_NAME}" --wait --timeout 180s >/dev/null
"${HELM}" uninstall "${RELEASE}" --namespace "${OPERATOR_NAMESPACE}" --wait --timeout 3m >/dev/null
kubectl delete namespace "${NAMESPACE}" "${OPERATOR_NAMESPACE}" --wait --timeout 180s >/dev/null
log "upgrade scenario passed"
