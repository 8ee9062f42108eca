#!/usr/bin/env bash
# Starts the one-node Kubernetes that `make cluster` builds: etcd, kube-apiserver (RBAC,
# Pod Security admission, the service-account token issuer), kube-controller-manager,
# kube-scheduler, containerd with runc, the kubelet, CNI's bridge, kube-proxy, CoreDNS and
# a default StorageClass with a local provisioner that supports expansion. Everything runs
# as processes of this machine under ${STATE_DIR}; down.sh removes all of it. The last line
# printed is the `export KUBECONFIG=...` that reaches the cluster.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=pki.sh
source "${CLUSTER_DIR}/pki.sh"


setup_network() {
  modprobe br_netfilter 2>/dev/null || true
  modprobe overlay 2>/dev/null || true
  sysctl -qw net.ipv4.ip_forward=1
  [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] && sysctl -qw net.bridge.bridge-nf-call-iptables=1
  # On loopback: a host address like any other for routing, yet reachable from no other
  # machine (kernels without the dummy link type have it too).
  ip addr show dev lo | grep -q " ${NODE_IP}/32 " || ip addr add "${NODE_IP}/32" dev lo
  # A FORWARD policy of DROP (Docker sets one) would stop pod traffic; these two rules,
  # tagged so down.sh finds them, let the pods' range through whatever the policy is.
  local direction
  for direction in -s -d; do
    iptables -C FORWARD "${direction}" "${POD_CIDR}" -m comment --comment nsq-operator-cluster -j ACCEPT 2>/dev/null \
      || iptables -I FORWARD "${direction}" "${POD_CIDR}" -m comment --comment nsq-operator-cluster -j ACCEPT
  done
}

start_etcd() {
  start etcd "${BIN_DIR}/etcd" --name nsq-node --data-dir "${STATE_DIR}/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster nsq-node=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
    --unsafe-no-fsync --log-level warn
  wait_for 60 etcd curl -sf http://127.0.0.1:2381/health
}

# The requests of every service account outside kube-system (operators, the tests' pods),
# verb and object without bodies: what an operator sent is read here when a test counts it
write_audit_policy() {
  cat >"${STATE_DIR}/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    userGroups: ["system:serviceaccounts:kube-system"]
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
POLICY
}

start_apiserver() {
  write_audit_policy
  start kube-apiserver "${BIN_DIR}/kube-apiserver" \
    --etcd-servers http://127.0.0.1:2379 \
    --bind-address "${NODE_IP}" --advertise-address "${NODE_IP}" --secure-port "${APISERVER_PORT}" \
    --service-cluster-ip-range "${SERVICE_CIDR}" --allow-privileged=true \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --client-ca-file "${PKI_DIR}/ca.crt" \
    --tls-cert-file "${PKI_DIR}/apiserver.crt" --tls-private-key-file "${PKI_DIR}/apiserver.key" \
    --kubelet-client-certificate "${PKI_DIR}/apiserver-kubelet-client.crt" \
    --kubelet-client-key "${PKI_DIR}/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "${PKI_DIR}/ca.crt" --kubelet-preferred-address-types InternalIP \
    --service-account-issuer "https://kubernetes.default.svc.${CLUSTER_DOMAIN}" \
    --service-account-key-file "${PKI_DIR}/service-account.pub" \
    --service-account-signing-key-file "${PKI_DIR}/service-account.key" \
    --service-account-extend-token-expiration=false \
    --audit-policy-file "${STATE_DIR}/audit-policy.yaml" --audit-log-path "${LOG_DIR}/audit.log" \
    --audit-log-maxsize 200 --audit-log-maxbackup 1 --audit-log-format json \
    --v 1
  wait_for 120 kube-apiserver kubectl_admin get --raw /readyz
}

start_controllers() {
  start kube-controller-manager "${BIN_DIR}/kube-controller-manager" \
    --kubeconfig "${STATE_DIR}/controller-manager.kubeconfig" \
    --authentication-kubeconfig "${STATE_DIR}/controller-manager.kubeconfig" \
    --authorization-kubeconfig "${STATE_DIR}/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file "${PKI_DIR}/service-account.key" \
    --root-ca-file "${PKI_DIR}/ca.crt" \
    --cluster-signing-cert-file "${PKI_DIR}/ca.crt" --cluster-signing-key-file "${PKI_DIR}/ca.key" \
    --service-cluster-ip-range "${SERVICE_CIDR}" --v 1
  start kube-scheduler "${BIN_DIR}/kube-scheduler" \
    --kubeconfig "${STATE_DIR}/scheduler.kubeconfig" \
    --authentication-kubeconfig "${STATE_DIR}/scheduler.kubeconfig" \
    --authorization-kubeconfig "${STATE_DIR}/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --v 1
}

