#!/usr/bin/env bash
# Makes the images the one-node cluster runs, with no registry: the pause image compiled
# from Kubernetes' build/pause/linux/pause.c, CoreDNS FROM scratch, a Debian base with
# Python from debootstrap, and on that base (buildah, from Debian's packages) kube-router
# and the project's image from its own Dockerfile. Writes archives to ${IMAGE_DIR}; the
# base images are cached by version, the project's image by the content of what its
# Dockerfile copies. The project's image is built reproducibly (dated by its sources' last
# commit) and gets an SPDX SBOM beside its archive (image_sbom.py).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mkdir -p "${IMAGE_DIR}"
OCI_IMAGE=(python3 "${CLUSTER_DIR}/oci_image.py")

pause_image() {
  local out="${IMAGE_DIR}/pause-${PAUSE_IMAGE##*:}.tar" source work
  [[ -s "${out}" ]] && return
  log "building the pause image from Kubernetes ${KUBERNETES_VERSION}'s pause.c"
  source="$(go env GOMODCACHE)/k8s.io/kubernetes@${KUBERNETES_VERSION}/build/pause/linux/pause.c"
  [[ -f "${source}" ]] || GOFLAGS=-mod=mod go mod download "k8s.io/kubernetes@${KUBERNETES_VERSION}"
  work="$(mktemp -d)"
  gcc -Os -Wall -Werror -static -DVERSION="v${PAUSE_IMAGE##*:}-nsq-operator" -o "${work}/pause" "${source}"
  strip "${work}/pause"
  "${OCI_IMAGE[@]}" --name "${PAUSE_IMAGE}" --file "${work}/pause:/pause" --entrypoint /pause \
    --user 65535:65535 --out "${out}.partial"
  mv "${out}.partial" "${out}"
  rm -rf "${work}"
}

coredns_image() {
  local out="${IMAGE_DIR}/coredns-${COREDNS_VERSION}.tar"
  [[ -s "${out}" ]] && return
  log "making the CoreDNS image"
  "${OCI_IMAGE[@]}" --name "${COREDNS_IMAGE}" --file "${BIN_DIR}/coredns:/coredns" \
    --entrypoint /coredns --user 65532:65532 --out "${out}.partial"
  mv "${out}.partial" "${out}"
}

# Debian with Python 3.11, pip and `python`: what the Dockerfile's python:3.11-slim gives it. The
# machine's own extra certificate authorities go in too, so pip inside the build reaches
# the package index the way pip on this machine does.
python_base_image() {
  local out="${IMAGE_DIR}/debian-python-${DEBIAN_SUITE}.tar" rootfs
  [[ -s "${out}" ]] && return
  log "making the Debian ${DEBIAN_SUITE} base with debootstrap"
  rootfs="$(mktemp -d)"
  mkdir -p "${LOG_DIR}"  # a fresh machine: no cluster has made it yet
  debootstrap --variant=minbase --include=python3,python3-pip,python-is-python3,ca-certificates \
    "${DEBIAN_SUITE}" "${rootfs}" http://deb.debian.org/debian >"${LOG_DIR}/debootstrap.log" 2>&1 \
    || die "debootstrap failed: $(tail -5 "${LOG_DIR}/debootstrap.log")"
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "${rootfs}/usr/local/share/ca-certificates/"
    chroot "${rootfs}" update-ca-certificates >/dev/null
  fi
  # The image is a base for pip installs, as python:3.11-slim is: Debian's marker that
  # the system Python belongs to apt would refuse them.
  rm -f "${rootfs}"/usr/lib/python3*/EXTERNALLY-MANAGED
  rm -rf "${rootfs}"/var/lib/apt/lists/* "${rootfs}"/var/cache/apt/*.bin "${rootfs}"/var/cache/apt/archives/*.deb
  "${OCI_IMAGE[@]}" --name "${PYTHON_BASE_IMAGE}" --rootfs "${rootfs}" --cmd python3 \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
    --out "${out}.partial"
  mv "${out}.partial" "${out}"
  rm -rf "${rootfs}"
}

# buildah runs each RUN step with an OCI runtime found on PATH (runc or crun), which
# Debian's buildah only recommends: without one it fails with "exec: no command". The
# runc built for the cluster serves when the machine has none.
if ! command -v runc >/dev/null && ! command -v crun >/dev/null; then
  export BUILDAH_RUNTIME="${BUILDAH_RUNTIME:-${BIN_DIR}/runc}"
fi

# buildah builds FROM the Debian base by its name: load it from its archive once.
buildah_has_base() {
  buildah images --quiet "${PYTHON_BASE_IMAGE}" >/dev/null 2>&1 && return
  buildah pull --quiet "oci-archive:${IMAGE_DIR}/debian-python-${DEBIAN_SUITE}.tar" >/dev/null
  buildah tag "$(buildah images --quiet --filter "reference=*${PYTHON_BASE_IMAGE##*/}" | head -1)" \
    "${PYTHON_BASE_IMAGE}" 2>/dev/null || true
}

