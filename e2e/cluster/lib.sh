#!/usr/bin/env bash
# Shared by the scripts of the one-node cluster: where the build cache and the running
# cluster's state live, and small helpers. Sourced, never run.
# shellcheck disable=SC2034  # names used by the scripts that source this file

CLUSTER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "${CLUSTER_DIR}/../.." && pwd)"
# shellcheck source=versions.env
source "${CLUSTER_DIR}/versions.env"

# Built binaries and images are cached outside the repository, keyed by the pinned versions
# and the build script, so a second `make cluster` (or CI on the same machine) builds nothing.
CACHE_ROOT="${NSQ_CLUSTER_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/nsq-operator-cluster}"
BUILD_KEY="$( (grep -E '^(KUBERNETES|ETCD|CONTAINERD|COREDNS|RUNC)_VERSION=' "${CLUSTER_DIR}/versions.env"; \
  cat "${CLUSTER_DIR}/build.sh") | sha256sum | cut -c1-12)"
BUILD_DIR="${CACHE_ROOT}/build-${BUILD_KEY}"
BIN_DIR="${BUILD_DIR}/bin"
IMAGE_DIR="${CACHE_ROOT}/images"

# The running cluster: certificates, configs, logs, etcd's data, containerd's root.
STATE_DIR="${NSQ_CLUSTER_STATE:-/var/lib/nsq-operator-cluster}"
RUN_DIR="${STATE_DIR}/run"
LOG_DIR="${STATE_DIR}/logs"
PKI_DIR="${STATE_DIR}/pki"
KUBECONFIG_ADMIN="${STATE_DIR}/admin.kubeconfig"

# The node's addresses: the apiserver is reached on loopback; pods and Services get ranges
# no other network here uses.
APISERVER_PORT=6443
POD_CIDR="10.244.0.0/24"
SERVICE_CIDR="10.96.0.0/16"
KUBERNETES_SERVICE_IP="10.96.0.1"
DNS_SERVICE_IP="10.96.0.10"
CLUSTER_DOMAIN="cluster.local"
NODE_NAME="nsq-node"
CONTAINERD_SOCKET="${RUN_DIR}/containerd/containerd.sock"
ROLLOUT_IMAGE_REPOSITORY="localhost/nsq-operator"

log() { printf '%s cluster: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "$*"; exit 1; }

# wait_for SECONDS DESCRIPTION COMMAND...: runs COMMAND until it succeeds or time is up.
wait_for() {
  local seconds="$1" what="$2" deadline
  shift 2
  deadline=$(( $(date +%s) + seconds ))
  until "$@" >/dev/null 2>&1; do
    if (( $(date +%s) >= deadline )); then
      die "timed out after ${seconds}s waiting for ${what}"
    fi
    sleep 1
  done
}

# The node's own address, added to loopback: the apiserver and the kubelet listen there
# (and on nothing the machine's other interfaces reach), and pods reach it through their
# bridge's gateway like any address of the host.
NODE_IP="10.250.0.1"
BRIDGE="nsq-cni0"
PID_DIR="${RUN_DIR}/pids"
KUBELET_DIR="${STATE_DIR}/kubelet"
VOLUMES_DIR="${STATE_DIR}/volumes"
CNI_CONF_DIR="${STATE_DIR}/cni"
APISERVER_URL="https://${NODE_IP}:${APISERVER_PORT}"

kubectl_admin() { "${BIN_DIR}/kubectl" --kubeconfig "${KUBECONFIG_ADMIN}" "$@"; }

# start NAME COMMAND...: runs a component in the background, its own session, logs to a file.
start() {
  local name="$1"
  shift
  mkdir -p "${PID_DIR}" "${LOG_DIR}"
  setsid "$@" >>"${LOG_DIR}/${name}.log" 2>&1 < /dev/null &
  echo $! >"${PID_DIR}/${name}.pid"
}

running() { [[ -f "${PID_DIR}/$1.pid" ]] && kill -0 "$(cat "${PID_DIR}/$1.pid")" 2>/dev/null; }

# The name the chart and the operator default to (the release's), so that `helm install`
# without image settings runs what was built here.
project_image_name() {
  local version
  version="$(sed -n 's/^version = "\(.*\)"/\1/p' "${REPO_DIR}/pyproject.toml" | head -1)"
  echo "ghcr.io/nsq-operator/nsq-operator:${version}"
}