start_containerd() {
  mkdir -p "${STATE_DIR}/containerd" "${RUN_DIR}/containerd"
  cat >"${STATE_DIR}/containerd.toml" <<TOML
version = 3
root = "${STATE_DIR}/containerd/root"
state = "${RUN_DIR}/containerd/state"

[grpc]
  address = "${CONTAINERD_SOCKET}"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "${PAUSE_IMAGE}"

[plugins.'io.containerd.cri.v1.runtime']
  # Lowering an OOM score needs CAP_SYS_RESOURCE, which machines like these may not grant
  # even to root: the pause container's -998 (and Guaranteed pods' -997) are raised to
  # containerd's own score instead of failing every sandbox.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "${BIN_DIR}/runc"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "${CNI_CONF_DIR}"
TOML
  cat >"${CNI_CONF_DIR}/10-nsq-bridge.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "nsq-pods",
  "plugins": [
    {
      "type": "bridge", "bridge": "${BRIDGE}", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "${POD_CIDR}"}]], "routes": [{"dst": "0.0.0.0/0"}],
               "dataDir": "${STATE_DIR}/cni-ipam"}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
  start containerd env PATH="${BIN_DIR}:${PATH}" "${BIN_DIR}/containerd" --config "${STATE_DIR}/containerd.toml"
  wait_for 60 containerd "${BIN_DIR}/ctr" --address "${CONTAINERD_SOCKET}" version
}

# Images come from archives made here; the kubelet may never collect them (it could not
# pull them again), so each is pinned as well.
import_images() {
  local archive name
  # ctr warns on every call that cgroup v1 is deprecated: its chatter goes to the log.
  ctr() { "${BIN_DIR}/ctr" --address "${CONTAINERD_SOCKET}" -n k8s.io "$@" 2>>"${LOG_DIR}/images.log"; }
  for archive in "${IMAGE_DIR}/pause-${PAUSE_IMAGE##*:}.tar" "${IMAGE_DIR}/coredns-${COREDNS_VERSION}.tar" \
    "${IMAGE_DIR}/kube-router-${KUBE_ROUTER_VERSION}.tar" \
    "${IMAGE_DIR}/previous-release-${PREVIOUS_RELEASE_REF:0:12}.tar" "${IMAGE_DIR}/nsq-operator-current.tar"; do
    [[ -s "${archive}" ]] || die "missing image archive ${archive}: run e2e/cluster/images.sh"
    ctr images import "${archive}" >>"${LOG_DIR}/images.log"
  done
  # Two more names for the project's image, as e2e/kind/up.sh loads it into kind: a rolling
  # upgrade changes spec.image from the first to the second.
  local project
  project="$(project_image_name)"
  for name in "${ROLLOUT_IMAGE_REPOSITORY}:e2e-1" "${ROLLOUT_IMAGE_REPOSITORY}:e2e-2"; do
    ctr images tag --force "${project}" "${name}" >/dev/null
  done
  ctr images list -q | grep -v '^sha256:' | while read -r name; do
    ctr images label "${name}" io.cri-containerd.pinned=pinned >/dev/null
  done
}

start_kubelet() {
  mkdir -p "${KUBELET_DIR}"
  cat >"${STATE_DIR}/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${NODE_IP}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${PKI_DIR}/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: ${PKI_DIR}/kubelet.crt
tlsPrivateKeyFile: ${PKI_DIR}/kubelet.key
clusterDomain: ${CLUSTER_DOMAIN}
clusterDNS: [${DNS_SERVICE_IP}]
resolvConf: ""
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://${CONTAINERD_SOCKET}
imageServiceEndpoint: unix://${CONTAINERD_SOCKET}
# Nothing here can be pulled again: never collect an image.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
maxPods: 110
serializeImagePulls: false
YAML
  start kubelet "${BIN_DIR}/kubelet" --config "${STATE_DIR}/kubelet.yaml" \
    --kubeconfig "${STATE_DIR}/kubelet.kubeconfig" --root-dir "${KUBELET_DIR}" \
    --hostname-override "${NODE_NAME}" --node-ip "${NODE_IP}" --v 1
}

