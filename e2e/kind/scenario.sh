#!/usr/bin/env bash
# The scenario, on a cluster prepared by up.sh: an NsqCluster (3 nsqds, 2 lookupds) with
# topics and channels; under load, an image upgrade rolled pod by pod, highest ordinal
# first; the load stopped and its counts checked (0 acknowledged messages lost); then,
# under a new load, nsqd scaled 3 -> 2 and the counts checked again; everything deleted.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/checks.sh"

need kubectl
mkdir -p "${ARTIFACTS_DIR}"
log "creating the NsqCluster in ${NAMESPACE}"
kubectl create namespace "${NAMESPACE}" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
# the pods must be admitted where Pod Security "restricted" is enforced
kubectl label namespace "${NAMESPACE}" --overwrite pod-security.kubernetes.io/enforce=restricted >/dev/null
render cluster.yaml | kubectl apply -f - >/dev/null
wait_until "${READY_TIMEOUT}" "cluster Ready" cluster_settled_on "$(image "${IMAGE_TAG}")" 3
for channel in orders-billing orders-archive clicks-billing clicks-archive; do
  k wait --for condition=Ready --timeout 120s "nsqchannel/${channel}" >/dev/null
done

# the API server itself refuses renaming what an NsqTopic declares (a CEL transition rule)
if k patch nsqtopic orders --type merge --patch '{"spec": {"topicName": "renamed"}}' >/dev/null 2>&1; then
  die "the API server accepted a new spec.topicName: the CRD's transition rule is not applied"
fi

log "rolling upgrade under load"
start_load load-upgrade
sleep "${LOAD_WARMUP}"  # load before the change, by design: not a synchronisation
patched_at="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
k patch nsqcluster "${CLUSTER_NAME}" --type merge \
  --patch "{\"spec\": {\"image\": \"$(image "${UPGRADE_TAG}")\"}}" >/dev/null
wait_until "${ROLL_TIMEOUT}" "every pod runs ${UPGRADE_TAG}" cluster_settled_on "$(image "${UPGRADE_TAG}")" 3
check_roll_order "${patched_at}"
sleep "${LOAD_COOLDOWN}"  # load after the change: producers and consumers are back on every nsqd
stop_load load-upgrade

log "scale-down 3 -> 2 under load"
start_load load-scale
sleep "${LOAD_WARMUP}"
k patch nsqcluster "${CLUSTER_NAME}" --type merge --patch '{"spec": {"nsqd": {"replicas": 2}}}' >/dev/null
wait_until "${ROLL_TIMEOUT}" "nsqd scaled to 2" cluster_settled_on "$(image "${UPGRADE_TAG}")" 2
wait_until 120 "${CLUSTER_NAME}-nsqd-2 gone" pod_gone "${CLUSTER_NAME}-nsqd-2"
wait_until 120 "its claim deleted (whenScaled: Delete)" claim_gone "data-${CLUSTER_NAME}-nsqd-2"
sleep "${LOAD_COOLDOWN}"
stop_load load-scale

log "deleting the cluster (since $(date -u +%Y-%m-%dT%H:%M:%S))"
k delete nsqchannels,nsqtopics --all --wait --timeout 120s >/dev/null
k delete nsqcluster "${CLUSTER_NAME}" --wait --timeout 180s >/dev/null
kubectl delete namespace "${NAMESPACE}" --wait --timeout 180s >/dev/null
log "scenario passed"
