#!/usr/bin/env bash
# Shared by the kind scripts: settings (each overridable from the environment), logging,
# waiting on a condition with a deadline, and the manifests of this folder rendered
# with the settings. Sourced, never run.
# shellcheck disable=SC2034  # the settings are used by the scripts that source this file

KIND_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${KIND_DIR}/../.." && pwd)"

KIND_CLUSTER="${KIND_CLUSTER:-nsq-e2e}"
IMAGE_REPOSITORY="${IMAGE_REPOSITORY:-nsq-operator}"
# The same image under two tags: changing the NsqCluster's image from one to the other
# is a new revision for the operator, so it rolls every pod.
IMAGE_TAG="${IMAGE_TAG:-e2e-1}"
UPGRADE_TAG="${UPGRADE_TAG:-e2e-2}"
OPERATOR_NAMESPACE="${OPERATOR_NAMESPACE:-nsq-system}"
NAMESPACE="${NAMESPACE:-nsq-e2e}"
RELEASE="${RELEASE:-nsq-operator}"
CLUSTER_NAME="nsq"                    # the NsqCluster of cluster.yaml
LOAD_RATE="${LOAD_RATE:-200}"         # messages per second per topic
LOAD_WARMUP="${LOAD_WARMUP:-20}"      # seconds of load before the cluster is changed
LOAD_COOLDOWN="${LOAD_COOLDOWN:-20}"  # seconds of load after the change is complete
READY_TIMEOUT="${READY_TIMEOUT:-300}" # seconds for the cluster to be Ready
ROLL_TIMEOUT="${ROLL_TIMEOUT:-900}"   # seconds for a rolling upgrade or a scale-down
SETTLE_TIMEOUT="${SETTLE_TIMEOUT:-180}" # seconds for the load to receive its last messages
# cert-manager, installed by up.sh for the TLS scenario (scenario-tls.sh), from its release manifest
CERT_MANAGER_VERSION="${CERT_MANAGER_VERSION:-v1.16.2}"
CERT_MANAGER_MANIFEST="${CERT_MANAGER_MANIFEST:-https://github.com/cert-manager/cert-manager/releases/download/${CERT_MANAGER_VERSION}/cert-manager.yaml}"
TLS_SECRET="${CLUSTER_NAME}-nsqd-tls"  # where cert-manager writes the NsqCluster's certificate

log() {
  printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2
}

die() {
  log "FAILED: $*"
  exit 1
}

need() {
  local tool
  for tool in "$@"; do
    command -v "${tool}" >/dev/null 2>&1 || die "${tool} is not on PATH (see e2e/kind/README.md)"
  done
}

# wait_until SECONDS WHAT COMMAND [ARGS...]: run COMMAND every 2 s until it succeeds;
# fail after SECONDS.
wait_until() {
  local timeout="$1" what="$2"
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@"; do
    if ((SECONDS >= deadline)); then
      die "${what}: not within ${timeout}s"
    fi
    sleep 2
  done
  log "${what}"
}

k() {
  kubectl --namespace "${NAMESPACE}" "$@"
}

image() {
  printf '%s:%s' "${IMAGE_REPOSITORY}" "$1"
}

# render FILE [NAME]: a manifest of this folder with its placeholders filled in.
render() {
  sed -e "s|__NAMESPACE__|${NAMESPACE}|g" \
    -e "s|__IMAGE__|$(image "${IMAGE_TAG}")|g" \
    -e "s|__NAME__|${2:-}|g" \
    -e "s|__RATE__|${LOAD_RATE}|g" \
    -e "s|__SETTLE_TIMEOUT__|${SETTLE_TIMEOUT}|g" \
    "${KIND_DIR}/$1"
}

ARTIFACTS_DIR="${ARTIFACTS_DIR:-${TMPDIR:-/tmp}/nsq-e2e-kind}"

# diagnose: what a failed run leaves for a human (also printed in short).
diagnose() {
  mkdir -p "${ARTIFACTS_DIR}"
  log "collecting diagnostics in ${ARTIFACTS_DIR}"
  k get nsqclusters,nsqtopics,nsqchannels,statefulsets,pods,pvc,jobs -o wide >"${ARTIFACTS_DIR}/objects.txt" 2>&1 || true
  k get nsqcluster "${CLUSTER_NAME}" -o yaml >"${ARTIFACTS_DIR}/nsqcluster.yaml" 2>&1 || true
  k get events --sort-by .lastTimestamp >"${ARTIFACTS_DIR}/events.txt" 2>&1 || true
  kubectl --namespace "${OPERATOR_NAMESPACE}" logs "deployment/${RELEASE}" --tail 500 >"${ARTIFACTS_DIR}/operator.log" 2>&1 || true
  local pod
  for pod in $(k get pods -o jsonpath='{.items[*].metadata.name}' 2>/dev/null); do
    k logs "${pod}" --all-containers --tail 300 >"${ARTIFACTS_DIR}/pod-${pod}.log" 2>&1 || true
  done
  cat "${ARTIFACTS_DIR}/objects.txt" >&2 || true
  tail -n 30 "${ARTIFACTS_DIR}/events.txt" >&2 || true
}