start_kube_proxy() {
  cat >"${STATE_DIR}/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: ${POD_CIDR}
hostnameOverride: ${NODE_NAME}
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["${NODE_IP}/32"]
clientConnection: {kubeconfig: ${STATE_DIR}/kube-proxy.kubeconfig}
conntrack: {maxPerCore: 0}
YAML
  start kube-proxy "${BIN_DIR}/kube-proxy" --config "${STATE_DIR}/kube-proxy.yaml" --v 1
}

node_ready() {
  [[ "$(kubectl_admin get node "${NODE_NAME}" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]
}

start_addons() {
  sed -e "s|__COREDNS_IMAGE__|${COREDNS_IMAGE}|" -e "s|__DNS_SERVICE_IP__|${DNS_SERVICE_IP}|" \
    -e "s|__CLUSTER_DOMAIN__|${CLUSTER_DOMAIN}|" "${CLUSTER_DIR}/addons/coredns.yaml" \
    | kubectl_admin apply -f - >/dev/null
  sed -e "s|__KUBE_ROUTER_IMAGE__|${KUBE_ROUTER_IMAGE}|" "${CLUSTER_DIR}/addons/kube-router.yaml" \
    | kubectl_admin apply -f - >/dev/null
  kubectl_admin apply -f "${CLUSTER_DIR}/addons/storage.yaml" >/dev/null
  start local-volumes python3 "${CLUSTER_DIR}/local_volumes.py" --server "${APISERVER_URL}" \
    --ca "${PKI_DIR}/ca.crt" --cert "${PKI_DIR}/local-volumes.crt" --key "${PKI_DIR}/local-volumes.key" \
    --root "${VOLUMES_DIR}"
}

dns_ready() {
  [[ "$(kubectl_admin -n kube-system get deployment coredns -o jsonpath='{.status.readyReplicas}')" == 1 ]]
}

policies_enforced() {
  [[ "$(kubectl_admin -n kube-system get daemonset kube-router -o jsonpath='{.status.numberReady}')" == 1 ]]
}

preconditions() {
  [[ "$(id -u)" == 0 ]] || die "the cluster needs root (containers, mounts, iptables)"
  for binary in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl \
    containerd containerd-shim-runc-v2 ctr runc; do
    [[ -x "${BIN_DIR}/${binary}" ]] || die "${binary} is not built: run e2e/cluster/build.sh"
  done
  running kube-apiserver && die "a cluster is already running (e2e/cluster/down.sh stops it)"
  # A cluster whose processes were ended without down.sh (a machine's session ending) leaves
  # its state, mounts and rules: clear them, so every start is a new cluster.
  if [[ -d "${STATE_DIR}" ]] && find "${STATE_DIR}" -mindepth 1 -maxdepth 1 ! -name 'logs*' | grep -q .; then
    log "clearing what an earlier cluster left"
    "${CLUSTER_DIR}/down.sh"
  fi
  started=$(date +%s)
  if [[ -d "${LOG_DIR}" ]]; then  # the previous cluster's logs are kept once, beside
    rm -rf "${LOG_DIR}.previous" && mv "${LOG_DIR}" "${LOG_DIR}.previous"
  fi
  mkdir -p "${STATE_DIR}" "${RUN_DIR}" "${LOG_DIR}" "${PID_DIR}" "${VOLUMES_DIR}" "${CNI_CONF_DIR}"
}

main() {
  preconditions
  setup_network
  make_pki
  start_etcd
  start_apiserver
  log "kube-apiserver ready ($(( $(date +%s) - started ))s)"
  start_controllers
  start_containerd
  import_images
  start_kubelet
  start_kube_proxy
  wait_for 120 "node ${NODE_NAME} Ready" node_ready
  start_addons
  wait_for 120 CoreDNS dns_ready
  wait_for 120 "kube-router's NetworkPolicy controller" policies_enforced
  log "cluster up in $(( $(date +%s) - started ))s; logs in ${LOG_DIR}"
  echo "export KUBECONFIG=${KUBECONFIG_ADMIN}"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main
fi
