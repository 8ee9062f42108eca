#!/usr/bin/env bash
# The TLS scenario, on a cluster prepared by up.sh (cert-manager installed): an NsqCluster
# whose certificate cert-manager issues from a CA of its own (cluster-tls.yaml:
# --tls-required=true, plain TCP and HTTP closed); TLS clients under load (load-job-tls.yaml,
# verifying nsqd against the CA); the certificate renewed (its Secret deleted: cert-manager
# issues a new one); every nsqd replaced through the drain roller onto it; the load
# stopped and its counts checked (0 acknowledged messages lost); everything deleted.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/checks.sh"

need kubectl
mkdir -p "${ARTIFACTS_DIR}"
log "creating the TLS NsqCluster in ${NAMESPACE}"
kubectl create namespace "${NAMESPACE}" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace "${NAMESPACE}" --overwrite pod-security.kubernetes.io/enforce=restricted >/dev/null
render cluster-tls.yaml | kubectl apply -f - >/dev/null
wait_until "${READY_TIMEOUT}" "TLS cluster Ready" cluster_settled_on "$(image "${IMAGE_TAG}")" 3
for channel in orders-billing orders-archive clicks-billing clicks-archive; do
  k wait --for condition=Ready --timeout 120s "nsqchannel/${channel}" >/dev/null
done
before="$(nsqd_tls_revisions | head -n 1)"
[[ -n "${before}" ]] || die "the nsqd pods carry no TLS revision"

log "certificate renewal under TLS load"
start_load load-tls load-job-tls.yaml
sleep "${LOAD_WARMUP}"  # load before the change, by design: not a synchronisation
k delete secret "${TLS_SECRET}" >/dev/null  # cert-manager issues the certificate anew
wait_until "${ROLL_TIMEOUT}" "every nsqd replaced onto the renewed certificate" tls_rolled_from "${before}" 3
sleep "${LOAD_COOLDOWN}"  # load after the change: TLS clients are back on every nsqd
stop_load load-tls

log "deleting the TLS cluster"
k delete nsqchannels,nsqtopics --all --wait --timeout 120s >/dev/null
k delete nsqcluster "${CLUSTER_NAME}" --wait --timeout 180s >/dev/null
kubectl delete namespace "${NAMESPACE}" --wait --timeout 180s >/dev/null
log "TLS scenario passed"
