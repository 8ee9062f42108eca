#!/usr/bin/env bash
# Builds the one-node cluster's programs from the Go module proxy: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy and kubectl from
# k8s.io/kubernetes, etcd, containerd with its runc shim and ctr, runc, and CoreDNS. Each comes
# from its upstream module at the version pinned in versions.env; nothing is downloaded
# but Go modules. Output: ${BIN_DIR} (see lib.sh), skipped when already built.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

export GOFLAGS="-mod=mod -trimpath" CGO_ENABLED=0 GOTOOLCHAIN=local
mkdir -p "${BIN_DIR}" "${BUILD_DIR}/src"

# module_dir NAME GO_VERSION: a fresh module of our own to build upstream packages in.
module_dir() {
  local dir="${BUILD_DIR}/src/$1"
  rm -rf "${dir}" && mkdir -p "${dir}"
  printf 'module nsq-operator.local/cluster/%s\n\ngo %s\n' "$1" "$2" >"${dir}/go.mod"
  echo "${dir}"
}

built() {
  local name
  for name in "$@"; do [[ -x "${BIN_DIR}/${name}" ]] || return 1; done
}

build_kubernetes() {
  built kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl && return
  log "building Kubernetes ${KUBERNETES_VERSION}"
  local dir minor staging mod_file
  dir="$(module_dir kubernetes 1.24.0)"
  # k8s.io/kubernetes requires its staging modules at v0.0.0 (its own tree replaces them);
  # outside its tree each is pinned to the release's matching v0.MINOR.PATCH tag.
  staging="v0.${KUBERNETES_VERSION#v1.}"
  mod_file="$(go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  (
    cd "${dir}"
    go mod edit -require="k8s.io/kubernetes@${KUBERNETES_VERSION}"
    awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "${mod_file}" | while read -r module; do
      go mod edit -replace="${module}=${module}@${staging}"
    done
    minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
    local pkg=k8s.io/component-base/version
    local ldflags="-s -w -X ${pkg}.gitVersion=${KUBERNETES_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
    ldflags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
    ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=${KUBERNETES_VERSION}"
    go build -ldflags "${ldflags}" -o "${BIN_DIR}/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet \
      k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl
  )
}

build_etcd() {
  built etcd && return
  log "building etcd ${ETCD_VERSION}"
  local dir
  dir="$(module_dir etcd 1.24.0)"
  (
    cd "${dir}"
    go mod edit -require="go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
    go build -ldflags "-s -w" -o "${BIN_DIR}/etcd" go.etcd.io/etcd/server/v3
  )
}

build_containerd() {
  built containerd containerd-shim-runc-v2 ctr && return
  log "building containerd ${CONTAINERD_VERSION}"
  local dir
  dir="$(module_dir containerd 1.24.0)"
  (
    cd "${dir}"
    go mod edit -require="github.com/containerd/containerd/v2@${CONTAINERD_VERSION}"
    # btrfs and devmapper snapshotters need C headers; the cluster uses overlayfs.
    go build -tags "no_btrfs no_devmapper no_zfs" \
      -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION}" \
      -o "${BIN_DIR}/" github.com/containerd/containerd/v2/cmd/containerd \
      github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
      github.com/containerd/containerd/v2/cmd/ctr
  )
}

# runc needs cgo for its seccomp filter (libseccomp from Debian's libseccomp-dev).
build_runc() {
  built runc && return
  log "building runc ${RUNC_VERSION}"
  local dir
  dir="$(module_dir runc 1.24.0)"
  (
    cd "${dir}"
    go mod edit -require="github.com/opencontainers/runc@${RUNC_VERSION}"
    CGO_ENABLED=1 go build -tags seccomp -ldflags "-s -w -X main.version=${RUNC_VERSION#v}" \
      -o "${BIN_DIR}/runc" github.com/opencontainers/runc
  )
}

build_coredns() {
  built coredns && return
  log "building CoreDNS ${COREDNS_VERSION}"
  local dir
  dir="$(module_dir coredns 1.24.0)"
  (
    cd "${dir}"
    go mod edit -require="github.com/coredns/coredns@${COREDNS_VERSION}"
    go build -ldflags "-s -w" -o "${BIN_DIR}/coredns" github.com/coredns/coredns
  )
}

started=$(date +%s)
build_kubernetes
build_etcd
build_containerd
build_runc
build_coredns
log "binaries ready in ${BIN_DIR} ($(( $(date +%s) - started ))s)"