# kube-router built from its module like the cluster's programs (but here, so that its
# version is not part of their cache key), on the Debian base with the iptables and ipset
# it runs.
kube_router_image() {
  local out="${IMAGE_DIR}/kube-router-${KUBE_ROUTER_VERSION}.tar" work
  [[ -s "${out}" ]] && return
  log "building kube-router ${KUBE_ROUTER_VERSION}"
  work="$(mktemp -d)"
  (
    cd "${work}"
    export GOFLAGS="-mod=mod -trimpath" CGO_ENABLED=0 GOTOOLCHAIN=local
    printf 'module nsq-operator.local/cluster/kube-router\n\ngo 1.24.0\n' >go.mod
    go mod edit -require="github.com/cloudnativelabs/kube-router/v2@${KUBE_ROUTER_VERSION}"
    go build -ldflags "-s -w" -o kube-router github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
  )
  buildah_has_base
  buildah bud --quiet --layers=false --network host --pull-never \
    --build-arg "BASE_IMAGE=${PYTHON_BASE_IMAGE}" --tag "${KUBE_ROUTER_IMAGE}" \
    --file "${CLUSTER_DIR}/addons/kube-router.Containerfile" "${work}" >/dev/null
  buildah push --quiet "${KUBE_ROUTER_IMAGE}" "docker-archive:${out}.partial:${KUBE_ROUTER_IMAGE}"
  mv "${out}.partial" "${out}"
  rm -rf "${work}"
}

# The image an earlier commit shipped, built from that commit's own Dockerfile and tree, for
# the upgrade from it (upgrade.sh). Its archive is kept by commit.
previous_image() {
  local out="${IMAGE_DIR}/previous-release-${PREVIOUS_RELEASE_REF:0:12}.tar" work
  [[ -s "${out}" ]] && return
  git -C "${REPO_DIR}" cat-file -e "${PREVIOUS_RELEASE_REF}^{commit}" 2>/dev/null \
    || die "commit ${PREVIOUS_RELEASE_REF} (the previous release) is not in this clone: fetch the whole history"
  log "building the previous release's image from ${PREVIOUS_RELEASE_REF:0:12}"
  work="$(mktemp -d)"
  git -C "${REPO_DIR}" archive "${PREVIOUS_RELEASE_REF}" | tar -x -C "${work}"
  buildah_has_base
  buildah bud --quiet --layers=false --network host --pull-never \
    --build-arg "PYTHON_IMAGE=${PYTHON_BASE_IMAGE}" --tag "${PREVIOUS_IMAGE}" \
    --file "${work}/Dockerfile" "${work}" >/dev/null
  rm -f "${IMAGE_DIR}"/previous-release-*.tar
  buildah push --quiet "${PREVIOUS_IMAGE}" "docker-archive:${out}.partial:${PREVIOUS_IMAGE}"
  mv "${out}.partial" "${out}"
  rm -rf "${work}"
}

# What the Dockerfile copies: a change to any of it makes a new image.
PROJECT_SOURCES=(Dockerfile pyproject.toml README.md LICENSE image-constraints.txt protocol broker lookupd admin
  client local operator pipeline)

# The hash of those files, committed and not, and of the date the image is stamped with:
# the image's cache key. (The same files committed again later, as by a revert, are
# stamped with the later date: another image.)
project_source_key() {
  (cd "${REPO_DIR}" && git ls-files -s "${PROJECT_SOURCES[@]}" && git diff HEAD -- "${PROJECT_SOURCES[@]}" \
    && project_source_date) | sha256sum | cut -c1-12
}

# The time of the last commit that changed those files: every file time and the image's
# creation date are this, so the same sources build the same image (tests/cluster/test_image.py).
project_source_date() {
  git -C "${REPO_DIR}" log -1 --format=%ct -- "${PROJECT_SOURCES[@]}"
}

# build_project_image NAME: builds the Dockerfile on the local base into buildah's store.
build_project_image() {
  local epoch
  epoch="$(project_source_date)"
  buildah_has_base
  buildah bud --quiet --layers=false --network host --pull-never --timestamp "${epoch}" \
    --build-arg "SOURCE_DATE_EPOCH=${epoch}" --build-arg "PYTHON_IMAGE=${PYTHON_BASE_IMAGE}" \
    --tag "$1" --file "${REPO_DIR}/Dockerfile" "${REPO_DIR}" >/dev/null
}

project_image() {
  local key out name
  key="$(project_source_key)"
  out="${IMAGE_DIR}/nsq-operator-${key}.tar"
  name="$(project_image_name)"
  if [[ ! -s "${out}" ]]; then
    log "building the project's image from its Dockerfile (${key})"
    build_project_image "${name}"
    rm -f "${IMAGE_DIR}"/nsq-operator-*.tar "${IMAGE_DIR}"/nsq-operator-*.spdx.json
    buildah push --quiet "${name}" "docker-archive:${out}.partial:${name}"
    mv "${out}.partial" "${out}"
  fi
  # its SBOM (SPDX): the Debian and Python packages in the archive
  [[ -s "${out%.tar}.spdx.json" ]] || python3 "${CLUSTER_DIR}/image_sbom.py" "${out}" --name "${name}" \
    --out "${out%.tar}.spdx.json" >/dev/null
  ln -sf "${out}" "${IMAGE_DIR}/nsq-operator-current.tar"
  ln -sf "${out%.tar}.spdx.json" "${IMAGE_DIR}/nsq-operator-current.spdx.json"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  started=$(date +%s)
  pause_image
  coredns_image
  python_base_image
  kube_router_image
  previous_image
  project_image
  log "images ready in ${IMAGE_DIR} ($(( $(date +%s) - started ))s)"
fi
