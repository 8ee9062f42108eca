#!/usr/bin/env bash
# A kind cluster with the operator installed: creates the cluster (unless it exists),
# builds the image from the repository's Dockerfile, loads it into the nodes under both
# tags, and installs charts/nsq-operator with helm.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need docker kind kubectl helm

if kind get clusters | grep -qx "${KIND_CLUSTER}"; then
  log "kind cluster ${KIND_CLUSTER} exists: reusing it"
else
  log "creating kind cluster ${KIND_CLUSTER}"
  kind create cluster --name "${KIND_CLUSTER}" --config "${KIND_DIR}/kind-config.yaml" --wait 180s
fi
kubectl config use-context "kind-${KIND_CLUSTER}" >/dev/null

log "installing cert-manager ${CERT_MANAGER_VERSION} (the TLS scenario's issuer)"
kubectl apply --server-side --force-conflicts --filename "${CERT_MANAGER_MANIFEST}" >/dev/null
for deployment in cert-manager cert-manager-webhook cert-manager-cainjector; do
  kubectl --namespace cert-manager rollout status "deployment/${deployment}" --timeout 180s >/dev/null
done

log "building $(image "${IMAGE_TAG}") from ${ROOT}/Dockerfile"
DOCKER_BUILDKIT=1 docker build --tag "$(image "${IMAGE_TAG}")" "${ROOT}"
docker tag "$(image "${IMAGE_TAG}")" "$(image "${UPGRADE_TAG}")"
log "loading the image into the nodes as ${IMAGE_TAG} and ${UPGRADE_TAG}"
kind load docker-image --name "${KIND_CLUSTER}" "$(image "${IMAGE_TAG}")" "$(image "${UPGRADE_TAG}")"

# helm installs crds/ on the first install only: the CRDs are applied first, as an upgrade
# must (operator/UPGRADING.md), so a reused cluster runs this version's
log "applying the CRDs (server-side)"
kubectl apply --server-side --force-conflicts --filename "${ROOT}/crds/" >/dev/null
log "installing the chart (release ${RELEASE} in ${OPERATOR_NAMESPACE})"
helm upgrade --install "${RELEASE}" "${ROOT}/charts/nsq-operator" \
  --namespace "${OPERATOR_NAMESPACE}" --create-namespace \
  --values "${KIND_DIR}/values.yaml" \
  --set "image.repository=${IMAGE_REPOSITORY}" --set "image.tag=${IMAGE_TAG}" \
  --wait --timeout 5m
for crd in nsqclusters nsqtopics nsqchannels; do
  kubectl wait --for condition=Established --timeout 60s "crd/${crd}.nsq.dev" >/dev/null
done
kubectl --namespace "${OPERATOR_NAMESPACE}" rollout status "deployment/${RELEASE}" --timeout 120s
log "operator running"
