#!/usr/bin/env bash
# Deletes the kind cluster (and with it everything the scenario created).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need kind
if kind get clusters | grep -qx "${KIND_CLUSTER}"; then
  kind delete cluster --name "${KIND_CLUSTER}"
else
  log "no kind cluster ${KIND_CLUSTER}"
fi
