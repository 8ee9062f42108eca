#!/usr/bin/env bash
# Stops the one-node cluster and removes what it left on the machine: its processes and
# every container, its mounts and network namespaces, its iptables rules, chains and
# ipsets, its links, its cgroups and its state (the logs stay in ${LOG_DIR} until the next
# start).
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ "$(id -u)" == 0 ]] || die "stopping the cluster needs root"

stop() {
  local name="$1" pid deadline
  [[ -f "${PID_DIR}/${name}.pid" ]] || return 0
  pid="$(cat "${PID_DIR}/${name}.pid")"
  kill -TERM -- "-${pid}" 2>/dev/null || kill -TERM "${pid}" 2>/dev/null
  deadline=$(( $(date +%s) + 15 ))
  while kill -0 "${pid}" 2>/dev/null && (( $(date +%s) < deadline )); do sleep 0.2; done
  kill -KILL -- "-${pid}" 2>/dev/null || kill -KILL "${pid}" 2>/dev/null
  rm -f "${PID_DIR}/${name}.pid"
}

descendants() {
  local child
  for child in $(pgrep -P "$1"); do
    echo "${child}"
    descendants "${child}"
  done
}

# Every container runs under a shim of this cluster's containerd: kill the shims' trees.
kill_containers() {
  local shim pids=() tree
  for shim in $(pgrep -f "containerd-shim-runc-v2 .*-address ${CONTAINERD_SOCKET}"); do
    mapfile -t tree < <(descendants "${shim}")
    pids+=("${shim}" "${tree[@]}")
  done
  (( ${#pids[@]} )) && kill -KILL "${pids[@]}" 2>/dev/null
  return 0
}

unmount_all() {
  local target
  findmnt -rn -o TARGET | awk -v state="${STATE_DIR}" -v run="${RUN_DIR}" \
    'index($0, state) == 1 || index($0, "/run/netns/cni-") == 1 || index($0, "/var/run/netns/cni-") == 1' \
    | sort -r | while read -r target; do umount -l "${target}" 2>/dev/null; done
  ip netns list 2>/dev/null | awk '/^cni-/ { print $1 }' | while read -r target; do ip netns delete "${target}"; done
}

# The rules and chains of the bridge plugin (CNI-*), kube-proxy and the kubelet (KUBE-*),
# and the two up.sh tagged, in IPv4 and IPv6.
remove_iptables() {
  local tool table chain rule
  [[ -x "${BIN_DIR}/kube-proxy" ]] && "${BIN_DIR}/kube-proxy" --cleanup >/dev/null 2>&1
  for tool in iptables ip6tables; do
    for table in filter nat mangle; do
      "${tool}" -t "${table}" -S 2>/dev/null | grep '^-A' | grep -E -- '-j (CNI|KUBE)-|nsq-operator-cluster' \
        | while read -r rule; do eval "${tool} -t ${table} -D ${rule#-A }" 2>/dev/null; done
      for chain in $("${tool}" -t "${table}" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(CNI|KUBE)-/ { print $2 }'); do
        "${tool}" -t "${table}" -F "${chain}" 2>/dev/null
      done
      for chain in $("${tool}" -t "${table}" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(CNI|KUBE)-/ { print $2 }'); do
        "${tool}" -t "${table}" -X "${chain}" 2>/dev/null
      done
    done
  done
  return 0
}

# kube-router's sets (its chains are KUBE-*, removed above), once no rule refers to them.
remove_ipsets() {
  command -v ipset >/dev/null || return 0
  ipset list -n 2>/dev/null | grep -E '^(KUBE-|kube-router)' | while read -r set; do
    ipset destroy "${set}" 2>/dev/null
  done
  return 0
}

remove_cgroups() {
  local controller
  for controller in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/unified/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d "${controller}" ]] || continue
    find "${controller}" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  return 0
}

stop local-volumes
stop kube-proxy
stop kubelet
kill_containers
stop containerd
stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver
stop etcd
unmount_all
remove_iptables
remove_ipsets
ip link delete "${BRIDGE}" 2>/dev/null
ip addr delete "${NODE_IP}/32" dev lo 2>/dev/null
remove_cgroups
if [[ -d "${STATE_DIR}" ]]; then
  find "${STATE_DIR}" -mindepth 1 -maxdepth 1 ! -name 'logs*' -exec rm -rf {} +
fi

# What `make cluster-down` promises, checked: exit 1 and name what is left otherwise.
left=()
mapfile -t processes < <(pgrep -af "${BIN_DIR}/|containerd-shim-runc-v2 .*${CONTAINERD_SOCKET}|local_volumes.py" | grep -v "^$$ ")
(( ${#processes[@]} )) && left+=("processes: ${processes[*]}")
findmnt -rn -o TARGET | grep -q "^${STATE_DIR}" && left+=("mounts under ${STATE_DIR}")
for tool in iptables ip6tables; do
  "${tool}-save" 2>/dev/null | grep -qE '(CNI|KUBE)-|nsq-operator-cluster' && left+=("${tool} rules")
done
ipset list -n 2>/dev/null | grep -qE '^(KUBE-|kube-router)' && left+=("kube-router's ipsets")
ip link show "${BRIDGE}" >/dev/null 2>&1 && left+=("link ${BRIDGE}")
ip addr show dev lo | grep -q " ${NODE_IP}/32 " && left+=("address ${NODE_IP}")
if (( ${#left[@]} )); then
  die "left behind: ${left[*]}"
fi
log "cluster stopped; nothing left behind"
